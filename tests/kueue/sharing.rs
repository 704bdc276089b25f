//! Shared clusters inside Kueue's quota (`sharedClusters.kueue: admitSharedCluster`): two
//! runs of one config share one cluster that Kueue admitted; a third config waits while
//! the quota is full and starts once the first cluster is reclaimed; a preempted shared
//! cluster's running jobs are told (a Warning Event each), not lost silently.
//!
//! Kueue's webhooks run before rayshare's here, as in a default install (configurations
//! are called in name order: `kueue-...` before `rayshare...`): Kueue suspends a labelled
//! job and labels an unlabelled one with the namespace's `default` LocalQueue.

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};

use crate::harness::*;
use crate::kueue::*;
use crate::world::*;

/// Sample a's cluster: a 1-CPU head and two 1-CPU workers (3 CPUs, 6 GiB); the other
/// config's: a 1-CPU head and four 1-CPU workers (5 CPUs, 10 GiB).
pub const CONFIG_A: &str = "rayjob-run-a.yaml";
const RUN_B: &str = "rayjob-run-b.yaml";
const OTHER: &str = "rayjob-other-config.yaml";

pub fn rayshare_config(ns: &str) -> String {
    format!(
        "sharedClusters:\n  kueue: admitSharedCluster\n  stopJobs:\n    intervalSeconds: 1\n\
         reclaim:\n  idleTtlSeconds: 3\n  intervalSeconds: 1\n  quietSeconds: 2\n  headSilenceSeconds: 0\n  namespaces: [{ns}]\n"
    )
}

/// A RayJob from a sample, submitted over HTTP (no submitter pod: without a Ray dashboard
/// KubeRay keeps such a job Running), in Kueue queue `queue` (none: no label).
pub async fn create_job(env: &TestEnv, file: &str, name: &str, labels: &[(&str, &str)]) -> Value {
    let mut job = sample(file);
    job["metadata"]["name"] = json!(name);
    job["spec"]["submissionMode"] = json!("HTTPMode");
    for (k, v) in labels {
        job["metadata"]["labels"][*k] = json!(v);
    }
    create_in(&env.admin, &env.ns, job, false).await
}

pub fn selected(job: &Value) -> String {
    let name = job["spec"]["clusterSelector"]["ray.io/cluster"].as_str();
    name.unwrap_or_else(|| panic!("not rewritten: {}", job["metadata"]))
        .to_string()
}

async fn get(env: &TestEnv, ar: &kube::core::ApiResource, name: &str) -> Option<Value> {
    let object = env.api(ar, &env.ns).get_opt(name).await.ok()??;
    serde_json::to_value(object).ok()
}

