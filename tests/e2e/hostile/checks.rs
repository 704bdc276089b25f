//! Each hostile case sent and judged: RayJobs, the absurd worker, the deep annotation.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::ordinary;
use super::wire::{answered, counter, jobs_path, post, scrape};
use crate::harness::*;

/// Checks one hostile RayJob: created, stored exactly as the API server stores it
/// without rayshare (a dry run in the namespace rayshare does not serve), answered by
/// rayshare with a warning and without a mutation.
pub(super) async fn hostile_job(env: &TestEnv, job: Value, problems: &mut Vec<String>) {
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
pub(super) async fn ordinary_jobs(
    env: &TestEnv,
    names: &[&str],
    problems: &mut Vec<String>,
) -> Vec<Duration> {
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

pub(super) fn median(mut latencies: Vec<Duration>) -> Duration {
    latencies.sort();
    latencies[latencies.len() / 2]
}

/// A worker pod of a RayCluster whose group has 2,000,000,000 hosts per replica, with a
/// label value of the longest length allowed and a 250 KB annotation: created unchanged
/// (no indices) with rayshare's warning.
pub(super) async fn absurd_worker(env: &TestEnv, problems: &mut Vec<String>) {
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
pub(super) async fn deep_json_spec_annotation(env: &TestEnv, problems: &mut Vec<String>) {
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
