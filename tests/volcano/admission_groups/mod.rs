//! PodGroups made during the pod's admission (issue 28), under the full Volcano install:
//! its `validatepod.volcano.sh` webhook (failurePolicy Fail) accepts rayshare's pods
//! because their group exists by then. A Flyte pod task, a bare pod and a `generateName`
//! pod each end up in rayshare's group, one group per pod and none of Volcano's
//! `podgroup-<uid>`; a pod refused by a later admission step leaves a group that rayshare's
//! orphan reconciler deletes after `podGroups.unconfirmedGraceSeconds`; a thousand pods at
//! once are all accepted.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use crate::cluster::*;
use crate::harness::*;
use crate::scheduling::{
    POD_UID, flyte_workflow, group_name, pod_task, priority_class, running, unschedulable,
};
use crate::world::*;

mod bulk;
mod orphan;

const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
const INSTANCE: &str = "rayshare.io/instance";

/// A bare Volcano pod (no owner): `name`, or a `generateName` prefix when it ends in `-`.
fn bare_pod(name: &str, queue: &str, cpu: &str) -> Pod {
    let naming = if name.ends_with('-') {
        "generateName"
    } else {
        "name"
    };
    serde_json::from_value(json!({
        "metadata": {naming: name, "annotations": {"scheduling.volcano.sh/queue-name": queue}},
        "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]},
    }))
    .unwrap()
}

/// The group named on each pod is rayshare's (this installation's), made for that pod and
/// taken up from it, one group per pod, and the namespace holds no other group (none of
/// Volcano's `podgroup-<uid>`). Waits for the provisioner to take every group up, and for
/// Volcano's pg-controller to have handled a pod created after `pods` (a witness in the
/// namespace rayshare does not serve gets its `podgroup-<uid>`). Returns the groups.
async fn one_group_each(env: &TestEnv, pods: &[Pod]) -> Vec<DynamicObject> {
    let groups = env.api(&pod_group_resource(), &env.ns);
    let witness = bare_pod("witness-", "default", "10m");
    let witness = Api::<Pod>::namespaced(env.admin.clone(), &env.ns_off)
        .create(&PostParams::default(), &witness)
        .await
        .expect("Volcano accepts a pod rayshare does not see (its controller groups it)");
    let witness_group = format!("podgroup-{}", witness.uid().unwrap());
    let off_groups = env.api(&pod_group_resource(), &env.ns_off);
    wait_for_within(
        SLOW,
        "Volcano's pg-controller to group the witness",
        || async { off_groups.get_opt(&witness_group).await.ok()?.map(|_| ()) },
    )
    .await;

    let expected: BTreeMap<String, (String, String)> = pods
        .iter()
        .map(|p| {
            let group = group_name(p).expect("rayshare named the pod's group");
            (group, (p.name_any(), p.uid().unwrap()))
        })
        .collect();
    assert_eq!(expected.len(), pods.len(), "two pods name one group");
    let all = wait_for_within(SLOW, "every group taken up from its pod", || async {
        let list = groups.list(&ListParams::default()).await.ok()?.items;
        let taken_up = expected.iter().all(|(group, (_, uid))| {
            list.iter().any(|g| {
                g.metadata.name.as_ref() == Some(group) && g.annotations().get(POD_UID) == Some(uid)
            })
        });
        taken_up.then_some(list)
    })
    .await;
    let names: BTreeSet<String> = all.iter().map(|g| g.name_any()).collect();
    let wanted: BTreeSet<String> = expected.keys().cloned().collect();
    let others: Vec<&String> = names.difference(&wanted).collect();
    assert!(
        wanted.is_subset(&names) && others.is_empty(),
        "the namespace's groups are the pods' own: missing {:?}, others {others:?}",
        wanted.difference(&names).collect::<Vec<_>>()
    );
    let all: Vec<DynamicObject> = all
        .into_iter()
        .filter(|g| wanted.contains(&g.name_any()))
        .collect();
    for g in &all {
        let (pod, _) = &expected[&g.name_any()];
        assert_eq!(
            g.labels().get(MANAGED_BY).map(|s| s.as_str()),
            Some("rayshare")
        );
        assert_eq!(g.labels().get(INSTANCE), Some(&env.name), "{pod}");
        assert!(
            !g.name_any().starts_with("podgroup-"),
            "{pod}: {}",
            g.name_any()
        );
    }
    // Every pod still names its own group (Volcano's controller did not rename any).
    let stored: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);
    for (group, (pod, _)) in &expected {
        let pod = stored.get(pod).await.unwrap();
        assert_eq!(group_name(&pod).as_ref(), Some(group));
    }
    all
}

