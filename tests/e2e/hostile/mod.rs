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

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::*;

mod checks;
mod wire;

use checks::{absurd_worker, deep_json_spec_annotation, hostile_job, median, ordinary_jobs};
use wire::ready_or_killed;

/// 40,000 levels: four times go-yaml v2's own limit, far past any recursive reader's stack.
const DEPTH: usize = 40_000;
/// Under etcd's 1.5 MiB request limit for the whole object, with both strings in it.
const HUGE: usize = 700_000;

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
    rayshare::domain::shared_cluster::kuberay_yaml::hostile::runtime_envs()
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
    // The fastest of three: a process still busy with a hostile job is slow every time,
    // while one slow create may be other tests' burst on the same cores.
    let bound = (baseline * 5).max(Duration::from_secs(2));
    let fastest = after.iter().min().copied().unwrap_or_default();
    eprintln!("[hostile] baseline {baseline:?} (median of 3), after {after:?}, bound {bound:?}");
    if fastest > bound {
        problems.push(format!(
            "every ordinary job took {fastest:?} or more afterwards, over {bound:?} (baseline {baseline:?})"
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
