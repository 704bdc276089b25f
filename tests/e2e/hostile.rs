//! Hostile objects through the real API server (issue 27): runtime envs nested 40,000
//! deep (block YAML and flow JSON), a merge-key bomb, an alias bomb, strings of hundreds
//! of KiB, a worker of a RayCluster with 2,000,000,000 hosts per replica, deep JSON in
//! the cluster-spec annotation the provisioner parses. Each is stored as sent, with a rayshare warning
//! where rayshare was asked (fail-open, answered by rayshare itself, not by the API
//! server giving up on it); afterwards the same process (same pid) still rewrites an
//! ordinary job within a few times the latency measured before.
//!
//! Deep JSON has no other way to rayshare: the RayJob CRD has no
//! `x-kubernetes-preserve-unknown-fields` anywhere (the API server prunes unknown fields
//! before admission) and a pod is decoded into its typed fields. The preserved places
//! are strings: `runtimeEnvYAML` (JSON is YAML, so the flow case is deep JSON) and the
//! `rayshare.io/cluster-spec` annotation, which the provisioner parses on stored jobs.
//!
//! Every case is run and judged before the test fails, so one run shows them all.

use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::harness::*;

/// 40,000 levels: four times go-yaml v2's own limit, far past any recursive reader's stack.
const DEPTH: usize = 40_000;
/// Under etcd's 1.5 MiB request limit for the whole object, with both strings in it.
const HUGE: usize = 700_000;

/// What the API server answered to one create.
struct Answer {
    status: u16,
    /// The `Warning` headers (admission webhook warnings come back as these).
    warnings: Vec<String>,
    body: Value,
    latency: Duration,
}

impl Answer {
    fn rayshare_warnings(&self) -> Vec<&String> {
        self.warnings
            .iter()
            .filter(|w| w.contains("rayshare"))
            .collect()
    }

    fn short(&self) -> String {
        let text = self.body.to_string();
        let cut: String = text.chars().take(600).collect();
        format!(
            "HTTP {} after {:?}, warnings {:?}, body {cut}",
            self.status, self.latency, self.warnings
        )
    }
}

/// POSTs `object` to `path` as it is (no discovery, no retries), timing the round trip
/// and keeping the warnings kube's typed API would drop.
async fn post(env: &TestEnv, path: &str, object: &Value, dry_run: bool) -> Answer {
    let params = PostParams {
        dry_run,
        ..Default::default()
    };
    let request = kube::core::Request::new(path)
        .create(&params, serde_json::to_vec(object).unwrap())
        .unwrap();
    let started = Instant::now();
    let call = async {
        let response = env
            .admin
            .send(request.map(kube::client::Body::from))
            .await
            .expect("the API server answers");
        let status = response.status().as_u16();
        let warnings = response
            .headers()
            .get_all("warning")
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, warnings, bytes)
    };
    // The API server gives up on the webhook after its timeoutSeconds (5 s).
    let Ok((status, warnings, bytes)) = tokio::time::timeout(Duration::from_secs(60), call).await
    else {
        return Answer {
            status: 0,
            warnings: vec![],
            body: json!("no answer from the API server in 60 s"),
            latency: started.elapsed(),
        };
    };
    let latency = started.elapsed();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| json!(String::from_utf8_lossy(&bytes).into_owned()));
    Answer {
        status,
        warnings,
        body,
        latency,
    }
}

fn jobs_path(ns: &str) -> String {
    format!("/apis/ray.io/v1/namespaces/{ns}/rayjobs")
}

/// rayshare's metrics, or `None` when it does not answer within 10 s (it died, or no
/// worker is left to serve them).
async fn scrape(r: &Rayshare) -> Option<String> {
    let get = async {
        let response = reqwest::get(format!("{}/metrics", r.admin_url))
            .await
            .ok()?;
        response.text().await.ok()
    };
    tokio::time::timeout(Duration::from_secs(10), get)
        .await
        .ok()
        .flatten()
}

/// Whether rayshare answers `/readyz` within 10 s. When it does not, it is killed
/// (`SIGKILL`): a process whose workers are all busy does not stop on `SIGTERM` either,
/// and the harness would wait for it forever.
async fn ready_or_killed(r: &Rayshare) -> bool {
    let get = reqwest::get(format!("{}/readyz", r.admin_url));
    let ready = tokio::time::timeout(Duration::from_secs(10), get)
        .await
        .is_ok_and(|r| r.is_ok_and(|r| r.status().is_success()));
    if !ready && let Some(pid) = r.pid() {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    ready
}

/// A counter's value (0 when the series does not exist yet).
fn counter(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .parse::<f64>()
                .ok()
        })
        .map_or(0, |v| v as u64)
}

