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
    // Nothing that holds queue capacity on a review's word: until the stored pod's
    // requests (and priority) replace it, more than any queue holds keeps it Pending.
    assert_eq!(group["spec"]["minMember"], 1);
    assert_eq!(
        group["spec"]["minResources"],
        json!({"cpu": crate::domain::pod_group::UNCONFIRMED_MIN_RESOURCES})
    );
    assert!(group["spec"].get("priorityClassName").is_none(), "{group}");
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

/// A review names its namespace itself: rayshare makes a group only where its own
/// namespace watch shows the webhook is enabled. Elsewhere the pod passes unchanged, so
/// Volcano's own controller groups it, and nothing is made.
#[rstest]
#[case::not_labelled("team-off", &[])]
#[case::labelled_off("team-off", &[("rayshare.io/enabled", "false")])]
#[case::excluded("kube-system", &[("rayshare.io/enabled", "true")])]
#[case::unknown("nowhere", &[])]
#[tokio::test]
async fn a_pod_in_a_namespace_rayshare_does_not_serve_gets_no_group(
    #[case] namespace: &str,
    #[case] labels: &[(&str, &str)],
) {
    let mut known = std::collections::HashMap::new();
    let on = [("rayshare.io/enabled".to_string(), "true".to_string())];
    known.insert("team".to_string(), on.into_iter().collect());
    if namespace != "nowhere" {
        let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        known.insert(namespace.to_string(), labels.collect());
    }
    let world = MemoryWorld {
        namespace_labels: Some(known),
        ..MemoryWorld::default()
    };
    let s = state(world, Config::default());
    let mut body = review("", "v1", "Pod", "CREATE", sample("pod"));
    body["request"]["namespace"] = json!(namespace);
    let r = post(s.clone(), &body).await;
    assert_eq!(r["allowed"], true);
    assert!(r.get("patch").is_none(), "{r}");
    assert!(s.world.created().is_empty());
    assert!(s.metrics.encode().contains("cause=\"not_served\""));
    // The same pod where the webhook is enabled gets its group.
    body["request"]["namespace"] = json!("team");
    let r = post(s.clone(), &body).await;
    assert!(r.get("patch").is_some(), "{r}");
    assert_eq!(s.world.created().len(), 1);
}

/// Groups made at admission whose pods were never stored are capped: past the cap a
/// pod passes unchanged (Volcano groups it) and nothing more is made.
#[tokio::test]
async fn groups_made_at_admission_are_capped() {
    use crate::domain::unconfirmed::Unconfirmed;
    let caps = Unconfirmed::with_caps(std::time::Duration::from_secs(30), 2, 10);
    let world = MemoryWorld {
        unconfirmed: Some(std::sync::Mutex::new(caps)),
        ..MemoryWorld::default()
    };
    let s = state(world, Config::default());
    for i in 0..3 {
        let mut pod = sample("pod");
        pod["metadata"]["name"] = json!(format!("forged-{i}"));
        let r = post(s.clone(), &review("", "v1", "Pod", "CREATE", pod)).await;
        assert_eq!(r["allowed"], true);
        assert_eq!(r.get("patch").is_some(), i < 2, "{i}: {r}");
    }
    assert_eq!(s.world.created().len(), 2);
    assert!(s.metrics.encode().contains("cause=\"unconfirmed_bound\""));
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
#[case::cache_caught_up(false, None, true)]
#[case::cache_behind(true, None, true)]
#[case::owned_by_the_cluster(false, Some("u-tpu"), true)]
// A review naming a cluster uid the API server does not have holds no slot.
#[case::owned_by_another_uid(false, Some("forged"), false)]
#[case::another_uid_cache_behind(true, Some("forged"), false)]
#[tokio::test]
async fn a_worker_of_a_cluster_the_cache_has_not_seen_still_gets_indices(
    #[case] behind: bool,
    #[case] owner_uid: Option<&str>,
    #[case] indexed: bool,
) {
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
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "tpu-a-",
            "labels": {"ray.io/cluster": "tpu", "ray.io/group": "a", "ray.io/node-type": "worker"}},
        "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}]}});
    if let Some(uid) = owner_uid {
        pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "ray.io/v1",
            "kind": "RayCluster", "name": "tpu", "uid": uid, "controller": true}]);
    }
    let r = post(s.clone(), &review("", "v1", "Pod", "CREATE", pod)).await;
    assert_eq!(r["allowed"], true);
    if !indexed {
        assert!(r.get("patch").is_none(), "{r}");
        assert!(s.world.claims.lock().unwrap().is_empty());
        return;
    }
    let ops = patch_of(&r);
    let labelled = |key: &str| {
        ops.iter()
            .any(|o| o.to_string().contains(&key.replace('/', "~1")))
    };
    assert!(labelled("ray.io/worker-group-replica-index"), "{r}");
    assert!(labelled("ray.io/replica-host-index"), "{r}");
}
