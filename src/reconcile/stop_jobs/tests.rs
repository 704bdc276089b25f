use serde_json::json;

use super::*;
use crate::domain::labels;
use crate::domain::shared_cluster::job_life::Tie;
use crate::reconcile::testkit::{Kit, key, rewritten_job};

const BASE: &str = "http://c.ns.dash";

fn kit() -> Kit {
    let mut kit = Kit::default();
    kit.config.shared_clusters.stop_jobs.dashboard_url = "http://{cluster}.{namespace}.dash".into();
    kit.have(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "c", "namespace": "ns", "uid": "uid-c",
            "labels": {labels::MANAGED_BY: labels::MANAGER, labels::SHARED_CLUSTER: "true",
                labels::INSTANCE: "rayshare"}},
        "spec": {}}));
    kit
}

fn submission(id: &str, status: &str, token: &str) -> Submission {
    Submission {
        id: id.into(),
        status: status.into(),
        tie: Some(Tie {
            instance: "rayshare".into(),
            namespace: Some("ns".into()),
            token: token.into(),
        }),
        end_time: (status != "RUNNING").then_some(1),
    }
}

fn list(kit: &Kit, subs: Vec<Submission>) {
    kit.world.ray_jobs.lock().unwrap().insert(BASE.into(), subs);
}

#[test]
fn the_ray_job_of_a_deleted_rayjob_is_stopped_and_a_finished_ones_record_deleted() {
    let kit = kit();
    list(
        &kit,
        vec![
            submission("run-gone", "RUNNING", "tok-gone"),
            submission("done-gone", "SUCCEEDED", "tok-done"),
        ],
    );
    let stopper = <StopJobs as Controller<crate::world::MemoryWorld>>::new(&kit.config);
    assert_eq!(kit.keys(&stopper), [key("ns", "c")]);
    kit.look(&stopper, &key("ns", "c")).unwrap();
    let calls = kit.world.ray_calls.lock().unwrap().clone();
    assert_eq!(calls, ["stop run-gone", "delete done-gone"]);
    assert_eq!(kit.reasons(), ["StoppedRayJob"]);
    // Asked a moment ago: not asked again while the list still shows it running.
    list(&kit, vec![submission("run-gone", "RUNNING", "tok-gone")]);
    kit.look(&stopper, &key("ns", "c")).unwrap();
    assert_eq!(kit.world.ray_calls.lock().unwrap().len(), 2);
}

#[test]
fn a_ray_job_whose_rayjob_the_api_server_still_has_is_left() {
    let kit = kit();
    let (mut job, _) = rewritten_job("ns", "a", "2026-01-01T00:00:00Z");
    job["metadata"]["labels"][labels::ADMISSION_UID] = json!("tok-live");
    job["status"] = json!({"jobDeploymentStatus": "Running"});
    kit.show(job);
    list(&kit, vec![submission("run-live", "RUNNING", "tok-live")]);
    let stopper = <StopJobs as Controller<crate::world::MemoryWorld>>::new(&kit.config);
    kit.look(&stopper, &key("ns", "c")).unwrap();
    assert!(kit.world.ray_calls.lock().unwrap().is_empty());
}

#[test]
fn a_dashboard_that_does_not_answer_is_a_failure_and_a_gone_cluster_forgets_its_series() {
    let kit = kit();
    let stopper = <StopJobs as Controller<crate::world::MemoryWorld>>::new(&kit.config);
    let failed = kit.look(&stopper, &key("ns", "c")).unwrap_err();
    assert_eq!(failed.cause, Cause::Dashboard);
    list(&kit, vec![]);
    kit.look(&stopper, &key("ns", "c")).unwrap();
    assert!(kit.scrape().contains("cluster=\"c\""), "{}", kit.scrape());
    kit.world.objects.lock().unwrap().clear();
    assert!(kit.keys(&stopper).is_empty());
    assert!(!kit.scrape().contains("cluster=\"c\""), "{}", kit.scrape());
}

#[test]
fn a_deleted_or_finished_rayjob_wakes_its_cluster() {
    let trigger = <StopJobs as Controller<crate::world::MemoryWorld>>::trigger;
    let job = |change, over| WatchEvent::RayJob {
        change,
        cluster: key("ns", "c"),
        over,
    };
    assert_eq!(trigger(&job(Change::Deleted, false)), Some(key("ns", "c")));
    assert_eq!(trigger(&job(Change::Applied, true)), Some(key("ns", "c")));
    assert_eq!(trigger(&job(Change::Applied, false)), None);
    assert_eq!(trigger(&job(Change::Listed, true)), None);
}
