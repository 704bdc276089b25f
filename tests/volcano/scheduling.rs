//! Flyte-shaped pod tasks under the real Volcano: rayshare's groups, one per pod, carry
//! each pod's queue and priority; Volcano schedules them in their own queues, holds a pod
//! whose queue is full, and makes no second group for them, while a ReplicaSet's pods keep
//! Volcano's own group per owner.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

use crate::cluster::*;
use crate::harness::*;
use crate::world::*;

/// On a group: the uid of the stored pod the provisioner took it up from.
pub(crate) const POD_UID: &str = "rayshare.io/pod-uid";

/// A stand-in for flytepropeller's CRD (its module is not served by the proxy): only
/// so that Flyte's owner object exists, as the garbage collector expects. The CRD is made
/// once per control plane (another test may have made it already).
pub(crate) async fn flyte_workflow(env: &TestEnv) -> Value {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "flyteworkflows.flyte.lyft.com"},
        "spec": {"group": "flyte.lyft.com", "scope": "Namespaced",
            "names": {"plural": "flyteworkflows", "singular": "flyteworkflow",
                "kind": "FlyteWorkflow", "shortNames": ["fly"]},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]},
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(env.admin.clone());
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("creating the FlyteWorkflow CRD: {e}"),
    }
    let ar = resource(
        "flyte.lyft.com",
        "v1alpha1",
        "FlyteWorkflow",
        "flyteworkflows",
    );
    let workflows = env.api(&ar, &env.ns);
    let wf: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "flyte.lyft.com/v1alpha1", "kind": "FlyteWorkflow",
        "metadata": {"name": "f7a3c9e1b2d4"},
    }))
    .unwrap();
    let wf = wait_for_within(SLOW, "the FlyteWorkflow CRD to serve", || async {
        workflows.create(&PostParams::default(), &wf).await.ok()
    })
    .await;
    serde_json::to_value(wf).unwrap()
}

