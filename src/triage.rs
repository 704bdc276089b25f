//! A cheap first look at an admitted object: could any feature change it at all?
//!
//! Most objects that reach the webhook need nothing (`matchConditions` filter some
//! earlier, not all). Triage reads only their labels, annotations and a few spec fields
//! from the raw JSON, skipping the rest without building it, so that an object left
//! unchanged costs a scan of its bytes rather than a tree of them.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::config::Config;
use crate::world::World;
use crate::{indices, labels};

/// What triage reads of an object.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Head {
    metadata: HeadMeta,
    /// `None` when missing: such an object gets the full (warning) treatment.
    spec: Option<HeadSpec>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct HeadMeta {
    namespace: Option<String>,
    labels: Value,
    annotations: Value,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct HeadSpec {
    scheduler_name: Option<String>,
    ray_cluster_spec: Option<IgnoredAny>,
    cluster_selector: Option<IgnoredAny>,
}

impl Head {
    /// `None` when the object's shape is odd (the full path then says what is wrong).
    pub fn parse(raw: &RawValue) -> Option<Self> {
        serde_json::from_str(raw.get()).ok()
    }

    /// The object's namespace, as the request names it or else as the object does.
    pub fn namespace<'a>(&'a self, requested: &'a str) -> &'a str {
        Some(requested)
            .filter(|n| !n.is_empty())
            .or(self.metadata.namespace.as_deref())
            .unwrap_or("default")
    }

    /// Labels and annotations as an object of their own, for the planners that read
    /// only those.
    fn metadata_only(&self) -> Value {
        json!({ "metadata": {
            "labels": self.metadata.labels, "annotations": self.metadata.annotations,
        }})
    }
}

/// `false` only when no feature could change the object; when unsure, `true`.
pub fn needs_work<W: World>(
    kind: &str,
    head: &Head,
    namespace: &str,
    cfg: &Config,
    world: &W,
) -> bool {
    let Some(spec) = &head.spec else {
        return true;
    };
    let meta = &head.metadata;
    match kind {
        "RayJob" => spec.ray_cluster_spec.is_some() && spec.cluster_selector.is_none(),
        _ => {
            let scheduler = spec.scheduler_name.as_deref().unwrap_or("");
            let grouped = cfg.pod_groups.enabled
                && cfg
                    .pod_groups
                    .scheduler_names
                    .iter()
                    .any(|s| s == scheduler)
                && meta.annotations.get(labels::GROUP_NAME).is_none();
            grouped || cfg.indices.enabled && wants_indices(head, namespace, cfg, world)
        }
    }
}

/// What `indices::plan` makes of the pod, on what the cache knows (only a worker pod
/// costs a lookup).
fn wants_indices<W: World>(head: &Head, namespace: &str, cfg: &Config, world: &W) -> bool {
    let label = |k| head.metadata.labels.get(k).and_then(Value::as_str);
    if label(labels::RAY_NODE_TYPE) != Some("worker") {
        return false;
    }
    let info = label(labels::RAY_CLUSTER).and_then(|c| world.ray_cluster(namespace, c));
    let view = head.metadata_only();
    indices::plan(&view, info.as_ref(), &cfg.indices, &cfg.opt_out_annotation)
        != indices::Plan::Skip(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::MemoryWorld;
    use rstest::rstest;

    fn head(object: Value) -> Option<Head> {
        Head::parse(&serde_json::value::to_raw_value(&object).unwrap())
    }

    fn worker(group: &str, extra_labels: Value) -> Value {
        let mut labels = json!({
            "ray.io/node-type": "worker", "ray.io/cluster": "c1", "ray.io/group": group,
        });
        labels
            .as_object_mut()
            .unwrap()
            .extend(extra_labels.as_object().unwrap().clone());
        json!({"metadata": {"labels": labels}, "spec": {"containers": [{"name": "w"}]}})
    }

    fn world() -> MemoryWorld {
        let world = MemoryWorld::default();
        let cluster = json!({"kind": "RayCluster", "metadata": {"namespace": "ns", "name": "c1"},
            "spec": {"workerGroupSpecs": [
                {"groupName": "single"}, {"groupName": "multi", "numOfHosts": 4}]}});
        world
            .objects
            .lock()
            .unwrap()
            .insert(("RayCluster".into(), "ns".into(), "c1".into()), cluster);
        world
    }

    #[rstest]
    #[case::plain_pod("Pod", json!({"metadata": {"name": "p"}, "spec": {"containers": []}}), false)]
    #[case::volcano_pod("Pod", json!({"spec": {"schedulerName": "volcano"}}), true)]
    #[case::volcano_pod_grouped("Pod", json!({"metadata": {"annotations": {"scheduling.k8s.io/group-name": "g"}}, "spec": {"schedulerName": "volcano"}}), false)]
    #[case::single_host_worker("Pod", worker("single", json!({})), false)]
    #[case::multi_host_worker("Pod", worker("multi", json!({})), true)]
    #[case::multi_host_worker_indexed("Pod", worker("multi", json!({"ray.io/worker-group-replica-index": "0"})), false)]
    // Unknown group or cluster: the full path explains it in a warning.
    #[case::unknown_group("Pod", worker("gpu", json!({})), true)]
    #[case::no_spec("Pod", json!({"metadata": {}}), true)]
    #[case::rayjob_embedded("RayJob", json!({"spec": {"rayClusterSpec": {}}}), true)]
    #[case::rayjob_selector("RayJob", json!({"spec": {"clusterSelector": {"ray.io/cluster": "x"}}}), false)]
    #[case::rayjob_both("RayJob", json!({"spec": {"rayClusterSpec": {}, "clusterSelector": {}}}), false)]
    #[case::rayjob_null_spec("RayJob", json!({"spec": {"rayClusterSpec": null}}), false)]
    fn triage(#[case] kind: &str, #[case] object: Value, #[case] expected: bool) {
        let cfg = Config::default();
        let head = head(object).expect("parses");
        assert_eq!(needs_work(kind, &head, "ns", &cfg, &world()), expected);
    }

    #[rstest]
    #[case::metadata_string(json!({"metadata": "odd", "spec": {}}))]
    #[case::spec_string(json!({"spec": "odd"}))]
    #[case::scheduler_number(json!({"spec": {"schedulerName": 7}}))]
    fn odd_shapes_go_the_full_way(#[case] object: Value) {
        assert!(head(object).is_none());
    }

    #[test]
    fn namespace_from_request_then_object() {
        let h = head(json!({"metadata": {"namespace": "obj"}, "spec": {}})).unwrap();
        assert_eq!(h.namespace("req"), "req");
        assert_eq!(h.namespace(""), "obj");
        assert_eq!(Head::default().namespace(""), "default");
    }
}
