use serde_json::json;

use super::*;
use crate::domain::labels;
use crate::reconcile::testkit::{Kit, rewritten_job};

fn cluster(name: &str, suspend: bool) -> Value {
    json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "ns", "uid": "u",
            "labels": {labels::MANAGED_BY: labels::MANAGER, labels::SHARED_CLUSTER: "true",
                labels::INSTANCE: "rayshare"}},
        "spec": {"suspend": suspend}})
}

#[test]
fn each_running_job_of_a_suspended_cluster_is_told_once() {
    let kit = Kit::default();
    let (mut running, key) = rewritten_job("ns", "a", "2026-01-01T00:00:00Z");
    running["status"] = json!({"jobDeploymentStatus": "Running"});
    let (waiting, _) = rewritten_job("ns", "b", "2026-01-01T00:00:00Z");
    kit.show(running);
    kit.show(waiting);
    kit.have(cluster(&key.1, true));
    kit.have(cluster("awake", false));
    assert_eq!(kit.keys(&Suspended), std::slice::from_ref(&key));
    kit.look(&Suspended, &key).unwrap();
    kit.look(&Suspended, &key).unwrap();
    assert_eq!(kit.reasons(), ["SharedClusterSuspended"]);
    let events = kit.world.events.lock().unwrap();
    let Regarding::Stored(job) = &events[0].regarding else {
        panic!("a stored job");
    };
    assert_eq!((job.kind.as_str(), job.name.as_str()), ("RayJob", "a"));
    assert!(
        kit.scrape().contains("rayshare_jobs_cut_off_total 1"),
        "{}",
        kit.scrape()
    );
}

#[test]
fn a_job_gone_is_forgotten_at_the_next_resync() {
    let kit = Kit::default();
    kit.memo.note("uid-gone");
    let (job, _) = rewritten_job("ns", "a", "2026-01-01T00:00:00Z");
    kit.show(job);
    kit.memo.note("uid-a");
    assert!(kit.keys(&Suspended).is_empty());
    assert!(kit.memo.noted("uid-a") && !kit.memo.noted("uid-gone"));
}
