//! A job's life on a shared cluster, on a real Ray head: each driver sees its own run,
//! and its Ray job ends with its RayJob (deleted, deleted while rayshare was down, or
//! failed on KubeRay's side); nobody else's job is touched.
//!
//! The control plane has no KubeRay here: the tests submit each rewritten RayJob to the
//! head as KubeRay's submitter would (its runtime env converted from `runtimeEnvYAML`),
//! and set the RayJob's status as KubeRay would.

use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::harness::*;
use crate::ray_head::{RAY_HEAD, head_pod, report_head};

/// Prints the run identity the driver sees, then runs until stopped.
pub(crate) const PRINT_RUN: &str = r#"python -c "import os, time; print('RUN_NAME=%s EXEC=%s USER=%s' % (os.environ.get('RUN_NAME'), os.environ.get('FLYTE_INTERNAL_EXECUTION_ID'), os.environ.get('USER_VAR')), flush=True); time.sleep(3600)""#;

pub(crate) fn job(sample_file: &str, name: &str, entrypoint: &str) -> Value {
    let mut job = sample(sample_file);
    job["metadata"]["name"] = json!(name);
    job["spec"]["entrypoint"] = json!(entrypoint);
    // No pip install on the test head; a value of the user's own that must survive.
    job["spec"]["runtimeEnvYAML"] = json!("env_vars:\n  USER_VAR: mine\n");
    job
}

/// The runtime env KubeRay passes to `ray job submit`: `runtimeEnvYAML` read as YAML, as JSON.
fn runtime_env_json(stored: &Value) -> String {
    let text = stored["spec"]["runtimeEnvYAML"].as_str().unwrap();
    let env: Value = serde_norway::from_str(text).unwrap();
    env.to_string()
}

/// Creates the RayJob and submits its Ray job (id `<name>-sub`) as KubeRay would.
pub(crate) async fn create_and_submit(env: &TestEnv, job: Value) -> Value {
    let name = job["metadata"]["name"].as_str().unwrap().to_string();
    let stored = create_in(&env.admin, &env.ns, job, false).await;
    let entrypoint = stored["spec"]["entrypoint"].as_str().unwrap();
    let renv = runtime_env_json(&stored);
    RAY_HEAD
        .submit(&format!("{name}-sub"), Some(&renv), entrypoint)
        .await;
    stored
}

async fn stopped(env: &TestEnv, reason: &str) -> u64 {
    let line = format!("rayshare_ray_jobs_stopped_total{{reason=\"{reason}\"}} ");
    let metrics = env.instances[0].metrics().await;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&line)?.trim().parse().ok())
        .unwrap_or(0)
}

pub(crate) async fn shared_cluster(env: &TestEnv, name: &str) -> Value {
    let api = env.api(&ray_cluster_resource(), &env.ns);
    let found = wait_for("the shared cluster", || async {
        api.get_opt(name).await.unwrap()
    })
    .await;
    serde_json::to_value(found).unwrap()
}

fn config(extra: &str) -> String {
    config_with(&RAY_HEAD.dashboard, extra)
}

/// The default address: the head pod KubeRay made for the cluster (see [`head_pod`]).
pub(crate) fn config_via_head_pod(extra: &str) -> String {
    config_with("\"http://{headIP}:{port}\"", extra)
}

fn config_with(dashboard_url: &str, extra: &str) -> String {
    format!(
        "sharedClusters:\n  stopJobs:\n    dashboardUrl: {dashboard_url}\n    intervalSeconds: 2\n{extra}"
    )
}

