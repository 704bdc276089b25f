//! Pods: Volcano PodGroups made at admission or from the stored pod, and multi-host indices.

use rstest::rstest;
use serde_json::json;

use super::{patch_of, post, post_and_store, review, sample, state};
use crate::config::Config;
use crate::world::{MemoryWorld, WorldError};

/// The group exists when the pod's admission ends (Volcano's own webhook validates the
/// pod after rayshare), labelled as rayshare's and not yet taken up by a stored pod.
#[tokio::test]
async fn volcano_pod_gets_its_pod_group_during_admission() {
    let s = state(MemoryWorld::default(), Config::default());
    let mut body = review("", "v1", "Pod", "CREATE", sample("pod"));
    body["request"]["dryRun"] = json!(true);
    post(s.clone(), &body).await;
    assert!(s.world.created().is_empty(), "a dry run makes nothing");
    body["request"]["dryRun"] = json!(false);
    let r = post(s.clone(), &body).await;
    let ops = patch_of(&r);
    let name = ops
        .iter()
        .find(|o| o["path"].as_str().unwrap().ends_with("group-name"))
        .and_then(|o| o["value"].as_str())
        .unwrap_or_else(|| panic!("{ops:?}"));
    let created = s.world.created();
    assert_eq!(created.len(), 1);
    let group = &created[0];
    assert_eq!(
        (&group["kind"], &group["metadata"]["name"]),
        (&json!("PodGroup"), &json!(name))
    );
    assert_eq!(
        group["metadata"]["labels"]["rayshare.io/instance"],
        "rayshare"
    );
    // From the containers, which triage does not read.
    assert_eq!(
        group["spec"]["minResources"],
        json!({"cpu": "2", "memory": "1073741824"})
    );
    assert!(
        group["metadata"]["annotations"]
            .get("rayshare.io/pod-uid")
            .is_none()
    );
    // A retried admission finds it and names it again.
    let again = post(s.clone(), &body).await;
    assert_eq!(patch_of(&again), ops);
    assert_eq!(s.world.created().len(), 1);
}

/// With `podGroups.createAtAdmission: false` the group is made only from the stored pod.
#[tokio::test]
async fn volcano_pod_group_from_the_stored_pod_only_when_configured() {
    let mut config = Config::default();
    config.pod_groups.create_at_admission = false;
    let s = state(MemoryWorld::default(), config);
    let body = review("", "v1", "Pod", "CREATE", sample("pod"));
    post(s.clone(), &body).await;
    assert!(
        s.world.created().is_empty(),
        "admission alone makes nothing"
    );
    post_and_store(s.clone(), &body).await;
    let created = s.world.created();
    assert_eq!(created[0]["kind"], "PodGroup");
    assert!(
        created[0]["metadata"]["annotations"]
            .get("rayshare.io/pod-uid")
            .is_some()
    );
}

/// A group that cannot be made leaves the pod as it was (no group named on it, so
/// Volcano's own controller groups it), with a warning and the API's cause.
#[tokio::test]
async fn a_group_that_cannot_be_made_leaves_the_pod_unchanged() {
    let world = MemoryWorld {
        fail_writes: Some(WorldError::Forbidden("quota".into())),
        ..MemoryWorld::default()
    };
    let s = state(world, Config::default());
    let r = post(s.clone(), &review("", "v1", "Pod", "CREATE", sample("pod"))).await;
    assert_eq!(r["allowed"], true);
    assert!(r.get("patch").is_none(), "{r}");
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap()
            .contains("could not be made")
    );
    assert!(s.metrics.encode().contains("cause=\"api_forbidden\""));
}

#[tokio::test]
async fn an_odd_pod_can_be_denied_when_configured() {
    let mut config = Config::default();
    config.pod_groups.deny_on_error = true;
    let s = state(MemoryWorld::default(), config);
    let mut pod = sample("pod");
    pod["spec"] = json!(7);
    let r = post(s, &review("", "v1", "Pod", "CREATE", pod)).await;
    assert_eq!(r["allowed"], false, "{r}");
    assert!(
        r["status"]["message"]
            .as_str()
            .unwrap()
            .contains("not understood")
    );
}

/// KubeRay makes a cluster's first worker pods a moment after the cluster: a cache that
/// has not caught up is not a reason to leave a slice's pod without indices.
#[rstest]
#[case::cache_caught_up(false)]
#[case::cache_behind(true)]
#[tokio::test]
async fn a_worker_of_a_cluster_the_cache_has_not_seen_still_gets_indices(#[case] behind: bool) {
    let world = MemoryWorld {
        cache_behind: behind,
        ..MemoryWorld::default()
    };
    let cluster = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "tpu", "namespace": "team", "uid": "u-tpu"},
        "spec": {"workerGroupSpecs": [{"groupName": "a", "replicas": 2, "numOfHosts": 4}]}});
    world
        .objects
        .lock()
        .unwrap()
        .insert(("RayCluster".into(), "team".into(), "tpu".into()), cluster);
    let s = state(world, Config::default());
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "tpu-a-",
            "labels": {"ray.io/cluster": "tpu", "ray.io/group": "a", "ray.io/node-type": "worker"}},
        "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}]}});
    let r = post(s, &review("", "v1", "Pod", "CREATE", pod)).await;
    let ops = patch_of(&r);
    let labelled = |key: &str| {
        ops.iter()
            .any(|o| o.to_string().contains(&key.replace('/', "~1")))
    };
    assert!(labelled("ray.io/worker-group-replica-index"), "{r}");
    assert!(labelled("ray.io/replica-host-index"), "{r}");
}