/// (a) A Flyte pod task in a queue another pod fills: accepted by Volcano's webhook, its
/// group (rayshare's, with the task's queue) exists from its admission on; it waits while
/// the queue is full and runs once the other pod is gone.
#[tokio::test]
async fn a_flyte_pod_task_waits_in_its_full_queue_then_runs() {
    let _volcano = &*VOLCANO;
    let env = TestEnv::new("ag-flyte", DEFAULT_CONFIG, 1).await;
    open_queue(&env.admin, "ag-flyte-tight", Some(json!({"cpu": "1"}))).await;
    priority_class(&env, "ag-flyte-high", 1000).await;
    let wf = flyte_workflow(&env).await;
    let pods: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);
    let groups = env.api(&pod_group_resource(), &env.ns);
    let seen = Seen::watch(&groups).await;

    // A bare pod takes the queue's whole CPU (its group is owned by it, so it goes with it).
    let hog = pods
        .create(
            &PostParams::default(),
            &bare_pod("hog", "ag-flyte-tight", "1"),
        )
        .await
        .expect("Volcano accepts the bare pod");
    running(&pods, "hog").await;

    let task: Pod = serde_json::from_value(pod_task(
        &wf,
        "n0",
        "ag-flyte-tight",
        "ag-flyte-high",
        "500m",
    ))
    .unwrap();
    let task = pods
        .create(&PostParams::default(), &task)
        .await
        .expect("Volcano accepts the Flyte pod task: its group exists");
    let name = task.name_any();
    assert_eq!(group_name(&task).as_ref(), Some(&name));
    // Made during the admission (the first version the watch saw: labelled as rayshare's,
    // not yet taken up), with the task's queue. Its spec is printed: at 0ffe280 it was made
    // from triage's view of the pod (metadata and schedulerName only), so it had
    // `minResources: {}` and no priorityClassName until the provisioner took it up, and
    // Volcano could enqueue it past its queue's capability meanwhile.
    let (_, made) = wait_for("the group's creation to be watched", || async {
        seen.first("ADDED", &name)
    })
    .await;
    eprintln!(
        "[admission-groups] {name}'s group as made at admission: labels {:?}, annotations {:?}, spec {}",
        made.labels(),
        made.annotations(),
        made.data["spec"]
    );
    assert_eq!(made.labels().get(INSTANCE), Some(&env.name));
    assert!(!made.annotations().contains_key(POD_UID));
    assert_eq!(made.data["spec"]["queue"], "ag-flyte-tight");
    assert_eq!(
        made.owner_references()[0].kind,
        "flyteworkflow",
        "owned by the task's workflow from the start"
    );
    one_group_each(&env, &[hog, task.clone()]).await;
    let group = groups.get(&name).await.unwrap();
    assert_eq!(group.data["spec"]["queue"], "ag-flyte-tight");
    assert_eq!(
        group.data["spec"]["minResources"]["cpu"], "500m",
        "{:?}",
        group.data
    );
    assert_eq!(group.data["spec"]["priorityClassName"], "ag-flyte-high");

    // The queue is full: Volcano judges the group and the task stays Pending, unbound.
    let judged = unschedulable(&groups, &name).await;
    eprintln!(
        "[admission-groups] {name} waits in its full queue: phase {}, {}",
        judged.data["status"]["phase"], judged.data["status"]["conditions"]
    );
    let waiting = pods.get(&name).await.unwrap();
    assert_eq!(pod_phase(&waiting), "Pending");
    assert!(waiting.spec.unwrap().node_name.is_none());

    // Capacity frees: the task is scheduled onto a fake node.
    let freed = Instant::now();
    pods.delete("hog", &DeleteParams::default()).await.unwrap();
    let ran = running(&pods, &name).await;
    let node = ran.spec.unwrap().node_name.unwrap();
    assert!(node.starts_with("kwok-"), "{node}");
    eprintln!(
        "[admission-groups] {name} ran on {node} {:.1}s after the queue's other pod was deleted",
        freed.elapsed().as_secs_f64()
    );
}

/// (b) A bare Volcano pod: accepted, in rayshare's group (owned by the pod once taken up),
/// and scheduled.
#[tokio::test]
async fn a_bare_pod_is_accepted_in_rayshares_group() {
    let _volcano = &*VOLCANO;
    let env = TestEnv::new("ag-bare", DEFAULT_CONFIG, 1).await;
    let pods: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);
    let pod = pods
        .create(&PostParams::default(), &bare_pod("bare", "default", "100m"))
        .await
        .expect("Volcano accepts the bare pod: its group exists");
    assert_eq!(group_name(&pod).as_deref(), Some("bare"));
    running(&pods, "bare").await;
    one_group_each(&env, std::slice::from_ref(&pod)).await;
    let group = env
        .api(&pod_group_resource(), &env.ns)
        .get("bare")
        .await
        .unwrap();
    let owner = &group.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Pod", pod.uid().unwrap().as_str())
    );
}

/// (c) A pod created with `generateName`: its group is named at admission (prefix plus a
/// hash of the request), before the API server names the pod; accepted, one group, and
/// scheduled.
#[tokio::test]
async fn a_generate_name_pod_is_accepted_in_rayshares_group() {
    let _volcano = &*VOLCANO;
    let env = TestEnv::new("ag-generate", DEFAULT_CONFIG, 1).await;
    let pods: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);
    let pod = pods
        .create(
            &PostParams::default(),
            &bare_pod("task-", "default", "100m"),
        )
        .await
        .expect("Volcano accepts the generateName pod: its group exists");
    let name = pod.name_any();
    let group = group_name(&pod).expect("rayshare named the pod's group");
    assert!(
        name.starts_with("task-") && group.starts_with("task-"),
        "{name} {group}"
    );
    eprintln!("[admission-groups] generateName pod {name} is in group {group}");
    running(&pods, &name).await;
    one_group_each(&env, std::slice::from_ref(&pod)).await;
    let stored = env
        .api(&pod_group_resource(), &env.ns)
        .get(&group)
        .await
        .unwrap();
    let owner = &stored.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Pod", name.as_str())
    );
}
