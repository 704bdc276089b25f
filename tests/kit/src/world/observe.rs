//! Reading the world: node and pod status, events, listed objects, Ray pods by cluster.

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

pub fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

pub fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Events about objects of `kind` in `namespace`.
pub async fn events(client: &Client, namespace: &str, kind: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().fields(&format!("involvedObject.kind={kind}")))
        .await
        .unwrap()
        .items
}

/// "reason (name): message" of each event, for assertion messages.
pub fn describe(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            format!(
                "{} {} ({}): {}",
                e.type_.as_deref().unwrap_or(""),
                e.reason.as_deref().unwrap_or(""),
                e.involved_object.name.as_deref().unwrap_or(""),
                e.message.as_deref().unwrap_or("")
            )
        })
        .collect()
}

/// The objects of `ar` in `namespace`, as JSON.
pub async fn list_json(
    client: &Client,
    ar: &kube::core::ApiResource,
    namespace: &str,
    labels: &str,
) -> Vec<Value> {
    Api::<kube::api::DynamicObject>::namespaced_with(client.clone(), namespace, ar)
        .list(&ListParams::default().labels(labels))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|o| serde_json::to_value(o).unwrap())
        .collect()
}

/// Ray pods (head and workers) in `namespace`, by RayCluster name.
pub async fn ray_pods(
    client: &Client,
    namespace: &str,
) -> std::collections::BTreeMap<String, Vec<Pod>> {
    let mut out = std::collections::BTreeMap::<String, Vec<Pod>>::new();
    let pods = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels("ray.io/is-ray-node=yes"))
        .await
        .unwrap();
    for pod in pods {
        if let Some(cluster) = pod.labels().get("ray.io/cluster").cloned() {
            out.entry(cluster).or_default().push(pod);
        }
    }
    out
}
