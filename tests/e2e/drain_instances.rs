//! Two installations in one cluster (issue 47): draining one deletes its own shared
//! clusters, index claims and PodGroups, and none of the other's, neither in the other's
//! namespaces nor in a namespace both use.

use kube::api::ListParams;
use serde_json::{Value, json};

use crate::harness::*;

/// The other installation's sweeps must not remove the objects the test made for it
/// while the test runs: long graces.
const LONG_GRACE: &str = "podGroups:\n  unconfirmedGraceSeconds: 3600\n  orphanGraceSeconds: 3600\nindices:\n  claimGraceSeconds: 3600\n";

/// A RayJob admitted through `env`'s webhook; its shared cluster, once provisioned.
pub async fn shared_cluster(env: &TestEnv) -> String {
    let stored = create_in(&env.admin, &env.ns, sample("rayjob-run-a.yaml"), false).await;
    let name = stored["spec"]["clusterSelector"]["ray.io/cluster"]
        .as_str()
        .expect("rewritten")
        .to_string();
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    wait_for("the shared cluster", || async {
        clusters.get_opt(&name).await.ok().flatten()
    })
    .await;
    name
}

/// An index claim, a PodGroup made at admission and never taken up (no owner), and an
/// idle shared cluster of installation `instance`, as it leaves them in `ns`.
pub fn objects_of(instance: &str, tag: &str) -> [Value; 3] {
    let mine =
        json!({"app.kubernetes.io/managed-by": "rayshare", "rayshare.io/instance": instance});
    let mut claim_labels = mine.clone();
    for (k, v) in [
        ("rayshare.io/index-claim", "true"),
        ("ray.io/cluster", "c"),
        ("ray.io/group", "g"),
        ("ray.io/worker-group-replica-index", "0"),
        ("rayshare.io/claim-hosts", "4"),
    ] {
        claim_labels[k] = json!(v);
    }
    let mut group_labels = mine.clone();
    group_labels["rayshare.io/pod"] = json!(format!("task-{tag}"));
    let mut cluster_labels = mine;
    cluster_labels["rayshare.io/shared-cluster"] = json!("true");
    [
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": format!("rayshare-idx-{tag}-0"), "labels": claim_labels},
            "spec": {}}),
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": format!("pg-{tag}"), "labels": group_labels},
            "spec": {"minMember": 1}}),
        json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": format!("ray-{tag}"), "labels": cluster_labels},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
                "containers": [{"name": "ray-head", "image": "rayproject/ray"}]}}}}}),
    ]
}

/// The names of rayshare's objects of one kind in `ns` (any installation).
pub async fn names(client: &kube::Client, ar: &kube::core::ApiResource, ns: &str) -> Vec<String> {
    let mut names: Vec<String> =
        kube::Api::<kube::api::DynamicObject>::namespaced_with(client.clone(), ns, ar)
            .list(&ListParams::default().labels("app.kubernetes.io/managed-by=rayshare"))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|o| o.metadata.deletion_timestamp.is_none())
            .map(|o| o.metadata.name.unwrap())
            .collect();
    names.sort();
    names
}

#[tokio::test]
async fn draining_one_installation_leaves_the_others_claims_groups_and_clusters() {
    let mut mine = TestEnv::new("drain-mine", LONG_GRACE, 1).await;
    let theirs = TestEnv::new("drain-theirs", LONG_GRACE, 1).await;
    let my_cluster = shared_cluster(&mine).await;
    let their_cluster = shared_cluster(&theirs).await;
    // Each installation's objects in its own namespace, and the other's in mine too (a
    // namespace both installations serve, e.g. through different object selectors).
    for (env, ns, instance, tag) in [
        (&mine, &mine.ns, &mine.name, "mine"),
        (&mine, &mine.ns, &theirs.name, "theirs-here"),
        (&theirs, &theirs.ns, &theirs.name, "theirs"),
    ] {
        for object in objects_of(instance, tag) {
            create_in(&env.admin, ns, object, false).await;
        }
    }
    let lease = resource("coordination.k8s.io", "v1", "Lease", "leases");
    let kinds = [
        ("rayclusters", ray_cluster_resource()),
        ("claims", lease),
        ("podgroups", pod_group_resource()),
    ];
    let mut before = Vec::new();
    for (kind, ar) in &kinds {
        before.push((kind, names(&mine.admin, ar, &theirs.ns).await));
    }

    // My installation is uninstalled (its job over); theirs keeps running, its job too.
    // The drain names mine and looks in every namespace.
    finish(&mine, "a0-0").await;
    mine.instances[0].stop();
    let out = crate::drain::rayshare_drain(&["--instance", &mine.name, "--wait-seconds", "60"])
        .output()
        .await
        .unwrap();
    let stdout = crate::drain::drained(&out);

    // Mine are gone (the drain deletes in the background: wait for the API server).
    let ns = &mine.ns;
    for (kind, ar) in &kinds {
        let left = wait_for(&format!("my {kind} to go"), || async {
            let left = names(&mine.admin, ar, ns).await;
            (!left.iter().any(|n| n.contains("mine") || *n == my_cluster)).then_some(left)
        })
        .await;
        // Theirs in my namespace are all still there.
        let expected = match *kind {
            "rayclusters" => "ray-theirs-here",
            "claims" => "rayshare-idx-theirs-here-0",
            _ => "pg-theirs-here",
        };
        assert_eq!(left, vec![expected.to_string()], "{kind} in {ns}: {stdout}");
    }
    // Theirs in their namespace: untouched, their shared cluster included.
    for ((kind, ar), (_, then)) in kinds.iter().zip(&before) {
        assert_eq!(&names(&theirs.admin, ar, &theirs.ns).await, then, "{kind}");
    }
    assert!(before[0].1.contains(&their_cluster), "{before:?}");
    let group = theirs
        .api(&pod_group_resource(), &theirs.ns)
        .get("pg-theirs")
        .await
        .unwrap();
    assert!(
        group.metadata.owner_references.is_none_or(|o| o.is_empty()),
        "their group was handed to a pod"
    );
    assert!(!stdout.contains("theirs"), "{stdout}");
}