/// CREATE admissions of `kind` rayshare finished, as (left unchanged or failed open,
/// mutated).
fn answered(metrics: &str, kind: &str) -> (u64, u64) {
    let series = |outcome: &str| {
        let s = format!(
            "rayshare_admission_requests_total{{kind=\"{kind}\",operation=\"CREATE\",outcome=\"{outcome}\"}}"
        );
        counter(metrics, &s)
    };
    (
        series("unchanged") + series("failed_open"),
        series("mutated"),
    )
}

/// An ordinary RayJob of `deploy/samples/rayjob-run-a.yaml`'s shape, named `name`.
fn ordinary(name: &str) -> Value {
    let mut job = sample("rayjob-run-a.yaml");
    job["metadata"]["name"] = json!(name);
    job
}

/// The sample job with a hostile `runtimeEnvYAML`.
fn with_runtime_env(name: &str, runtime_env: String) -> Value {
    let mut job = ordinary(name);
    job["spec"]["runtimeEnvYAML"] = json!(runtime_env);
    job
}

/// One of rayshare's own hostile runtime envs (`kuberay_yaml::hostile`), by name: the unit
/// tests, the fuzzer and the benchmark use the same texts.
fn library_sample(name: &str) -> String {
    rayshare::shared_cluster::kuberay_yaml::hostile::runtime_envs()
        .into_iter()
        .find_map(|(n, text)| (n == name).then_some(text))
        .unwrap_or_else(|| panic!("no hostile sample {name:?}"))
}

/// A JSON document (JSON is YAML) whose `pip` is an array nested `DEPTH` deep.
fn deep_flow_json() -> String {
    format!(
        "{{\"pip\": {}\"x\"{}}}",
        "[".repeat(DEPTH),
        "]".repeat(DEPTH)
    )
}

/// A `HUGE`-byte string in `runtimeEnvYAML`, and another in an env var of the head.
fn huge_strings(name: &str) -> Value {
    let runtime_env = format!("pip:\n  - \"{}\"\n", "p".repeat(HUGE));
    let mut job = with_runtime_env(name, runtime_env);
    let head =
        &mut job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0];
    head["env"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "BIG_CONFIG", "value": "e".repeat(HUGE)}));
    job
}

/// Checks one hostile RayJob: created, stored exactly as the API server stores it
/// without rayshare (a dry run in the namespace rayshare does not serve), answered by
/// rayshare with a warning and without a mutation.
async fn hostile_job(env: &TestEnv, job: Value, problems: &mut Vec<String>) {
    let name = job["metadata"]["name"].as_str().unwrap().to_string();
    let mut fail = |what: String| problems.push(format!("{name}: {what}"));
    let before = scrape(&env.instances[0]).await;
    let answer = post(env, &jobs_path(&env.ns), &job, false).await;
    let after = scrape(&env.instances[0]).await;
    eprintln!(
        "[hostile] {name}: HTTP {} in {:?}, warnings {:?}",
        answer.status, answer.latency, answer.warnings
    );
    if answer.status != 201 {
        return fail(format!("not created (fail-open): {}", answer.short()));
    }
    let reference = post(env, &jobs_path(&env.ns_off), &job, true).await;
    assert_eq!(reference.status, 201, "{}", reference.short());
    let stored = env
        .api(&ray_job_resource(), &env.ns)
        .get(&name)
        .await
        .unwrap();
    let stored = serde_json::to_value(stored).unwrap();
    if stored["spec"].get("clusterSelector").is_some()
        || !stored["spec"]["rayClusterSpec"].is_object()
    {
        fail("rewritten: it has a clusterSelector or lost its rayClusterSpec".into());
    }
    for field in ["/spec", "/metadata/labels", "/metadata/annotations"] {
        if stored.pointer(field) != reference.body.pointer(field) {
            fail(format!(
                "{field} differs from what the API server stores without rayshare"
            ));
        }
    }
    if answer.rayshare_warnings().is_empty() {
        fail(format!("no rayshare warning: {}", answer.short()));
    }
    match (before, after) {
        (Some(before), Some(after)) => {
            let (left_before, mutated_before) = answered(&before, "RayJob");
            let (left_after, mutated_after) = answered(&after, "RayJob");
            if left_after <= left_before {
                fail("rayshare did not answer it (the API server failed open on its own)".into());
            }
            if mutated_after != mutated_before {
                fail("rayshare counted a mutation".into());
            }
        }
        _ => fail("rayshare's metrics do not answer (the process is gone or wedged)".into()),
    }
}

