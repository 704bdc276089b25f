use serde_json::{Value, json};

use super::*;
use crate::domain::labels;
use crate::reconcile::testkit::Kit;

fn claim(name: &str, replica: &str, host: &str) -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
            "resourceVersion": "3", "creationTimestamp": "2020-01-01T00:00:00Z",
            "labels": {labels::INDEX_CLAIM: "true", labels::INSTANCE: "rayshare",
                labels::RAY_CLUSTER: "c", labels::RAY_GROUP: "g",
                labels::REPLICA_INDEX: replica, labels::HOST_INDEX: host}}})
}

#[test]
fn claims_no_pod_holds_are_released_and_held_ones_kept() {
    let kit = Kit::default();
    kit.have(claim("free", "0", "1"));
    kit.have(claim("held", "0", "0"));
    let mut block = claim("block", "1", "0");
    block["metadata"]["labels"][labels::CLAIM_HOSTS] = json!("4");
    kit.have(block);
    kit.show(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "w", "namespace": "ns",
            "labels": {labels::RAY_NODE_TYPE: "worker", labels::RAY_CLUSTER: "c",
                labels::RAY_GROUP: "g", labels::REPLICA_INDEX: "0", labels::HOST_INDEX: "0"}}}));
    let keys = kit.keys(&OrphanClaims);
    assert_eq!(keys.len(), 1, "a sweep has one key");
    kit.look(&OrphanClaims, &keys[0]).unwrap();
    let left: Vec<Value> = kit
        .objects("Lease")
        .iter()
        .map(|c| c["metadata"]["name"].clone())
        .collect();
    assert_eq!(left, ["block", "held"]);
    assert!(
        kit.scrape()
            .contains("rayshare_objects_deleted_total{kind=\"IndexClaim\"} 1")
    );
}

#[test]
fn a_claim_changed_since_the_list_is_not_deleted() {
    let kit = Kit::default();
    kit.have(claim("free", "0", "1"));
    let meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta =
        serde_json::from_value(json!({"name": "free", "namespace": "ns", "uid": "uid-free",
            "resourceVersion": "2"}))
        .unwrap();
    let cx = kit.cx();
    futures::executor::block_on(cx.delete_exact(Kind::Lease, &meta, "IndexClaim", "test"));
    assert_eq!(kit.objects("Lease").len(), 1);
    assert!(
        !kit.scrape()
            .contains("rayshare_objects_deleted_total{kind=\"IndexClaim\"} 1")
    );
}
