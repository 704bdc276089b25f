use serde_json::json;

use super::*;
use crate::domain::labels;
use crate::reconcile::testkit::{Kit, key};

fn pod(name: &str, uid: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "namespace": "team", "uid": uid,
            "annotations": { labels::GROUP_NAME: format!("{name}-group") },
            "labels": { labels::POD_GROUPED: "rayshare" } },
        "spec": { "schedulerName": "volcano",
            "containers": [{ "name": "c", "image": "i",
                "resources": { "requests": { "cpu": "2" } } }] },
    })
}

fn applied(name: &str) -> WatchEvent {
    WatchEvent::Pod {
        change: Change::Applied,
        key: key("team", name),
    }
}

#[test]
fn a_stored_pod_gets_its_group_once() {
    let kit = Kit::default();
    kit.show(pod("p", "uid-1"));
    assert!(kit.feed(&MakeGroups, &applied("p")).is_some());
    let groups = kit.objects("PodGroup");
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0]["metadata"]["name"], "p-group");
    assert_eq!(
        groups[0]["metadata"]["annotations"][labels::POD_UID],
        "uid-1"
    );
    assert_eq!(kit.reasons(), ["PodGroupCreated"]);
    // Settled: looked at again (a resync), it writes nothing, even if the group went.
    kit.world.objects.lock().unwrap().clear();
    kit.look(&MakeGroups, &key("team", "p")).unwrap();
    assert!(kit.objects("PodGroup").is_empty());
    // Gone from the watch: forgotten at the next resync.
    kit.world.stored.lock().unwrap().clear();
    assert!(kit.keys(&MakeGroups).is_empty());
    assert!(!kit.memo.noted("uid-1"));
}

#[test]
fn a_group_made_at_admission_is_taken_up_by_the_stored_pod() {
    let kit = Kit::default();
    kit.show(pod("p", "uid-1"));
    let mut group = stored_pod_group::group_for(
        &pod("p", "uid-1"),
        None,
        &kit.config.pod_groups,
        &kit.config.opt_out_annotation,
    )
    .unwrap();
    group["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove(labels::POD_UID);
    kit.have(group);
    kit.feed(&MakeGroups, &applied("p"));
    let patches = kit.world.patches.lock().unwrap();
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0].0, Kind::PodGroup);
    assert_eq!(patches[0].1, key("team", "p-group"));
    assert_eq!(kit.reasons(), ["PodGroupCreated"]);
    assert!(kit.memo.noted("uid-1"));
}

#[test]
fn another_live_pods_group_is_left_alone() {
    let kit = Kit::default();
    kit.show(pod("p", "uid-1"));
    kit.show(pod("q", "uid-2"));
    let mut group = stored_pod_group::group_for(
        &pod("q", "uid-2"),
        None,
        &kit.config.pod_groups,
        &kit.config.opt_out_annotation,
    )
    .unwrap();
    group["metadata"]["name"] = json!("p-group");
    kit.have(group);
    kit.feed(&MakeGroups, &applied("p"));
    assert!(kit.world.patches.lock().unwrap().is_empty());
    assert!(kit.reasons().is_empty());
    assert!(
        kit.scrape().contains("cause=\"name_conflict\"} 1"),
        "{}",
        kit.scrape()
    );
}

#[test]
fn a_failed_create_is_not_settled_and_a_deleted_pod_wakes_nothing() {
    let kit = Kit {
        world: crate::world::MemoryWorld {
            fail_writes: Some(WorldError::Timeout),
            ..Default::default()
        },
        ..Kit::default()
    };
    kit.show(pod("p", "uid-1"));
    kit.feed(&MakeGroups, &applied("p"));
    assert!(!kit.memo.noted("uid-1"), "looked at again");
    let deleted = WatchEvent::Pod {
        change: Change::Deleted,
        key: key("team", "p"),
    };
    assert_eq!(
        <MakeGroups as Controller<crate::world::MemoryWorld>>::trigger(&deleted),
        None
    );
}