/// Creates ordinary jobs `names`; each must be rewritten. Returns their latencies.
async fn ordinary_jobs(env: &TestEnv, names: &[&str], problems: &mut Vec<String>) -> Vec<Duration> {
    let mut latencies = Vec::new();
    for name in names {
        let answer = post(env, &jobs_path(&env.ns), &ordinary(name), false).await;
        eprintln!(
            "[hostile] ordinary {name}: HTTP {} in {:?}",
            answer.status, answer.latency
        );
        if answer.status != 201 {
            problems.push(format!("ordinary {name}: not created: {}", answer.short()));
            continue;
        }
        if !answer.body["spec"]["clusterSelector"]["ray.io/cluster"].is_string() {
            problems.push(format!(
                "ordinary {name}: not rewritten (no clusterSelector): {}",
                answer.short()
            ));
        }
        latencies.push(answer.latency);
    }
    latencies
}

fn median(mut latencies: Vec<Duration>) -> Duration {
    latencies.sort();
    latencies[latencies.len() / 2]
}

/// A worker pod of a RayCluster whose group has 2,000,000,000 hosts per replica, with a
/// label value of the longest length allowed and a 250 KB annotation: created unchanged
/// (no indices) with rayshare's warning.
async fn absurd_worker(env: &TestEnv, problems: &mut Vec<String>) {
    let mut fail = |what: String| problems.push(format!("absurd worker: {what}"));
    let cluster = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "absurd", "namespace": env.ns},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray"}]}}},
                 "workerGroupSpecs": [{"groupName": "tpu", "replicas": 1, "numOfHosts": 2_000_000_000, "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}]}}}]}});
    let stored_cluster = apply(&env.admin, &cluster).await;
    let labels = json!({"ray.io/cluster": "absurd", "ray.io/group": "tpu",
        "ray.io/node-type": "worker", "hostile/long": "l".repeat(63)});
    let annotations = json!({"hostile/blob": "b".repeat(250_000)});
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "absurd-worker", "labels": labels, "annotations": annotations,
            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "absurd",
                "uid": stored_cluster.metadata.uid, "controller": true}]},
        "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}]}});
    let before = scrape(&env.instances[0]).await;
    let answer = post(
        env,
        &format!("/api/v1/namespaces/{}/pods", env.ns),
        &pod,
        false,
    )
    .await;
    let after = scrape(&env.instances[0]).await;
    eprintln!(
        "[hostile] absurd worker: HTTP {} in {:?}, warnings {:?}",
        answer.status, answer.latency, answer.warnings
    );
    if answer.status != 201 {
        return fail(format!("not created (fail-open): {}", answer.short()));
    }
    let stored = &answer.body;
    if stored["metadata"]["labels"] != labels || stored["metadata"]["annotations"] != annotations {
        fail(format!(
            "labels or annotations changed: {}",
            stored["metadata"]["labels"]
        ));
    }
    let spec = &stored["spec"];
    if spec.get("hostname").is_some()
        || spec.get("subdomain").is_some()
        || spec["containers"][0].get("env").is_some()
    {
        fail(format!("its spec was changed: {spec}"));
    }
    if !answer
        .rayshare_warnings()
        .iter()
        .any(|w| w.contains("2000000000"))
    {
        fail(format!(
            "no rayshare warning about its hosts: {:?}",
            answer.warnings
        ));
    }
    match (before, after) {
        (Some(before), Some(after)) => {
            let (left_before, mutated_before) = answered(&before, "Pod");
            let (left_after, mutated_after) = answered(&after, "Pod");
            if left_after <= left_before || mutated_after != mutated_before {
                fail("rayshare did not answer it, or counted a mutation".into());
            }
        }
        _ => fail("rayshare's metrics do not answer (the process is gone or wedged)".into()),
    }
}

