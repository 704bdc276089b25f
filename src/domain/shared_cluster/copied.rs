//! What of a RayJob's own metadata goes onto its shared cluster, and so into its identity:
//! the labels the config names, and the annotations KubeRay's RayCluster controller reads
//! off a cluster (KubeRay copies every RayJob annotation onto the cluster it would have
//! built: without them the shared cluster would behave differently, or fail validation).

use serde_json::{Map, Value, json};

use crate::config::SharedClusters;
use crate::domain::labels;
use crate::domain::labels::Meta;

/// Cluster annotations KubeRay v1.6.1 acts on (`controllers/ray/common/pod.go`,
/// `raycluster_controller.go`, `common/ingress.go`, `utils/validation.go`): GCS fault
/// tolerance (with a head `RAY_REDIS_ADDRESS`, a cluster without it fails validation),
/// its Redis cleanup namespace, container command overwrite, the serve service, the
/// ingress class.
pub const CLUSTER_ANNOTATIONS: [&str; 5] = [
    "ray.io/ft-enabled",
    "ray.io/external-storage-namespace",
    "ray.io/overwrite-container-cmd",
    "ray.io/enable-serve-service",
    "kubernetes.io/ingress.class",
];

/// A job's labels and annotations that its shared cluster carries.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Copied {
    pub labels: Map<String, Value>,
    pub annotations: Map<String, Value>,
}

impl Copied {
    pub fn of(job: &Value, cfg: &SharedClusters) -> Self {
        let pick = |meta, keys: &mut dyn Iterator<Item = &str>| -> Map<String, Value> {
            keys.filter_map(|k| Some((k.to_string(), json!(labels::get(job, meta, k)?))))
                .collect()
        };
        Self {
            labels: pick(
                Meta::Labels,
                &mut cfg.copied_job_labels.iter().map(String::as_str),
            ),
            annotations: pick(Meta::Annotations, &mut CLUSTER_ANNOTATIONS.into_iter()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_labels_and_kubernetes_annotations_are_copied() {
        let job = json!({"metadata": {
            "labels": {"team": "a", "run": "r1"},
            "annotations": {"ray.io/ft-enabled": "true", "ray.io/overwrite-container-cmd": "true",
                "other.io/note": "x"}}});
        let cfg = SharedClusters {
            copied_job_labels: vec!["team".into()],
            ..SharedClusters::default()
        };
        let copied = Copied::of(&job, &cfg);
        assert_eq!(Value::Object(copied.labels), json!({"team": "a"}));
        assert_eq!(
            Value::Object(copied.annotations),
            json!({"ray.io/ft-enabled": "true", "ray.io/overwrite-container-cmd": "true"})
        );
    }
}
