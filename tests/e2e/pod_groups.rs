//! Volcano PodGroups through the real API server and the real CRD.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

use crate::events::wait_event;
use crate::harness::*;

async fn create_pod(env: &TestEnv, ns: &str, pod: Value) -> Pod {
    let pod: Pod = serde_json::from_value(pod).unwrap();
    Api::<Pod>::namespaced(env.admin.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap()
}

/// A stored pod's group, once the provisioner has taken it up (made at the pod's
/// admission, it records the stored pod's uid and owner only then).
pub(crate) async fn made(groups: &Api<kube::api::DynamicObject>, name: &str) -> Value {
    let group = wait_for(&format!("PodGroup {name} taken up"), || async {
        let group = groups.get_opt(name).await.ok().flatten()?;
        let annotations = group.metadata.annotations.as_ref()?;
        annotations
            .contains_key("rayshare.io/pod-uid")
            .then_some(group)
    })
    .await;
    serde_json::to_value(group).unwrap()
}

fn group_of(pod: &Pod) -> Option<String> {
    pod.metadata
        .annotations
        .as_ref()?
        .get("scheduling.k8s.io/group-name")
        .cloned()
}

#[tokio::test]
async fn volcano_pods_get_their_own_group_and_others_are_untouched() {
    let env = TestEnv::new("podgroups", DEFAULT_CONFIG, 1).await;
    let groups = env.api(&pod_group_resource(), &env.ns);

    // generateName pod from the sample: group named from the prefix, fields from the pod.
    let pod = create_pod(&env, &env.ns, sample("volcano-pod.yaml")).await;
    let group_name = group_of(&pod).expect("annotated with its group");
    assert!(group_name.starts_with("pod-task-"));
    let group = made(&groups, &group_name).await;
    assert_eq!(group["spec"]["minMember"], 1);
    assert_eq!(group["spec"]["queue"], "research");
    assert_eq!(
        group["spec"]["minResources"],
        json!({"cpu": "2", "memory": "1073741824"})
    );
    assert_eq!(
        group["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "rayshare"
    );
    let note = wait_event(&env, &pod.metadata.name.clone().unwrap(), "PodGroupCreated").await;
    assert_eq!(
        note,
        format!("Created PodGroup {group_name} in queue research")
    );

    // A named pod with a priority class gets a group of its name.
    let mut named = sample("volcano-pod.yaml");
    named["metadata"] = json!({"name": "named-pod"});
    let pod = create_pod(&env, &env.ns, named).await;
    assert_eq!(group_of(&pod).as_deref(), Some("named-pod"));
    let group = made(&groups, "named-pod").await;
    assert_eq!(group["spec"]["queue"], "default");
    // A bare pod owns its group (the garbage collector deletes it with the pod).
    assert_eq!(
        group["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "Pod", "name": "named-pod",
            "uid": pod.metadata.uid, "controller": true}])
    );

    // Flyte's pods (v1 spells its owner's kind in lower case) get their own group, with the
    // scheduling hints Volcano's controller would copy; a ReplicaSet's pods are left to
    // Volcano's controller (one group per owner).
    let owned = |name: &str, api_version: &str, kind: &str| {
        let mut pod = sample("volcano-pod.yaml");
        pod["metadata"] = json!({"name": name,
            "annotations": {"volcano.sh/preemptable": "false", "volcano.sh/jdb-max-unavailable": "1"},
            "labels": {"volcano.sh/cooldown-time": "600s"},
            "ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": "owner",
                "uid": "0f0e7a4e-2a8e-4c56-9d6b-6c1d3f3b2a10", "controller": true}]});
        pod
    };
    for (name, api_version, kind) in [
        ("flyte-v1", "flyte.lyft.com/v1alpha1", "flyteworkflow"),
        ("flyte-v2", "flyte.org/v1", "TaskAction"),
    ] {
        let pod = create_pod(&env, &env.ns, owned(name, api_version, kind)).await;
        assert_eq!(group_of(&pod).as_deref(), Some(name));
        let group = made(&groups, name).await;
        assert_eq!(group["metadata"]["ownerReferences"][0]["kind"], kind);
        assert_eq!(
            group["metadata"]["annotations"]["volcano.sh/preemptable"],
            "false"
        );
        assert_eq!(
            group["metadata"]["annotations"]["volcano.sh/jdb-max-unavailable"],
            "1"
        );
        assert_eq!(
            group["metadata"]["labels"]["volcano.sh/cooldown-time"],
            "600s"
        );
    }
    let replica = create_pod(&env, &env.ns, owned("replica", "apps/v1", "ReplicaSet")).await;
    assert_eq!(group_of(&replica), None, "left to Volcano's controller");

    // Untouched: a pod that has a group, a non-volcano pod, any pod in a disabled namespace.
    let mut has_group = sample("volcano-pod.yaml");
    has_group["metadata"] =
        json!({"name": "has-group", "annotations": {"scheduling.k8s.io/group-name": "theirs"}});
    assert_eq!(
        group_of(&create_pod(&env, &env.ns, has_group).await).as_deref(),
        Some("theirs")
    );
    let mut plain = sample("volcano-pod.yaml");
    plain["metadata"] = json!({"name": "plain"});
    plain["spec"]["schedulerName"] = json!("default-scheduler");
    assert_eq!(group_of(&create_pod(&env, &env.ns, plain).await), None);
    let mut off = sample("volcano-pod.yaml");
    off["metadata"] = json!({"name": "off"});
    assert_eq!(group_of(&create_pod(&env, &env.ns_off, off).await), None);
    // Groups are made in the background: once a pod created after those has its group,
    // a group wrongly made for one of them would be there too.
    let mut last = sample("volcano-pod.yaml");
    last["metadata"] = json!({"name": "last"});
    create_pod(&env, &env.ns, last).await;
    made(&groups, "last").await;
    assert!(
        env.api(&pod_group_resource(), &env.ns_off)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(
        groups
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        5
    );
}

