use rstest::rstest;
use serde_json::{Value, json};

use super::*;
use crate::domain::shared_cluster::{Plan, Rewrite, cluster_for_job, plan};

fn admitting() -> SharedClusters {
    SharedClusters {
        kueue: Kueue::AdmitSharedCluster,
        ..SharedClusters::default()
    }
}

/// Run a of the sample config, in Kueue queue `queue` (none: not Kueue's).
fn job(queue: Option<&str>) -> Value {
    let text = include_str!("../../../../deploy/samples/rayjob-run-a.yaml");
    let mut job: Value = serde_norway::from_str(text).unwrap();
    if let Some(q) = queue {
        labels::set(&mut job, Meta::Labels, labels::KUEUE_QUEUE, q);
        // As Kueue's own webhook leaves a labelled job when it runs first.
        job["spec"]["suspend"] = json!(true);
    }
    job
}

fn planned(job: &Value, cfg: &SharedClusters) -> Plan {
    plan(job, "ns", cfg, "rayshare.io/skip", super::super::tests_by()).unwrap()
}

fn rewrite(job: &Value) -> Rewrite {
    match planned(job, &admitting()) {
        Plan::Rewrite(r) => *r,
        Plan::Skip(why) => panic!("skipped: {why:?}"),
    }
}

#[test]
fn the_shared_cluster_carries_the_queue_and_waits_for_kueue() {
    let mut written = job(Some("team-q"));
    labels::set(&mut written, Meta::Labels, labels::KUEUE_PRIORITY, "high");
    let r = rewrite(&written);
    let cluster_labels = &r.cluster["metadata"]["labels"];
    assert_eq!(cluster_labels[labels::KUEUE_QUEUE], "team-q");
    assert_eq!(cluster_labels[labels::KUEUE_PRIORITY], "high");
    assert_eq!(r.cluster["spec"]["suspend"], true);
    // The job: no Kueue label (KubeRay would fail it suspended), not suspended, the queue
    // kept where the provisioner reads it; the priority class stays as written.
    assert_eq!(labels::get(&r.job, Meta::Labels, labels::KUEUE_QUEUE), None);
    assert_eq!(r.job["spec"]["suspend"], false);
    assert_eq!(
        labels::get(&r.job, Meta::Annotations, labels::KUEUE_QUEUE_OF_CLUSTER),
        Some("team-q")
    );
    assert_eq!(
        labels::get(&r.job, Meta::Labels, labels::KUEUE_PRIORITY),
        Some("high")
    );
    assert!(
        r.warnings.iter().any(|w| w.contains("queue team-q")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn the_provisioner_makes_the_very_cluster_admission_planned() {
    let r = rewrite(&job(Some("team-q")));
    let mut stored = r.job.clone();
    stored["metadata"]["namespace"] = json!("ns");
    let made = cluster_for_job(&stored, &admitting()).expect("a cluster for the stored job");
    assert_eq!(made["metadata"]["name"], r.cluster["metadata"]["name"]);
    assert_eq!(made["metadata"]["labels"], r.cluster["metadata"]["labels"]);
    assert_eq!(made["spec"], r.cluster["spec"]);
}

#[test]
fn a_stored_job_moved_to_another_queue_gets_no_cluster() {
    let r = rewrite(&job(Some("team-q")));
    let mut stored = r.job.clone();
    stored["metadata"]["namespace"] = json!("ns");
    labels::set(
        &mut stored,
        Meta::Annotations,
        labels::KUEUE_QUEUE_OF_CLUSTER,
        "free-q",
    );
    assert!(cluster_for_job(&stored, &admitting()).is_err());
}

#[test]
fn queues_never_share_and_kueue_jobs_never_join_clusters_outside_it() {
    let a = rewrite(&job(Some("team-q"))).name;
    let b = rewrite(&job(Some("other-q"))).name;
    let unqueued = rewrite(&job(None));
    assert_ne!(a, b);
    assert_ne!(a, unqueued.name);
    assert_eq!(unqueued.cluster["spec"].get("suspend"), None);
    // Two runs of one queue and config share.
    assert_eq!(a, rewrite(&job(Some("team-q"))).name);
}

#[test]
fn under_skip_a_kueue_job_is_left_to_kueue() {
    match planned(&job(Some("team-q")), &SharedClusters::default()) {
        Plan::Skip(Some(why)) => assert!(why.contains("admitSharedCluster"), "{why}"),
        other => panic!("expected a skip, got {other:?}"),
    }
}

#[test]
fn a_suspended_job_outside_kueue_is_still_left_alone() {
    let mut suspended = job(None);
    suspended["spec"]["suspend"] = json!(true);
    assert!(matches!(
        planned(&suspended, &admitting()),
        Plan::Skip(Some(_))
    ));
}

fn worker_groups(n: usize, name: &str) -> Value {
    let group = |i: usize| {
        json!({"groupName": if i == 0 { name.to_string() } else { format!("g{i}") },
        "replicas": 1, "template": {"spec": {"containers": [{"name": "w", "image": "ray"}]}}})
    };
    Value::Array((0..n).map(group).collect())
}

#[rstest]
#[case::autoscaling(json!({"enableInTreeAutoscaling": true}), "autoscaling")]
#[case::eight_groups(json!({"workerGroupSpecs": worker_groups(8, "g0")}), "at most 7")]
#[case::group_named_head(json!({"workerGroupSpecs": worker_groups(1, "head")}), "named head")]
fn what_kueue_refuses_is_left_to_kueue(#[case] spec: Value, #[case] reason: &str) {
    let mut written = job(Some("team-q"));
    json_patch::merge(&mut written["spec"]["rayClusterSpec"], &spec);
    match planned(&written, &admitting()) {
        Plan::Skip(Some(why)) => assert!(why.contains(reason), "{why}"),
        other => panic!("expected a skip, got {other:?}"),
    }
}

#[test]
fn rayshares_autoscaling_is_refused_under_kueue() {
    let mut cfg = admitting();
    cfg.autoscaling.enabled = true;
    assert!(matches!(
        planned(&job(Some("q")), &cfg),
        Plan::Skip(Some(_))
    ));
    // Outside Kueue it still shares.
    assert!(matches!(planned(&job(None), &cfg), Plan::Rewrite(_)));
}

#[test]
fn seven_groups_are_shared() {
    let mut written = job(Some("team-q"));
    written["spec"]["rayClusterSpec"]["workerGroupSpecs"] = worker_groups(7, "g0");
    assert!(matches!(planned(&written, &admitting()), Plan::Rewrite(_)));
}

/// What Kueue's webhook does to a job after rayshare's, in a namespace with a `default`
/// LocalQueue.
fn kueue_after(mut job: Value) -> Value {
    labels::set(&mut job, Meta::Labels, labels::KUEUE_QUEUE, "default");
    job["spec"]["suspend"] = json!(true);
    job
}

#[test]
fn a_job_kueue_queued_after_the_rewrite_moves_to_its_queues_cluster() {
    let first = rewrite(&job(None));
    let again = rewrite(&kueue_after(first.job.clone()));
    // The very cluster a job labelled from the start gets.
    assert_eq!(again.name, rewrite(&job(Some("default"))).name);
    assert_ne!(again.name, first.name);
    assert_eq!(
        again.job["spec"]["clusterSelector"]["ray.io/cluster"],
        again.name
    );
    assert_eq!(
        labels::get(&again.job, Meta::Labels, labels::JOB_CLUSTER),
        Some(again.name.as_str())
    );
    assert_eq!(
        labels::get(&again.job, Meta::Labels, labels::KUEUE_QUEUE),
        None
    );
    assert_eq!(again.job["spec"]["suspend"], false);
    assert_eq!(again.cluster["spec"]["suspend"], true);
    // The first look's runtime env and token stay.
    assert_eq!(
        again.job["spec"]["runtimeEnvYAML"],
        first.job["spec"]["runtimeEnvYAML"]
    );
    // The provisioner makes it from the stored job.
    let mut stored = again.job.clone();
    stored["metadata"]["namespace"] = json!("ns");
    let made = cluster_for_job(&stored, &admitting()).expect("a cluster");
    assert_eq!(made["metadata"]["name"], again.name);
    // And a third call changes nothing.
    assert_eq!(planned(&again.job, &admitting()), Plan::Skip(None));
}

#[test]
fn under_skip_a_job_kueue_queued_after_the_rewrite_is_warned_about() {
    let first = match planned(&job(None), &SharedClusters::default()) {
        Plan::Rewrite(r) => r.job,
        other => panic!("expected a rewrite, got {other:?}"),
    };
    match planned(&kueue_after(first), &SharedClusters::default()) {
        Plan::Skip(Some(why)) => assert!(why.contains("order Kueue's mutating webhook"), "{why}"),
        other => panic!("expected a warning, got {other:?}"),
    }
}

#[test]
fn a_job_selecting_a_cluster_of_its_own_choosing_is_not_moved() {
    let mut own = job(Some("default"));
    own["spec"]["clusterSelector"] = json!({"ray.io/cluster": "mine"});
    assert_eq!(planned(&own, &admitting()), Plan::Skip(None));
}
