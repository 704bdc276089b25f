use serde_json::{Value, json};

use super::*;
use crate::domain::labels;
use crate::reconcile::testkit::{Kit, key, rewritten_job};
use crate::world::background::Kind;
use crate::world::{MemoryWorld, WorldError};

const READY: &str = "2026-01-01T00:05:00Z";

fn ray_cluster(name: &str, state: &str) -> Value {
    json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "ns", "uid": "u",
            "labels": {labels::MANAGED_BY: labels::MANAGER, labels::SHARED_CLUSTER: "true",
                labels::INSTANCE: "rayshare"}},
        "status": {"state": state, "stateTransitionTimes": {"ready": READY}}})
}

fn waiting(name: &str, created: &str) -> (Value, Key) {
    let (mut job, cluster) = rewritten_job("ns", name, created);
    job["status"] = json!({"jobDeploymentStatus": "Initializing"});
    (job, cluster)
}

fn applied(cluster: &Key) -> WatchEvent {
    WatchEvent::RayCluster {
        change: Change::Applied,
        key: cluster.clone(),
        shared: true,
    }
}

#[test]
fn a_cluster_turning_ready_wakes_the_jobs_that_waited_for_it_once() {
    let kit = Kit::default();
    let (early, cluster) = waiting("early", "2026-01-01T00:00:00Z");
    let (late, _) = waiting("late", "2026-01-01T00:06:00Z");
    kit.show(early);
    kit.show(late);
    kit.have(ray_cluster(&cluster.1, ""));
    // Not ready yet: nothing to wake.
    kit.feed(&WakeOnReady, &applied(&cluster));
    assert!(kit.world.patches.lock().unwrap().is_empty());

    kit.have(ray_cluster(&cluster.1, "ready"));
    assert_eq!(
        kit.feed(&WakeOnReady, &applied(&cluster)),
        Some(cluster.clone())
    );
    // A resync, or the other replica's look: the job holds this readiness's time.
    assert_eq!(kit.keys(&WakeOnReady), std::slice::from_ref(&cluster));
    kit.look(&WakeOnReady, &cluster).unwrap();

    let patches = kit.world.patches.lock().unwrap();
    assert_eq!(patches.len(), 1, "{patches:?}");
    let (kind, target, patch) = &patches[0];
    assert_eq!((*kind, target), (Kind::RayJob, &key("ns", "early")));
    assert_eq!(
        patch["metadata"]["annotations"][labels::CLUSTER_MADE],
        READY
    );
    assert!(
        kit.scrape().contains("rayshare_jobs_woken_total 1"),
        "{}",
        kit.scrape()
    );
}

#[test]
fn only_a_shared_clusters_change_wakes_it() {
    let trigger = <WakeOnReady as Controller<MemoryWorld>>::trigger;
    let c = key("ns", "c");
    let event = |change, shared| WatchEvent::RayCluster {
        change,
        key: c.clone(),
        shared,
    };
    assert_eq!(trigger(&event(Change::Applied, true)), Some(c.clone()));
    assert_eq!(trigger(&event(Change::Listed, true)), Some(c.clone()));
    assert_eq!(trigger(&event(Change::Deleted, true)), None);
    assert_eq!(trigger(&event(Change::Applied, false)), None);
    let job = WatchEvent::RayJob {
        change: Change::Applied,
        cluster: c,
        over: false,
    };
    assert_eq!(trigger(&job), None);
}

#[test]
fn a_wake_the_api_server_refuses_is_counted() {
    let kit = Kit {
        world: MemoryWorld {
            fail_writes: Some(WorldError::Forbidden("policy".into())),
            ..MemoryWorld::default()
        },
        ..Kit::default()
    };
    let (job, cluster) = waiting("early", "2026-01-01T00:00:00Z");
    kit.show(job);
    kit.have(ray_cluster(&cluster.1, "ready"));
    kit.look(&WakeOnReady, &cluster).unwrap();
    assert!(
        kit.scrape().contains(r#"cause="provision_wake""#),
        "{}",
        kit.scrape()
    );
}
