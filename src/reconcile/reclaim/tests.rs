use serde_json::json;

use super::*;
use crate::domain::labels;
use crate::reconcile::testkit::{Kit, key, rewritten_job};

fn cluster(name: &str, marked: Option<&str>) -> Value {
    let mut annotations = json!({labels::LAST_ADMITTED: "2020-01-01T00:00:00Z",
        labels::IDLE_TTL: "60"});
    if let Some(at) = marked {
        annotations[labels::RECLAIM_MARKED] = json!(at);
    }
    json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
            "resourceVersion": "5", "creationTimestamp": "2020-01-01T00:00:00Z",
            "labels": {labels::MANAGED_BY: labels::MANAGER, labels::SHARED_CLUSTER: "true",
                labels::INSTANCE: "rayshare"},
            "annotations": annotations}})
}

fn sweep(kit: &Kit) {
    let keys = kit.keys(&Reclaim);
    assert_eq!(keys, [key("", "RayCluster")]);
    kit.look(&Reclaim, &keys[0]).unwrap();
}

#[test]
fn an_idle_cluster_is_marked_then_deleted_after_the_quiet_period() {
    let kit = Kit::default();
    kit.have(cluster("idle", None));
    sweep(&kit);
    let marked = &kit.objects("RayCluster")[0];
    assert!(marked["metadata"]["annotations"][labels::RECLAIM_MARKED].is_string());
    assert!(kit.reasons().is_empty());

    let kit = Kit::default();
    kit.have(cluster("idle", Some("2020-01-01T00:00:00Z")));
    sweep(&kit);
    assert!(kit.objects("RayCluster").is_empty(), "reclaimed");
    assert_eq!(kit.reasons(), ["Reclaimed"]);
    let text = kit.scrape();
    assert!(
        text.contains("rayshare_objects_deleted_total{kind=\"RayCluster\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("rayshare_shared_clusters{state=\"expired\"} 1"),
        "{text}"
    );
}

#[test]
fn a_cluster_a_job_uses_is_kept_and_counted() {
    let kit = Kit::default();
    let (job, used) = rewritten_job("ns", "a", "2026-01-01T00:00:00Z");
    kit.have(cluster(&used.1, Some("2020-01-01T00:00:00Z")));
    kit.show(job);
    sweep(&kit);
    let kept = &kit.objects("RayCluster")[0];
    assert!(
        kept["metadata"]["annotations"][labels::RECLAIM_MARKED].is_null(),
        "unmarked"
    );
    assert!(kit.reasons().is_empty());
    let text = kit.scrape();
    assert!(
        text.contains("rayshare_shared_clusters{state=\"busy\"} 1"),
        "{text}"
    );
    let series = format!("cluster=\"{}\"", used.1);
    assert!(text.contains(&series), "{text}");
}

#[test]
fn another_installations_clusters_are_not_judged() {
    let kit = Kit::default();
    let mut theirs = cluster("theirs", Some("2020-01-01T00:00:00Z"));
    theirs["metadata"]["labels"][labels::INSTANCE] = json!("other");
    kit.have(theirs);
    sweep(&kit);
    assert_eq!(kit.objects("RayCluster").len(), 1);
    assert!(kit.world.patches.lock().unwrap().is_empty());
}

/// The head answers at `http://idle.ns.dash` with `subs`.
fn head_lists(kit: &mut Kit, subs: Vec<crate::domain::shared_cluster::job_life::Submission>) {
    kit.config.shared_clusters.stop_jobs.dashboard_url = "http://{cluster}.{namespace}.dash".into();
    let mut jobs = kit.world.ray_jobs.lock().unwrap();
    jobs.insert("http://idle.ns.dash".into(), subs);
}

fn running(id: &str) -> crate::domain::shared_cluster::job_life::Submission {
    crate::domain::shared_cluster::job_life::Submission {
        id: id.into(),
        status: "RUNNING".into(),
        tie: None,
        end_time: None,
    }
}

#[test]
fn a_cluster_whose_head_runs_a_job_no_rayjob_stands_for_is_kept_and_unmarked() {
    let mut kit = Kit::default();
    head_lists(&mut kit, vec![running("raysubmit_by_hand")]);
    kit.have(cluster("idle", Some("2020-01-01T00:00:00Z")));
    sweep(&kit);
    let kept = kit.objects("RayCluster");
    assert_eq!(kept.len(), 1, "not reclaimed");
    assert!(kept[0]["metadata"]["annotations"][labels::RECLAIM_MARKED].is_null());
    assert!(kit.reasons().is_empty());
}

#[test]
fn a_cluster_whose_head_lists_no_work_is_reclaimed() {
    let mut kit = Kit::default();
    let mut over = running("raysubmit_done");
    over.status = "SUCCEEDED".into();
    over.end_time = Some(1);
    head_lists(&mut kit, vec![over]);
    kit.have(cluster("idle", Some("2020-01-01T00:00:00Z")));
    sweep(&kit);
    assert!(kit.objects("RayCluster").is_empty(), "reclaimed");
    assert_eq!(kit.reasons(), ["Reclaimed"]);
}

#[test]
fn a_member_kept_warm_stays_while_warm_ahead_is_on_and_only_then() {
    let kept = || {
        let mut c = cluster("idle", Some("2020-01-01T00:00:00Z"));
        c["metadata"]["annotations"][labels::KEPT_WARM] =
            json!("kept warm: about 4.0 tasks an hour");
        c
    };
    let mut kit = Kit::default();
    kit.config.warm_ahead.enabled = true;
    kit.have(kept());
    sweep(&kit);
    let left = kit.objects("RayCluster");
    assert_eq!(left.len(), 1, "kept");
    assert!(
        left[0]["metadata"]["annotations"][labels::RECLAIM_MARKED].is_null(),
        "unmarked"
    );

    // Off: a note left from before pins nothing.
    let kit = Kit::default();
    kit.have(kept());
    sweep(&kit);
    assert!(kit.objects("RayCluster").is_empty(), "reclaimed");
}
