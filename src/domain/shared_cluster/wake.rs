//! Waking jobs when their shared cluster is *ready* (pure; `reconcile::wake_on_ready` calls it).
//!
//! KubeRay's RayJob controller holds a job in Initializing while its selected cluster's
//! `status.state` is not `ready`, and looks again every 3 seconds
//! (`RayJobDefaultRequeueDuration`); a shared cluster is not the job's own, so its
//! readiness wakes nothing. The provisioner already wakes jobs when their cluster is
//! *made* ([`super::provision::jobs_to_wake`]); these are the jobs to wake again once it is
//! *ready*, which takes up to 3 seconds off each task that waited for a cold cluster.
//!
//! The wake writes the annotation the made-wake writes ([`labels::CLUSTER_MADE`], the one
//! key of a RayJob the chart's own-objects policy lets rayshare change), with the time the
//! cluster became ready as KubeRay recorded it (`status.stateTransitionTimes.ready`, set
//! by every tested KubeRay). A job whose annotation already holds that very time was woken
//! for this readiness: looking again (a resync, another replica) writes nothing. Equality,
//! not order, so rayshare's and KubeRay's clocks need not agree.

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::domain::labels::{self, Meta};
use crate::domain::time::parse_time;

/// When the cluster last became ready, if it is ready now (`None`: not ready, or KubeRay
/// did not say when, and the 3-second requeue is left to do its work).
pub fn ready_since(cluster: &Value) -> Option<Timestamp> {
    let status = &cluster["status"];
    if status["state"] != "ready" {
        return None;
    }
    parse_time(&status["stateTransitionTimes"]["ready"])
}

/// The jobs of installation `instance` to wake now that `cluster` is ready: they select
/// it, KubeRay still holds them in Initializing, they were made before it became ready
/// (a later one is taken up at once), they are not being deleted, and they were not woken
/// for this readiness yet.
pub fn jobs_to_wake_on_ready<'a>(
    cluster: &Value,
    jobs: &'a [Value],
    instance: &str,
) -> Vec<&'a Value> {
    let Some(since) = ready_since(cluster) else {
        return vec![];
    };
    let namespace = &cluster["metadata"]["namespace"];
    let name = cluster["metadata"]["name"].as_str();
    jobs.iter()
        .filter(|job| {
            let meta = &job["metadata"];
            let woken = labels::get(job, Meta::Annotations, labels::CLUSTER_MADE)
                .and_then(|t| t.parse::<Timestamp>().ok());
            &meta["namespace"] == namespace
                && name.is_some()
                && labels::selected_cluster(job) == name
                && labels::get(job, Meta::Labels, labels::INSTANCE) == Some(instance)
                && job["status"]["jobDeploymentStatus"] == "Initializing"
                && meta["deletionTimestamp"].is_null()
                && parse_time(&meta["creationTimestamp"]).is_some_and(|c| c <= since)
                && woken != Some(since)
        })
        .collect()
}

/// The merge patch that wakes a job for the readiness at `since`.
pub fn wake_on_ready_patch(since: Timestamp) -> Value {
    super::provision::wake_patch(since)
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::json;

    use super::*;

    const READY: &str = "2026-11-28T12:00:10Z";

    fn cluster(state: &str, ready: Option<&str>) -> Value {
        json!({
            "metadata": {"namespace": "team", "name": "ray-abc"},
            "status": {"state": state, "stateTransitionTimes": {"ready": ready}},
        })
    }

    fn job(name: &str, created: &str, status: &str) -> Value {
        json!({
            "metadata": {
                "namespace": "team", "name": name, "creationTimestamp": created,
                "labels": {labels::INSTANCE: "rayshare"},
                "annotations": {}, "deletionTimestamp": null,
            },
            "spec": {"clusterSelector": {labels::RAY_CLUSTER: "ray-abc"}},
            "status": {"jobDeploymentStatus": status},
        })
    }

    fn woken(cluster: &Value, jobs: &[Value]) -> Vec<String> {
        jobs_to_wake_on_ready(cluster, jobs, "rayshare")
            .into_iter()
            .map(|j| j["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    }

    #[rstest]
    #[case::waited(job("j", "2026-11-28T12:00:00Z", "Initializing"), true)]
    #[case::made_as_it_became_ready(job("j", READY, "Initializing"), true)]
    #[case::made_after(job("j", "2026-11-28T12:00:11Z", "Initializing"), false)]
    #[case::running_already(job("j", "2026-11-28T12:00:00Z", "Running"), false)]
    #[case::not_reconciled_yet(job("j", "2026-11-28T12:00:00Z", ""), false)]
    fn which_jobs_are_woken(#[case] job: Value, #[case] wake: bool) {
        let got = woken(&cluster("ready", Some(READY)), &[job]);
        assert_eq!(!got.is_empty(), wake);
    }

    #[rstest]
    #[case::another_cluster("/spec/clusterSelector/ray.io~1cluster", json!("ray-abc-1"))]
    #[case::another_namespace("/metadata/namespace", json!("other"))]
    #[case::another_installation("/metadata/labels/rayshare.io~1instance", json!("other"))]
    #[case::being_deleted("/metadata/deletionTimestamp", json!(READY))]
    fn only_this_clusters_live_jobs_of_this_installation(
        #[case] pointer: &str,
        #[case] value: Value,
    ) {
        let mut j = job("j", "2026-11-28T12:00:00Z", "Initializing");
        *j.pointer_mut(pointer).expect("a field of the job") = value;
        assert!(woken(&cluster("ready", Some(READY)), &[j]).is_empty());
    }

    #[rstest]
    #[case::not_ready(cluster("", None))]
    #[case::ready_without_a_time(cluster("ready", None))]
    #[case::suspended(cluster("suspended", Some(READY)))]
    fn a_cluster_not_known_ready_wakes_nobody(#[case] c: Value) {
        let j = job("j", "2026-11-28T12:00:00Z", "Initializing");
        assert!(woken(&c, &[j]).is_empty());
    }

    #[test]
    fn a_job_is_woken_once_per_readiness() {
        let c = cluster("ready", Some(READY));
        let mut j = job("j", "2026-11-28T12:00:00Z", "Initializing");
        // Woken when the cluster was made: woken again now it is ready.
        j["metadata"]["annotations"][labels::CLUSTER_MADE] = json!("2026-11-28T12:00:01Z");
        assert_eq!(woken(&c, std::slice::from_ref(&j)), vec!["j"]);
        // The patch writes the readiness's own time: the next look writes nothing.
        let since = ready_since(&c).unwrap();
        let patch = wake_on_ready_patch(since);
        j["metadata"]["annotations"][labels::CLUSTER_MADE] =
            patch["metadata"]["annotations"][labels::CLUSTER_MADE].clone();
        assert!(woken(&c, std::slice::from_ref(&j)).is_empty());
        // Ready again later (after a suspension): woken again.
        let again = cluster("ready", Some("2026-11-28T13:00:00Z"));
        assert_eq!(woken(&again, &[j]), vec!["j"]);
    }
}
