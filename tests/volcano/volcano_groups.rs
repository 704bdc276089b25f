//! Golden against Volcano's own code: for the same stored pod, the PodGroup rayshare makes
//! (`rayshare::domain::pod_group::group`, pure) carries what the group Volcano's running
//! pg-controller makes for it (`createNormalPodPGIfNotExist`, v1.10.0) carries: the same
//! copied hints, queue, priority, `minMember`, and the same scheduler-visible request.
//! rayshare adds only its own bookkeeping keys; Volcano adds only quota bookkeeping
//! (`pods`, `count/pods`, `requests.*`, `limits.*`) to `minResources`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, PostParams};
use rayshare::config::PodGroups;
use rayshare::domain::labels;
use rayshare::domain::quantity::{self, Milli};
use serde_json::{Map, Value, json};

use crate::cluster::*;
use crate::harness::*;

/// Keys rayshare adds for its own bookkeeping (which pod, which review, who manages it).
const RAYSHARE_LABELS: [&str; 2] = [labels::MANAGED_BY, labels::FOR_POD];
const RAYSHARE_ANNOTATIONS: [&str; 1] = [labels::ADMISSION_UID];

/// Pods that exercise each hint Volcano copies, each disruption budget (Volcano's webhook
/// refuses a pod with both), init containers
/// (regular and sidecar), limits standing in for requests, an extended resource, and a
/// pod with nothing to copy.
fn cases(priority: &str) -> Vec<Value> {
    let container = |name: &str, resources: Value| json!({"name": name, "image": "busybox", "resources": resources});
    vec![
        json!({
            "metadata": {"name": "hinted",
                "annotations": {
                    "scheduling.volcano.sh/queue-name": "golden",
                    "volcano.sh/preemptable": "true", "volcano.sh/cooldown-time": "600s",
                    "volcano.sh/revocable-zone": "*", "volcano.sh/jdb-min-available": "1",
                    "volcano.sh/other": "x"},
                "labels": {"volcano.sh/preemptable": "false", "volcano.sh/cooldown-time": "60s",
                    "volcano.sh/revocable-zone": "z", "app": "a"}},
            "spec": {"schedulerName": "volcano", "priorityClassName": priority,
                "initContainers": [container("setup",
                    json!({"requests": {"cpu": "2", "memory": "256Mi"}}))],
                "containers": [
                    container("a", json!({"requests": {"cpu": "500m", "memory": "1Gi"}})),
                    container("b", json!({"requests": {"cpu": "250m"},
                        "limits": {"nvidia.com/gpu": "1"}})),
                ]},
        }),
        json!({
            "metadata": {"name": "budget",
                "annotations": {"volcano.sh/jdb-max-unavailable": "25%"},
                "labels": {"volcano.sh/cooldown-time": "30s"}},
            "spec": {"schedulerName": "volcano",
                "containers": [container("only-limits",
                    json!({"limits": {"cpu": "1500m", "memory": "3Gi"}}))]},
        }),
        json!({
            "metadata": {"name": "sidecar"},
            "spec": {"schedulerName": "volcano",
                "initContainers": [
                    {"name": "proxy", "image": "busybox", "restartPolicy": "Always",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
                    container("migrate", json!({"requests": {"cpu": "1", "memory": "128Mi"}})),
                ],
                "containers": [container("main",
                    json!({"requests": {"cpu": "300m", "memory": "512Mi"}}))]},
        }),
        json!({
            "metadata": {"name": "plain"},
            "spec": {"schedulerName": "volcano", "containers": [container("c", json!({}))]},
        }),
    ]
}

fn map_without(object: &Value, drop: &[&str]) -> Map<String, Value> {
    let mut map = object.as_object().cloned().unwrap_or_default();
    map.retain(|k, _| !drop.contains(&k.as_str()));
    map
}

fn resources(map: &Value) -> BTreeMap<String, Milli> {
    map.as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let text = v
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| v.to_string());
            let q = quantity::parse(&text).unwrap_or_else(|| panic!("{k}: {v}"));
            (k.clone(), q)
        })
        // A zero request is no request.
        .filter(|(_, q)| *q != Milli(0))
        .collect()
}

/// Volcano's `minResources` with its quota bookkeeping left out: what the scheduler sees.
fn scheduler_visible(volcano: &BTreeMap<String, Milli>) -> BTreeMap<String, Milli> {
    volcano
        .iter()
        .filter(|(k, _)| {
            !(k.starts_with("requests.")
                || k.starts_with("limits.")
                || k.starts_with("count/")
                || *k == "pods")
        })
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

#[tokio::test]
async fn rayshare_groups_carry_what_volcanos_own_groups_carry() {
    let _volcano = &*VOLCANO;
    let admin = client(&CONTROL_PLANE.admin_kubeconfig).await;
    // No rayshare registration selects it: Volcano's pg-controller groups these pods.
    let ns = "volcano-golden";
    create_namespace(&admin, ns, &[]).await;
    open_queue(&admin, "golden", None).await;
    let priority = "golden-priority";
    let pc: k8s_openapi::api::scheduling::v1::PriorityClass =
        serde_json::from_value(json!({"metadata": {"name": priority}, "value": 1000})).unwrap();
    Api::all(admin.clone())
        .create(&PostParams::default(), &pc)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), ns);
    let groups: Api<DynamicObject> = Api::namespaced_with(admin.clone(), ns, &pod_group_resource());
    let cfg = PodGroups::default();

    for pod in cases(priority) {
        let name = pod["metadata"]["name"].as_str().unwrap().to_string();
        let stored = pods
            .create(
                &PostParams::default(),
                &serde_json::from_value(pod).unwrap(),
            )
            .await
            .unwrap();
        let uid = stored.metadata.uid.clone().unwrap();
        let volcano = wait_for(&format!("Volcano's group for pod {name}"), || async {
            groups.get_opt(&format!("podgroup-{uid}")).await.ok()?
        })
        .await;
        let volcano = serde_json::to_value(volcano).unwrap();
        let stored = serde_json::to_value(stored).unwrap();
        let ours = rayshare::domain::pod_group::group(&stored, ns, "review-uid", &name, None, &cfg)
            .unwrap_or_else(|e| panic!("{name}: {e}"));

        let (ours_meta, theirs_meta) = (&ours["metadata"], &volcano["metadata"]);
        assert_eq!(
            map_without(&ours_meta["labels"], &RAYSHARE_LABELS),
            map_without(&theirs_meta["labels"], &[]),
            "{name}: labels"
        );
        assert_eq!(
            map_without(&ours_meta["annotations"], &RAYSHARE_ANNOTATIONS),
            map_without(&theirs_meta["annotations"], &[]),
            "{name}: annotations"
        );
        for field in ["minMember", "queue", "priorityClassName"] {
            assert_eq!(
                ours["spec"][field], volcano["spec"][field],
                "{name}: spec.{field}"
            );
        }
        assert_eq!(
            resources(&ours["spec"]["minResources"]),
            scheduler_visible(&resources(&volcano["spec"]["minResources"])),
            "{name}: minResources (Volcano's: {})",
            volcano["spec"]["minResources"]
        );
    }
}
