//! The config modes of shared clusters, each through the real KubeRay operator
//! (`shared_clusters::jobs_run_on_shared_clusters`), each asserting its own feature.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use crate::harness::*;
use crate::shared_clusters::*;
use crate::world::*;

#[tokio::test]
async fn default_config() {
    jobs_run_on_shared_clusters("kr-default", DEFAULT_CONFIG, &JOBS, SHARING).await;
}

/// Two jobs per cluster: the two runs of one config share the pool's first member, a
/// third run of that config gets its second member, which KubeRay brings up as well.
#[tokio::test]
async fn pools() {
    let config = "sharedClusters:\n  maxJobsPerCluster: 2\n";
    let mut jobs = JOBS.to_vec();
    jobs.push(("rayjob-run-a.yaml", "a0-3", "a1b2c3"));
    let sharing: &[&[&str]] = &[&["a0-0", "a0-1"], &["a0-2"], &["a0-3"]];
    let ran = jobs_run_on_shared_clusters("kr-pools", config, &jobs, sharing).await;
    let first = &ran.cluster_of["a0-0"];
    assert_eq!(ran.cluster_of["a0-3"], format!("{first}-1"));
}

/// The shared clusters autoscale: KubeRay made each head pod with its autoscaler sidecar.
#[tokio::test]
async fn autoscaling() {
    let config = "sharedClusters:\n  autoscaling:\n    enabled: true\n    idleTimeoutSeconds: 60\n";
    let ran = jobs_run_on_shared_clusters("kr-autoscaling", config, &JOBS, SHARING).await;
    let clusters = ray_clusters(&ran.env).await;
    let pods = ray_pods(&ran.env.admin, &ran.env.ns).await;
    for cluster in ran.cluster_of.values() {
        let spec = &clusters[cluster]["spec"];
        assert_eq!(spec["enableInTreeAutoscaling"], true, "{cluster}: {spec}");
        let heads: Vec<&Pod> = pods[cluster]
            .iter()
            .filter(|p| p.labels().get("ray.io/node-type").map(String::as_str) == Some("head"))
            .collect();
        assert_eq!(heads.len(), 1, "{cluster}'s head pods");
        let containers: Vec<&str> = heads[0]
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .map(|c| c.name.as_str())
            .collect();
        assert!(
            containers.contains(&"autoscaler"),
            "{cluster}'s head has no autoscaler sidecar: {containers:?}"
        );
    }
}

#[tokio::test]
async fn volcano_stand_in_spec_without_a_batch_scheduler() {
    // The stand-in spec sits next to the selector: KubeRay validates it, and still runs
    // the job on the shared cluster.
    let config = "sharedClusters:\n  volcanoStandInSpec: true\n";
    jobs_run_on_shared_clusters("kr-stand-in", config, &JOBS, SHARING).await;
}
