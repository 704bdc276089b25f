//! What rayshare must leave alone, or pass with a warning, rather than fail admission.

use rstest::rstest;
use serde_json::{Value, json};

use super::{post, review, sample, state};
use crate::config::Config;
use crate::world::{MemoryWorld, WorldError};

#[rstest]
#[case::update(review("ray.io", "v1", "RayJob", "UPDATE", sample("rayjob")))]
#[case::other_kind(review("apps", "v1", "Deployment", "CREATE", json!({"spec": {}})))]
#[case::other_version(review("ray.io", "v1alpha1", "RayJob", "CREATE", sample("rayjob")))]
#[case::plain_pod(review("", "v1", "Pod", "CREATE", json!({"metadata": {"name": "p"}, "spec": {"containers": []}})))]
#[tokio::test]
async fn anything_else_passes_unchanged(#[case] body: Value) {
    let s = state(MemoryWorld::default(), Config::default());
    let r = post(s.clone(), &body).await;
    assert_eq!(r["allowed"], true);
    assert!(r.get("patch").is_none());
    assert!(s.world.created().is_empty());
}

#[rstest]
#[case::rayjob_spec_string(review("ray.io", "v1", "RayJob", "CREATE", json!({"spec": "odd"})))]
#[case::rayjob_no_object(review("ray.io", "v1", "RayJob", "CREATE", Value::Null))]
#[case::pod_spec_number(review("", "v1", "Pod", "CREATE", json!({"spec": 3})))]
#[tokio::test]
async fn odd_objects_pass_with_a_warning(#[case] body: Value) {
    let s = state(MemoryWorld::default(), Config::default());
    let r = post(s.clone(), &body).await;
    assert_eq!(r["allowed"], true);
    assert!(r.get("patch").is_none());
    assert!(!r["warnings"].as_array().unwrap().is_empty());
    assert!(s.metrics.encode().contains("outcome=\"failed_open\""));
}

/// Admission of jobs (and of group pods when groups are made from stored pods only)
/// writes nothing, so an API server that refuses every write cannot fail it: the
/// provisioners make the objects once the admitted ones are stored.
#[rstest]
#[case::rayjob(review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob")))]
#[case::pod(review("", "v1", "Pod", "CREATE", sample("pod")))]
#[tokio::test]
async fn admission_needs_no_api_writes(#[case] body: Value) {
    let world = MemoryWorld {
        fail_writes: Some(WorldError::Unreachable("connection refused".into())),
        ..MemoryWorld::default()
    };
    let mut config = Config::default();
    config.pod_groups.create_at_admission = false;
    let s = state(world, config);
    let r = post(s.clone(), &body).await;
    assert_eq!(r["allowed"], true);
    assert!(r.get("patch").is_some(), "{r}");
    assert!(!s.metrics.encode().contains("rayshare_errors_total"));
}

#[tokio::test]
async fn features_can_be_switched_off() {
    let mut config = Config::default();
    config.shared_clusters.enabled = false;
    config.pod_groups.enabled = false;
    let s = state(MemoryWorld::default(), config);
    for body in [
        review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob")),
        review("", "v1", "Pod", "CREATE", sample("pod")),
    ] {
        assert!(post(s.clone(), &body).await.get("patch").is_none());
    }
    assert!(s.world.created().is_empty());
}