/// A pod as flytepropeller makes one for a pod task of workflow `wf` (owner reference
/// with the kind in lower case, as flytepropeller writes it), on Volcano with a queue.
pub(crate) fn pod_task(wf: &Value, node: &str, queue: &str, priority: &str, cpu: &str) -> Value {
    let exec = wf["metadata"]["name"].as_str().unwrap();
    json!({
        "metadata": {
            "name": format!("{exec}-{node}-0"),
            "labels": {"execution-id": exec, "node-id": node, "task-name": "pod_task",
                "interruptible": "false", "workflow-name": "wf"},
            "annotations": {"scheduling.volcano.sh/queue-name": queue},
            "ownerReferences": [{"apiVersion": "flyte.lyft.com/v1alpha1",
                "kind": "flyteworkflow", "name": exec, "uid": wf["metadata"]["uid"],
                "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {
            "schedulerName": "volcano",
            "priorityClassName": priority,
            "restartPolicy": "Never",
            "containers": [{"name": "primary", "image": "cr.flyte.org/flytekit:py3.11",
                "args": ["pyflyte-execute", "--task-name", "pod_task"],
                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"},
                    "limits": {"cpu": cpu, "memory": "1Gi"}}}],
        },
    })
}

pub(crate) async fn priority_class(env: &TestEnv, name: &str, value: i32) {
    let pc: k8s_openapi::api::scheduling::v1::PriorityClass =
        serde_json::from_value(json!({"metadata": {"name": name}, "value": value})).unwrap();
    Api::all(env.admin.clone())
        .create(&PostParams::default(), &pc)
        .await
        .unwrap();
}

pub(crate) fn group_name(pod: &Pod) -> Option<String> {
    pod.metadata
        .annotations
        .as_ref()?
        .get("scheduling.k8s.io/group-name")
        .cloned()
}

pub(crate) async fn running(pods: &Api<Pod>, name: &str) -> Pod {
    wait_for_within(SLOW, &format!("pod {name} to run"), || async {
        let pod = pods.get(name).await.ok()?;
        (pod_phase(&pod) == "Running").then_some(pod)
    })
    .await
}

/// Group `name` once Volcano's scheduler has judged it `Unschedulable` (its queue is full).
pub(crate) async fn unschedulable(groups: &Api<DynamicObject>, name: &str) -> DynamicObject {
    wait_for_within(SLOW, &format!("Volcano to judge group {name}"), || async {
        let g = groups.get_opt(name).await.ok()??;
        let conditions = g.data["status"]["conditions"].as_array()?.clone();
        conditions
            .iter()
            .any(|c| c["type"] == "Unschedulable")
            .then_some(g)
    })
    .await
}

#[tokio::test]
async fn pod_tasks_get_their_own_queues_and_priorities_under_the_real_volcano() {
    let _volcano = &*VOLCANO;
    let env = TestEnv::new("volcano-real", DEFAULT_CONFIG, 1).await;
    open_queue(&env.admin, "flyte-roomy", None).await;
    // Room for 1 CPU: a 2-CPU task waits, a 500m one runs.
    open_queue(&env.admin, "flyte-tight", Some(json!({"cpu": "1"}))).await;
    priority_class(&env, "flyte-high", 1000).await;
    priority_class(&env, "flyte-low", 10).await;
    let wf = flyte_workflow(&env).await;
    let pods: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);
    let groups = env.api(&pod_group_resource(), &env.ns);
    let create = |pod: Value| {
        let pods = pods.clone();
        async move {
            let pod: Pod = serde_json::from_value(pod).unwrap();
            pods.create(&PostParams::default(), &pod).await.unwrap()
        }
    };

    // Three tasks of one workflow, each with its own queue and priority: under Volcano's
    // own controller they would share one group (podgroup-<workflow uid>), one queue.
    let waits = create(pod_task(&wf, "n0", "flyte-tight", "flyte-low", "2")).await;
    let big = create(pod_task(&wf, "n1", "flyte-roomy", "flyte-high", "4")).await;
    let small = create(pod_task(&wf, "n2", "flyte-tight", "flyte-high", "500m")).await;
    for (pod, queue, priority) in [
        (&waits, "flyte-tight", "flyte-low"),
        (&big, "flyte-roomy", "flyte-high"),
        (&small, "flyte-tight", "flyte-high"),
    ] {
        let name = group_name(pod).expect("rayshare named the pod's group");
        assert_eq!(Some(&name), pod.metadata.name.as_ref());
        // The group exists from the pod's admission on (Volcano's webhook looked for it);
        // its spec is the stored pod's once the provisioner has taken it up (the pod's uid
        // on it).
        let uid = pod.metadata.uid.clone().unwrap();
        let group = wait_for_within(SLOW, &format!("PodGroup {name} taken up"), || async {
            let g = groups.get_opt(&name).await.ok()??;
            (g.annotations().get(POD_UID) == Some(&uid)).then_some(g)
        })
        .await;
        assert_eq!(group.data["spec"]["queue"], queue);
        assert_eq!(group.data["spec"]["priorityClassName"], priority);
        assert_eq!(
            group.metadata.owner_references.as_ref().unwrap()[0].kind,
            "flyteworkflow"
        );
    }
    // Volcano schedules each in its queue: the roomy queue's task and the tight queue's
    // small task run on the fake nodes...
    let big = running(&pods, big.metadata.name.as_ref().unwrap()).await;
    let small = running(&pods, small.metadata.name.as_ref().unwrap()).await;
    for pod in [&big, &small] {
        let node = pod.spec.as_ref().unwrap().node_name.clone().unwrap();
        assert!(node.starts_with("kwok-"), "{node}");
    }
    // ...while the tight queue's 2-CPU task waits, its group not admitted to the queue.
    let waiting = waits.metadata.name.clone().unwrap();
    let group = unschedulable(&groups, &waiting).await;
    assert_eq!(group.data["status"]["phase"], "Pending", "{:?}", group.data);
    eprintln!(
        "[volcano] {waiting} waits: {}",
        group.data["status"]["conditions"]
    );
    let pod = pods.get(&waiting).await.unwrap();
    assert_eq!(pod_phase(&pod), "Pending");
    assert!(pod.spec.unwrap().node_name.is_none());

    // Volcano's controller made no group for rayshare's pods.
    let names: Vec<String> = groups
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|g| g.metadata.name.clone().unwrap())
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with("podgroup-")),
        "{names:?}"
    );

    // A ReplicaSet's pods are not rayshare's (its kind is not on `ownerKinds`): Volcano's
    // controller gives them one group for the owner, as a ReplicaSet expects.
    let rs: k8s_openapi::api::apps::v1::ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"},
                    "annotations": {"scheduling.volcano.sh/queue-name": "flyte-roomy"}},
                "spec": {"schedulerName": "volcano", "containers": [{"name": "c",
                    "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}]}}},
    }))
    .unwrap();
    let rs = Api::namespaced(env.admin.clone(), &env.ns)
        .create(&PostParams::default(), &rs)
        .await
        .unwrap();
    let owner_group = format!("podgroup-{}", rs.metadata.uid.unwrap());
    let web = ListParams::default().labels("app=web");
    wait_for_within(
        SLOW,
        "the ReplicaSet's pods to run in Volcano's group",
        || async {
            let list = pods.list(&web).await.ok()?.items;
            let ok = list.len() == 2
                && list.iter().all(|p| {
                    pod_phase(p) == "Running" && group_name(p).as_deref() == Some(&owner_group)
                });
            ok.then_some(())
        },
    )
    .await;
    let group = groups.get(&owner_group).await.unwrap();
    assert_eq!(group.data["spec"]["queue"], "flyte-roomy");
    assert!(!group.labels().contains_key("app.kubernetes.io/managed-by"));
}