#[tokio::test]
async fn orphaned_groups_are_reconciled_away() {
    // ConfigMap owners are grouped here, to test an owner that outlives its pods.
    let config = "podGroups:\n  ownerKinds: [ConfigMap]\n  orphanGraceSeconds: 2\n  reconcileIntervalSeconds: 1\n";
    let env = TestEnv::new("orphans", config, 1).await;
    let groups = env.api(&pod_group_resource(), &env.ns);
    let pods = Api::<Pod>::namespaced(env.admin.clone(), &env.ns);
    let mut kept = sample("volcano-pod.yaml");
    kept["metadata"] = json!({"name": "kept"});
    create_pod(&env, &env.ns, kept).await;
    // An owned pod: its owner (here a ConfigMap) outlives it, so the group must not wait
    // for the owner's deletion.
    let owner: k8s_openapi::api::core::v1::ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap();
    let owner = Api::namespaced(env.admin.clone(), &env.ns)
        .create(&PostParams::default(), &owner)
        .await
        .unwrap();
    let mut gone = sample("volcano-pod.yaml");
    gone["metadata"] = json!({"name": "gone", "ownerReferences": [{"apiVersion": "v1",
        "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid, "controller": true}]});
    create_pod(&env, &env.ns, gone).await;
    let mut reborn = sample("volcano-pod.yaml");
    reborn["metadata"] = json!({"name": "reborn"});
    create_pod(&env, &env.ns, reborn.clone()).await;
    for name in ["kept", "gone", "reborn"] {
        made(&groups, name).await;
    }
    // No controller-manager here: deleting a pod leaves its group behind, as a rejected
    // admission would.
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    pods.delete("gone", &now).await.unwrap();
    wait_for("the orphaned group to be deleted", || async {
        groups
            .get_opt("gone")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    // A pod recreated under the same name (its group now older than the grace) reuses and
    // refreshes its group, which the reconciler must not delete from under it.
    // A pass in the moment no pod names the group rightly deletes it, and the new pod
    // makes a fresh one: then again, until a pod adopts the group it finds.
    let instance = &env.instances[0];
    wait_for("a recreated pod to adopt its group", || async {
        pods.delete("reborn", &now).await.ok()?;
        let again = create_pod(&env, &env.ns, reborn.clone()).await;
        assert_eq!(group_of(&again).as_deref(), Some("reborn"));
        let m = instance.metrics().await;
        m.contains("rayshare_objects_reused_total{kind=\"PodGroup\"}")
            .then_some(())
    })
    .await;
    // Two whole passes of the orphan reconciler after that (one may have been under way).
    instance.wait_passes("PodGroup", 2).await;
    assert!(
        groups.get_opt("kept").await.unwrap().is_some(),
        "a group in use is kept"
    );
    assert!(
        groups.get_opt("reborn").await.unwrap().is_some(),
        "a reused group is kept"
    );
}