/// A stored job that claims a shared cluster and carries, as the spec the provisioner
/// parses, 100,000 nested JSON arrays (200 KB, under the 256 KiB annotation limit). The
/// webhook is not asked (no `rayClusterSpec`); the provisioner must refuse it, not die.
async fn deep_json_spec_annotation(env: &TestEnv, problems: &mut Vec<String>) {
    let mut fail = |what: String| problems.push(format!("deep cluster-spec: {what}"));
    let refused = |m: &str| counter(m, "rayshare_errors_total{cause=\"provision_refused\"}");
    let before = scrape(&env.instances[0]).await.map(|m| refused(&m));
    let mut job = ordinary("deep-cluster-spec");
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let selected = "ray-aaaaaaaaaaaaaaaaaaaa";
    job["metadata"]["labels"] =
        json!({"rayshare.io/cluster": selected, "rayshare.io/instance": env.name});
    job["metadata"]["annotations"] = json!({"rayshare.io/cluster-spec": deep});
    let spec = job["spec"].as_object_mut().unwrap();
    spec.remove("rayClusterSpec");
    spec.insert(
        "clusterSelector".into(),
        json!({"ray.io/cluster": selected}),
    );
    let answer = post(env, &jobs_path(&env.ns), &job, false).await;
    eprintln!(
        "[hostile] deep cluster-spec: HTTP {} in {:?}",
        answer.status, answer.latency
    );
    if answer.status != 201 {
        return fail(format!("not created: {}", answer.short()));
    }
    if answer.body["metadata"]["annotations"] != job["metadata"]["annotations"] {
        fail("its annotations were changed".into());
    }
    let Some(before) = before else {
        return fail("rayshare's metrics do not answer (the process is gone or wedged)".into());
    };
    let started = Instant::now();
    loop {
        match scrape(&env.instances[0]).await {
            Some(m) if refused(&m) > before => break,
            Some(_) if started.elapsed() < Duration::from_secs(60) => {}
            Some(_) => return fail("the provisioner never refused it in 60 s".into()),
            None => {
                return fail(
                    "rayshare's metrics stopped answering (the process is gone or wedged)".into(),
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    if clusters.get_opt(selected).await.unwrap().is_some() {
        fail(format!("RayCluster {selected} was made"));
    }
}

#[tokio::test]
async fn hostile_objects_are_stored_unchanged_and_rayshare_keeps_serving() {
    let env = TestEnv::new("hostile", DEFAULT_CONFIG, 1).await;
    let pid = env.instances[0].pid().expect("rayshare runs");
    let mut problems = Vec::new();

    // Normal latency, measured here, before anything hostile.
    let baseline = ordinary_jobs(&env, &["base-0", "base-1", "base-2"], &mut problems).await;
    assert!(problems.is_empty(), "ordinary jobs before: {problems:#?}");
    let baseline = median(baseline);

    // Cheapest to refuse first; the ones that break rayshare today (stack, CPU) last, so
    // each of the others is judged on its own.
    let jobs = [
        with_runtime_env("alias-bomb", library_sample("alias bomb")),
        huge_strings("huge-strings"),
    ];
    for job in jobs {
        hostile_job(&env, job, &mut problems).await;
    }
    absurd_worker(&env, &mut problems).await;
    deep_json_spec_annotation(&env, &mut problems).await;
    let jobs = [
        with_runtime_env("merge-bomb", library_sample("merge bomb")),
        with_runtime_env("deep-flow-json", deep_flow_json()),
        with_runtime_env("deep-block-yaml", library_sample("deep block sequence")),
    ];
    for job in jobs {
        hostile_job(&env, job, &mut problems).await;
    }

    // The same process, not a restarted one, and as quick as before.
    let now = env.instances[0].pid();
    if now != Some(pid) {
        problems.push(format!(
            "rayshare pid {pid} is gone (now {now:?}); its log ends:\n{}",
            tail(&env.instances[0].log)
        ));
    }
    let after = ordinary_jobs(&env, &["after-0", "after-1", "after-2"], &mut problems).await;
    let bound = (baseline * 5).max(Duration::from_secs(2));
    let slowest = after.iter().max().copied().unwrap_or_default();
    eprintln!("[hostile] baseline {baseline:?} (median of 3), after {after:?}, bound {bound:?}");
    if slowest > bound {
        problems.push(format!(
            "an ordinary job took {slowest:?} afterwards, over {bound:?} (baseline {baseline:?})"
        ));
    }
    if !ready_or_killed(&env.instances[0]).await {
        problems.push("rayshare does not answer /readyz in 10 s (killed, to end the test)".into());
    }
    assert!(
        problems.is_empty(),
        "{} problems: {problems:#?}",
        problems.len()
    );
}

/// A head env var of 300 KB, not run-scoped, with an ordinary runtime env: a rewrite
/// would carry it in the job's `rayshare.io/cluster-spec` annotation, past the API
/// server's 256 KiB limit on an object's annotations, so the create would fail because
/// of rayshare. Left unchanged, with a warning, it is stored as KubeRay alone would have it.
#[tokio::test]
async fn a_job_whose_cluster_spec_cannot_travel_is_stored_unchanged() {
    let env = TestEnv::new("hostile-spec", DEFAULT_CONFIG, 1).await;
    let pid = env.instances[0].pid().expect("rayshare runs");
    let mut job = ordinary("huge-env-var");
    job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "BIG_CONFIG", "value": "e".repeat(300_000)}));
    let mut problems = Vec::new();
    hostile_job(&env, job, &mut problems).await;
    ordinary_jobs(&env, &["after-0"], &mut problems).await;
    if env.instances[0].pid() != Some(pid) {
        problems.push(format!("rayshare pid {pid} is gone"));
    }
    if !ready_or_killed(&env.instances[0]).await {
        problems.push("rayshare does not answer /readyz in 10 s (killed, to end the test)".into());
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