async fn job_state(env: &TestEnv, name: &str) -> String {
    let job = get(env, &ray_job_resource(), name)
        .await
        .unwrap_or_default();
    job["status"]["jobDeploymentStatus"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

pub async fn wait_job_state(env: &TestEnv, name: &str, state: &str) {
    wait_for_within(SLOW, &format!("RayJob {name} to be {state}"), || async {
        (job_state(env, name).await == state).then_some(())
    })
    .await;
}

/// The cluster's Workload once Kueue admitted it, with the cluster started (not suspended).
pub async fn wait_admitted(env: &TestEnv, cluster: &str) -> Value {
    wait_for_within(SLOW, &format!("Kueue to admit {cluster}"), || async {
        let c = get(env, &ray_cluster_resource(), cluster).await?;
        let uid = c["metadata"]["uid"].as_str()?;
        let workload = workload_of(env, uid).await?;
        (condition(&workload, "Admitted") && c["spec"]["suspend"] != true).then_some(workload)
    })
    .await
}

/// Kueue's verdict on the cluster's Workload while it waits: no quota reserved, pending.
async fn wait_pending(env: &TestEnv, cluster: &str) -> Value {
    wait_for_within(
        SLOW,
        &format!("{cluster}'s Workload to wait for quota"),
        || async {
            let c = get(env, &ray_cluster_resource(), cluster).await?;
            let workload = workload_of(env, c["metadata"]["uid"].as_str()?).await?;
            let pending = workload["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "QuotaReserved" && c["status"] == "False");
            (pending && c["spec"]["suspend"] == true).then_some(workload)
        },
    )
    .await
}

#[tokio::test]
async fn runs_share_a_kueue_admitted_cluster_and_another_config_waits_for_the_quota() {
    let _kueue = &*KUEUE;
    let name = "kueue-share";
    let env = TestEnv::new(name, &rayshare_config(&format!("e2e-{name}")), 1).await;
    // Room for sample a's cluster (3 CPUs), not also the other config's (5).
    queues(&env, "6", "24Gi").await;
    let _kuberay = KubeRay::start(name, &[&env.ns], &KubeRayOptions::default()).await;

    // One run names the queue; the other names none and gets the namespace's default
    // from Kueue's webhook: the same queue, so the same cluster.
    let a0 = create_job(
        &env,
        CONFIG_A,
        "a0",
        &[("kueue.x-k8s.io/queue-name", "default")],
    )
    .await;
    let a1 = create_job(&env, RUN_B, "a1", &[]).await;
    let shared = selected(&a0);
    assert_eq!(
        selected(&a1),
        shared,
        "two runs of one config and queue share"
    );
    for job in [&a0, &a1] {
        let labels = &job["metadata"]["labels"];
        assert!(
            labels.get("kueue.x-k8s.io/queue-name").is_none(),
            "{labels}"
        );
        assert_eq!(
            job["metadata"]["annotations"]["rayshare.io/kueue-queue-name"],
            "default"
        );
        assert_eq!(
            job["spec"]["suspend"], false,
            "Kueue's suspend is taken off"
        );
    }

    let workload = wait_admitted(&env, &shared).await;
    let cluster = get(&env, &ray_cluster_resource(), &shared).await.unwrap();
    assert_eq!(
        cluster["metadata"]["labels"]["kueue.x-k8s.io/queue-name"],
        "default"
    );
    let counts: Vec<i64> = workload["spec"]["podSets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["count"].as_i64().unwrap())
        .collect();
    assert_eq!(
        counts,
        [1, 2],
        "Kueue charges the head and both workers once"
    );
    wait_job_state(&env, "a0", "Running").await;
    wait_job_state(&env, "a1", "Running").await;

    // Another config: its cluster is made, suspended, and waits for the quota.
    let c0 = create_job(
        &env,
        OTHER,
        "c0",
        &[("kueue.x-k8s.io/queue-name", "default")],
    )
    .await;
    let waiting = selected(&c0);
    assert_ne!(waiting, shared);
    wait_pending(&env, &waiting).await;
    // KubeRay's look at the new job may come after Kueue's at its cluster: awaited.
    wait_job_state(&env, "c0", "Initializing").await;
    let pods = ray_pods(&env.admin, &env.ns).await;
    assert!(
        !pods.contains_key(&waiting),
        "a waiting cluster has no pods"
    );

    // Both runs end: the shared cluster idles, is reclaimed, its Workload goes with it
    // (garbage collector), and Kueue admits the waiting one.
    let jobs = env.api(&ray_job_resource(), &env.ns);
    for job in ["a0", "a1"] {
        jobs.delete(job, &DeleteParams::default()).await.unwrap();
    }
    wait_for_within(SLOW, "the idle shared cluster to be reclaimed", || async {
        cluster_uid(&env, &shared).await.is_none().then_some(())
    })
    .await;
    wait_admitted(&env, &waiting).await;
    wait_job_state(&env, "c0", "Running").await;
    for job in list_json(&env.admin, &ray_job_resource(), &env.ns, "").await {
        assert_ne!(
            job["status"]["jobDeploymentStatus"], "ValidationFailed",
            "{job}"
        );
    }
}

#[tokio::test]
async fn a_preempted_shared_clusters_running_jobs_are_told() {
    let _kueue = &*KUEUE;
    let name = "kueue-preempt";
    let env = TestEnv::new(name, &rayshare_config(&format!("e2e-{name}")), 1).await;
    // Room for one of the two clusters (3 and 5 CPUs).
    queues(&env, "5", "24Gi").await;
    let _kuberay = KubeRay::start(name, &[&env.ns], &KubeRayOptions::default()).await;

    let low = create_job(&env, CONFIG_A, "low", &[]).await;
    let low_cluster = selected(&low);
    wait_admitted(&env, &low_cluster).await;
    wait_job_state(&env, "low", "Running").await;

    // A higher priority class, the job's own label, goes onto its cluster: Kueue preempts
    // the running shared cluster for it.
    let high = create_job(
        &env,
        OTHER,
        "high",
        &[("kueue.x-k8s.io/priority-class", HIGH)],
    )
    .await;
    let high_cluster = selected(&high);
    let workload = wait_admitted(&env, &high_cluster).await;
    assert_eq!(workload["spec"]["priority"], 1000);
    let preempted = get(&env, &ray_cluster_resource(), &low_cluster)
        .await
        .unwrap();
    assert_eq!(preempted["spec"]["suspend"], true, "Kueue suspended it");

    let note = wait_for_within(SLOW, "the cut-off job to be told", || async {
        warning_on(&env, "low", "SharedClusterSuspended").await
    })
    .await;
    assert!(note.contains(&low_cluster), "{note}");
    assert_metric(&env, "rayshare_jobs_cut_off_total", " 1").await;
    // The job is still there to see (KubeRay may show it Running), and the waiting high
    // job's run starts.
    assert!(get(&env, &ray_job_resource(), "low").await.is_some());
    wait_job_state(&env, "high", "Running").await;
}

/// The note of rayshare's Warning Event `reason` on object `name`, if there is one.
async fn warning_on(env: &TestEnv, name: &str, reason: &str) -> Option<String> {
    let events: Api<Event> = Api::namespaced(env.admin.clone(), &env.ns);
    let list = events.list(&ListParams::default()).await.ok()?;
    list.items.into_iter().find_map(|e| {
        let ours = e.regarding.as_ref()?.name.as_deref() == Some(name)
            && e.reason.as_deref() == Some(reason)
            && e.type_.as_deref() == Some("Warning");
        ours.then(|| e.note.unwrap_or_default())
    })
}

/// Asserts that rayshare's metrics show series `name` with `value` (`" 1"`,
/// `"{kind=\"RayCluster\"} 2"`), printing the series of that name when not.
pub async fn assert_metric(env: &TestEnv, name: &str, value: &str) {
    let metrics = env.instances[0].metrics().await;
    let series: Vec<&str> = metrics.lines().filter(|l| l.starts_with(name)).collect();
    assert!(
        series.contains(&format!("{name}{value}").as_str()),
        "wanted {name}{value}, got {series:?}"
    );
}
