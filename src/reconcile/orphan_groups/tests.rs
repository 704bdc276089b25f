use serde_json::{Value, json};

use super::*;
use crate::domain::labels;
use crate::reconcile::testkit::Kit;

fn group(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}"),
            "resourceVersion": "7", "creationTimestamp": "2020-01-01T00:00:00Z",
            "labels": {labels::MANAGED_BY: labels::MANAGER, labels::INSTANCE: "rayshare"},
            "annotations": {labels::POD_UID: "p"}}})
}

fn pod(ns: &str, group: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-of-{group}"), "namespace": ns,
            "annotations": {labels::GROUP_NAME: group}}})
}

#[test]
fn groups_no_pod_names_are_deleted_and_named_ones_kept() {
    let kit = Kit::default();
    kit.have(group("a", "orphan"));
    kit.have(group("a", "used"));
    kit.have(group("b", "used"));
    let mut foreign = group("a", "someone-elses");
    foreign["metadata"]["labels"][labels::INSTANCE] = json!("other");
    kit.have(foreign);
    kit.show(pod("a", "used"));
    kit.show(pod("b", "used"));
    let keys = kit.keys(&OrphanGroups);
    kit.look(&OrphanGroups, &keys[0]).unwrap();
    let left: Vec<String> = kit
        .objects("PodGroup")
        .iter()
        .map(|g| format!("{}/{}", g["metadata"]["namespace"], g["metadata"]["name"]))
        .map(|s| s.replace('"', ""))
        .collect();
    assert_eq!(left, ["a/someone-elses", "a/used", "b/used"]);
    assert!(
        kit.scrape()
            .contains("rayshare_objects_deleted_total{kind=\"PodGroup\"} 1")
    );
}

#[test]
fn a_group_within_its_grace_is_kept() {
    let kit = Kit::default();
    kit.have(group("a", "young"));
    kit.world
        .objects
        .lock()
        .unwrap()
        .values_mut()
        .for_each(|g| {
            g["metadata"]["creationTimestamp"] =
                json!(k8s_openapi::jiff::Timestamp::now().to_string());
        });
    let keys = kit.keys(&OrphanGroups);
    kit.look(&OrphanGroups, &keys[0]).unwrap();
    assert_eq!(kit.objects("PodGroup").len(), 1, "within its grace: kept");
}

#[test]
fn a_failed_list_is_a_failure_to_retry() {
    let kit = Kit {
        world: crate::world::MemoryWorld {
            fail_lists: Some(crate::world::WorldError::Timeout),
            ..Default::default()
        },
        ..Kit::default()
    };
    let keys = kit.keys(&OrphanGroups);
    let failed = kit.look(&OrphanGroups, &keys[0]).unwrap_err();
    assert_eq!(failed.cause, crate::cause::Cause::ReconcileList);
}
