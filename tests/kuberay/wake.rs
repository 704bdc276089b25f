//! A job whose shared cluster cannot be made at first (a ResourceQuota on RayClusters, as a
//! platform team sets them): KubeRay retries the missing cluster after a delay that doubles
//! with each miss, so by the time the quota frees it may look again only minutes later.
//! rayshare wakes the job when it makes the cluster, and KubeRay starts it at once.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::harness::*;
use crate::shared_clusters::*;
use crate::world::*;

/// KubeRay's misses before the quota frees: its next look is then about 41 s away
/// (5 ms doubling per miss: the 14th waits 5 ms x 2^13 = 41 s).
const MISSES: usize = 14;

/// How long controller-runtime's default rate limiter holds a key back after its n-th
/// failure in a row: 5 ms x 2^(n-1), at most 1000 s
/// (`workqueue.DefaultTypedControllerRateLimiter`).
fn backoff(n: u32) -> Duration {
    (Duration::from_millis(5) * 2u32.saturating_pow(n.saturating_sub(1)))
        .min(Duration::from_secs(1000))
}

#[tokio::test]
async fn a_job_that_waited_for_its_cluster_starts_once_it_is_made() {
    let env = TestEnv::new("kr-wake", DEFAULT_CONFIG, 1).await;
    let kuberay = KubeRay::start(&env.name, &[&env.ns], &KubeRayOptions::default()).await;
    let quota = |clusters: u32| {
        json!({"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "rayclusters", "namespace": env.ns},
            "spec": {"hard": {"count/rayclusters.ray.io": clusters.to_string()}}})
    };
    apply(&env.admin, &quota(0)).await;
    wait_until_ray_clusters_refused(&env, "the quota").await;

    let (file, job, _) = JOBS[0];
    let cluster = selected(&create_job(&env, file, job).await).unwrap();
    let misses = || kuberay.log_text().matches("RayCluster not found").count();
    wait_for_within(
        SLOW,
        "KubeRay to miss the cluster again and again",
        || async { (misses() >= MISSES).then_some(()) },
    )
    .await;
    assert!(ray_clusters(&env).await.is_empty());

    let quotas: Api<ResourceQuota> = Api::namespaced(env.admin.clone(), &env.ns);
    let params = PatchParams::default();
    quotas
        .patch("rayclusters", &params, &Patch::Merge(quota(10)))
        .await
        .unwrap();
    let freed = Instant::now();
    // KubeRay's own next look. Each miss is a reconcile error, and controller-runtime's
    // default rate limiter (KubeRay sets none of its own) requeues the job 5 ms x 2^(n-1)
    // after its n-th error in a row (errors of other causes only add to n, making the
    // requeues later). A miss that an event brought early leaves the requeue of the miss
    // before it pending, and the delaying queue keeps the earliest: the next look is the
    // earliest requeue still ahead of the last miss.
    let log = kuberay.log_text();
    let missed: Vec<k8s_openapi::jiff::Timestamp> = log
        .lines()
        .filter(|l| l.contains("RayCluster not found") && l.contains(&cluster))
        .map(|l| {
            let stamp = l.split_whitespace().next().unwrap_or_default();
            stamp.parse().unwrap_or_else(|e| panic!("{e}: {l}"))
        })
        .collect();
    let last_miss = *missed.last().expect("KubeRay logs each miss with its time");
    let kuberay_looks_at = (missed.iter().enumerate())
        .map(|(i, &at)| at + backoff(i as u32 + 1))
        .filter(|&look| look > last_miss)
        .min()
        .expect("the last miss's own requeue is ahead of it");
    let status = wait_for_within(SLOW, "the job to leave Initializing", || async {
        let status = ray_job(&env, job).await["status"].clone();
        let state = status["jobDeploymentStatus"].as_str().unwrap_or("");
        (!["", "New", "Initializing"].contains(&state)).then_some(status)
    })
    .await;
    let waited = freed.elapsed();
    let seen_started = k8s_openapi::jiff::Timestamp::now();
    eprintln!(
        "[kr-wake] {job}: started {waited:?} after the quota freed ({} misses by KubeRay)",
        misses()
    );
    assert_eq!(status["jobDeploymentStatus"], "Running", "{status}");
    assert_eq!(status["rayClusterName"], json!(cluster), "{status}");
    let stored = ray_job(&env, job).await;
    assert!(
        stored["metadata"]["annotations"]["rayshare.io/cluster-made"].is_string(),
        "the job was not woken: {}",
        stored["metadata"]
    );
    // rayshare tries the cluster again within 10 s and wakes the job; KubeRay alone would
    // not have looked before its backoff ran out (the job was seen started before that).
    assert!(
        seen_started < kuberay_looks_at,
        "the job started {waited:?} after the quota freed, not before KubeRay's own next look at {kuberay_looks_at}"
    );
}
