use serde_json::json;

use super::*;
use crate::reconcile::testkit::{Kit, key, rewritten_job};
use crate::world::WorldError;
use crate::world::watch::Change;

fn job_event(change: Change, cluster: &Key) -> WatchEvent {
    WatchEvent::RayJob {
        change,
        cluster: cluster.clone(),
        over: false,
    }
}

#[test]
fn a_stored_job_wakes_its_cluster_which_is_made_once_from_the_stored_spec() {
    let kit = Kit::default();
    let (job, cluster) = rewritten_job("ns", "a", "2026-01-01T00:00:00Z");
    kit.show(job);
    let woken = kit.feed(&MakeClusters, &job_event(Change::Applied, &cluster));
    assert_eq!(woken.as_ref(), Some(&cluster));
    let made = kit.objects("RayCluster");
    assert_eq!(made.len(), 1);
    assert_eq!(made[0]["metadata"]["name"], cluster.1.as_str());
    let ttl = &made[0]["metadata"]["annotations"][labels::IDLE_TTL];
    assert!(ttl.is_string(), "the idle TTL is set: {ttl}");
    assert_eq!(kit.reasons(), ["Created"]);
    assert!(
        kit.scrape()
            .contains("rayshare_objects_created_total{kind=\"RayCluster\"} 1")
    );
    // Made a moment ago, and the cache does not show it yet: not made again.
    kit.world.objects.lock().unwrap().clear();
    kit.look(&MakeClusters, &cluster).unwrap();
    assert!(kit.objects("RayCluster").is_empty());
    assert_eq!(kit.keys(&MakeClusters), [cluster]);
}

#[test]
fn a_refused_create_is_told_to_each_waiting_job_and_retried() {
    let kit = Kit {
        world: crate::world::MemoryWorld {
            fail_writes: Some(WorldError::Forbidden("exceeded quota: rayclusters".into())),
            ..Default::default()
        },
        ..Kit::default()
    };
    let (a, cluster) = rewritten_job("ns", "a", "2026-01-01T00:00:00Z");
    let (b, _) = rewritten_job("ns", "b", "2026-01-01T00:01:00Z");
    kit.show(a);
    kit.show(b);
    let failed = kit.look(&MakeClusters, &cluster).unwrap_err();
    assert_eq!(failed.cause, Cause::ProvisionCreate);
    assert_eq!(
        kit.reasons(),
        ["SharedClusterNotMade", "SharedClusterNotMade"]
    );
    let events = kit.world.events.lock().unwrap();
    assert!(
        events[0].note.contains("exceeded quota"),
        "{}",
        events[0].note
    );
    assert!(events.iter().all(|e| e.warning));
}

#[test]
fn only_a_shared_clusters_deletion_wakes_the_provisioner() {
    let cluster = |change, shared| WatchEvent::RayCluster {
        change,
        key: key("ns", "c"),
        shared,
    };
    let trigger = <MakeClusters as Controller<crate::world::MemoryWorld>>::trigger;
    assert_eq!(
        trigger(&cluster(Change::Deleted, true)),
        Some(key("ns", "c"))
    );
    assert_eq!(trigger(&cluster(Change::Deleted, false)), None);
    assert_eq!(trigger(&cluster(Change::Applied, true)), None);
    let pod = WatchEvent::Pod {
        change: Change::Applied,
        key: key("ns", "p"),
    };
    assert_eq!(trigger(&pod), None);
}

#[test]
fn a_cluster_whose_last_job_went_gets_the_idle_clock_stamped() {
    let kit = Kit::default();
    let (_, cluster) = rewritten_job("ns", "a", "2026-01-01T00:00:00Z");
    kit.have(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": cluster.1, "namespace": "ns", "uid": "u",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {labels::MANAGED_BY: labels::MANAGER, labels::SHARED_CLUSTER: "true"},
            "annotations": {labels::LAST_ADMITTED: "2026-01-01T00:00:00Z"}}}));
    let went: Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
    kit.world
        .went_idle
        .lock()
        .unwrap()
        .insert(cluster.clone(), went);
    kit.feed(&MakeClusters, &job_event(Change::Deleted, &cluster));
    let patches = kit.world.patches.lock().unwrap();
    assert_eq!(patches.len(), 1, "{patches:?}");
    let (kind, target, patch) = &patches[0];
    assert_eq!((*kind, target), (Kind::RayCluster, &cluster));
    let stamp = &patch["metadata"]["annotations"][labels::LAST_ACTIVE];
    assert_eq!(stamp, "2026-01-01T01:00:00Z");
    assert!(kit.objects("RayCluster").len() == 1, "nothing made");
}