#[tokio::test]
async fn each_driver_sees_its_own_run_and_its_ray_job_ends_with_its_rayjob() {
    let mut env = TestEnv::new("rayjobs", &config_via_head_pod(""), 1).await;
    let jobs = env.api(&ray_job_resource(), &env.ns);
    let a = create_and_submit(&env, job("rayjob-run-a.yaml", "a", PRINT_RUN)).await;
    let b = create_and_submit(&env, job("rayjob-run-b.yaml", "b", PRINT_RUN)).await;
    let c = create_and_submit(&env, job("rayjob-run-a.yaml", "c", PRINT_RUN)).await;
    RAY_HEAD
        .submit(
            "foreign-rayjobs",
            None,
            "python -c 'import time; time.sleep(3600)'",
        )
        .await;
    let cluster_name = a["spec"]["clusterSelector"]["ray.io/cluster"]
        .as_str()
        .unwrap();
    assert_eq!(b["spec"]["clusterSelector"], a["spec"]["clusterSelector"]);
    assert_eq!(c["spec"]["clusterSelector"], a["spec"]["clusterSelector"]);

    // Each driver sees its own run (and the user's value); the cluster holds no run.
    RAY_HEAD
        .wait_log("a-sub", "RUN_NAME=a1b2c3 EXEC=a1b2c3 USER=mine")
        .await;
    RAY_HEAD
        .wait_log("b-sub", "RUN_NAME=z9y8x7 EXEC=z9y8x7 USER=mine")
        .await;
    RAY_HEAD
        .wait_log("c-sub", "RUN_NAME=a1b2c3 EXEC=a1b2c3 USER=mine")
        .await;
    RAY_HEAD.wait_status("foreign-rayjobs", "RUNNING").await;
    let cluster = shared_cluster(&env, cluster_name).await;
    // KubeRay's head pod for it, which the stopper finds by its owner, the cluster.
    let uid = cluster["metadata"]["uid"].as_str().unwrap();
    head_pod(&env, &cluster, "head", uid, RAY_HEAD.port()).await;
    report_head(&env, &cluster, "head").await;
    let cluster = cluster.to_string();
    for run in [
        "a1b2c3",
        "z9y8x7",
        "RUN_NAME",
        "FLYTE_INTERNAL_EXECUTION_ID",
    ] {
        assert!(!cluster.contains(run), "{run} on the shared cluster");
    }

    // Deleted, as Flyte's abort does: a's Ray job stops; the others run on.
    jobs.delete("a", &DeleteParams::default()).await.unwrap();
    RAY_HEAD.wait_stopped("a-sub").await;
    // The pass that stopped a looks at every Ray job of the cluster: let it end first.
    env.instances[0].wait_passes("RayJobStop", 1).await;
    assert_eq!(RAY_HEAD.status("b-sub").await, "RUNNING");
    assert_eq!(RAY_HEAD.status("c-sub").await, "RUNNING");

    // Deleted while rayshare is down: caught when it is back.
    env.instances[0].stop();
    jobs.delete("b", &DeleteParams::default()).await.unwrap();
    wait_for("b to be gone", || async {
        jobs.get_opt("b").await.unwrap().is_none().then_some(())
    })
    .await;
    assert_eq!(RAY_HEAD.status("b-sub").await, "RUNNING");
    env.instances[0].restart().await;
    RAY_HEAD.wait_stopped("b-sub").await;

    // Failed on KubeRay's side (say, activeDeadlineSeconds) while its Ray job runs.
    let failed = json!({"status": {"jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded"}});
    jobs.patch_status("c", &PatchParams::default(), &Patch::Merge(&failed))
        .await
        .unwrap();
    RAY_HEAD.wait_status("c-sub", "STOPPED").await;

    // Someone else's job on the same head is never touched, only counted.
    env.instances[0].wait_passes("RayJobStop", 1).await;
    assert_eq!(RAY_HEAD.status("foreign-rayjobs").await, "RUNNING");
    // Counted after the stop call returns, so perhaps after the head shows it stopped.
    for reason in ["rayjob_deleted", "rayjob_finished"] {
        let count = wait_for(&format!("a stop counted as {reason}"), || async {
            Some(stopped(&env, reason).await).filter(|n| *n > 0)
        })
        .await;
        assert_eq!(count, 1, "{reason} since the restart");
    }
    // At least the foreign job; the head is shared with the other tests of this binary,
    // whose jobs (another instance's, or plain) this instance must not attribute either.
    let gauge = format!(
        "rayshare_ray_jobs_unattributed{{cluster_namespace=\"{}\",cluster=\"{cluster_name}\"}} ",
        env.ns
    );
    let metrics = env.instances[0].metrics().await;
    let seen: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix(&gauge)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {gauge}in\n{metrics}"));
    assert!(seen >= 1, "{metrics}");
    // The head gone, the cluster's count goes with it: nothing is left to attribute.
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(env.admin.clone(), &env.ns);
    pods.delete("head", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    wait_for("the unattributed count to go with the head", || async {
        let metrics = env.instances[0].metrics().await;
        (!metrics.contains(&gauge)).then_some(())
    })
    .await;
    RAY_HEAD.stop("foreign-rayjobs").await;
}

/// Flyte's fast-registered entrypoints download code into `.`; on a shared head every
/// driver starts in the same directory. Each rewritten one gets its own.
#[tokio::test]
async fn concurrent_drivers_that_write_to_cwd_get_their_own_directory() {
    let root = tempfile::Builder::new()
        .prefix("rsjobs")
        .tempdir_in("/tmp")
        .unwrap();
    let extra = format!("  jobWorkdirRoot: {}\n", root.path().display());
    let env = TestEnv::new("workdir", &config(&extra), 1).await;
    // Writes its run into ./code.py, waits for the other driver to have done the same,
    // and reads it back: with one shared directory, one of them would read the other's.
    let entrypoint = |run: &str| {
        format!(
            r#"python -c "import os, time; open('code.py', 'w').write('{run}'); time.sleep(8); print('CWD=%s CODE=%s' % (os.getcwd(), open('code.py').read()), flush=True)" --tgz s3://bucket/code.tgz --dest ."#
        )
    };
    let d = create_and_submit(&env, job("rayjob-run-a.yaml", "d", &entrypoint("a1b2c3"))).await;
    let e = create_and_submit(&env, job("rayjob-run-b.yaml", "e", &entrypoint("z9y8x7"))).await;
    RAY_HEAD
        .submit(
            "plain-workdir",
            None,
            // The marker is joined at run time: Ray's log first echoes this command line,
            // and the echo must not satisfy the wait below.
            "python -c 'import os; print(\"DRIVER_\" + \"CWD=\" + os.getcwd())'",
        )
        .await;
    RAY_HEAD.wait_status("d-sub", "SUCCEEDED").await;
    RAY_HEAD.wait_status("e-sub", "SUCCEEDED").await;
    // Each driver ran in a fresh directory `<root>/<token>.<random>` (made by mktemp, so
    // no other job could have made it first), its own code in it.
    let ran_in = |stored: &Value, log: &str, code: &str| {
        let token = stored["metadata"]["labels"]["rayshare.io/admission-uid"]
            .as_str()
            .unwrap();
        let prefix = format!("CWD={}/{token}.", root.path().display());
        let line = log
            .lines()
            .find(|l| l.starts_with(&prefix) && l.ends_with(&format!(" CODE={code}")))
            .unwrap_or_else(|| panic!("no line {prefix}<random> CODE={code} in:\n{log}"));
        let dir = line["CWD=".len()..].split(' ').next().unwrap().to_string();
        std::path::PathBuf::from(dir)
    };
    let log_d = RAY_HEAD.logs("d-sub").await;
    let log_e = RAY_HEAD.logs("e-sub").await;
    let dir_d = ran_in(&d, &log_d, "a1b2c3");
    let dir_e = ran_in(&e, &log_e, "z9y8x7");
    assert_ne!(dir_d, dir_e);
    // Without the rewrite, a driver starts where the head was started: one place for all.
    let plain = RAY_HEAD.wait_log("plain-workdir", "DRIVER_CWD=").await;
    let expected = format!("DRIVER_CWD={}", RAY_HEAD.cwd.display());
    assert!(plain.lines().any(|l| l.trim() == expected), "{plain}");
    // The directories go with their drivers.
    assert!(!dir_d.exists() && !dir_e.exists());
}
