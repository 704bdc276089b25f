//! What of a RayJob's own metadata goes onto its shared cluster, and so into its identity:
//! the labels the config names, and the annotations KubeRay's RayCluster controller reads
//! off a cluster (KubeRay copies every RayJob annotation onto the cluster it would have
//! built: without them the shared cluster would behave differently, or fail validation).

use serde_json::{Map, Value, json};

use crate::config::{Kueue, SharedClusters};
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
        let mut copied = Self {
            labels: pick(
                Meta::Labels,
                &mut cfg.copied_job_labels.iter().map(String::as_str),
            ),
            annotations: pick(Meta::Annotations, &mut CLUSTER_ANNOTATIONS.into_iter()),
        };
        // The queue (and priority class) Kueue admits the shared cluster by.
        if let Some(queue) = kueue_queue(job, cfg) {
            copied
                .labels
                .insert(labels::KUEUE_QUEUE.into(), json!(queue));
            if let Some(priority) = labels::get(job, Meta::Labels, labels::KUEUE_PRIORITY) {
                copied
                    .labels
                    .insert(labels::KUEUE_PRIORITY.into(), json!(priority));
            }
        }
        copied
    }

    /// Whether Kueue admits the cluster (it carries a queue): it is made suspended.
    pub fn queued(&self) -> bool {
        self.labels.contains_key(labels::KUEUE_QUEUE)
    }
}

/// The Kueue queue a job's shared cluster is admitted in, under `admitSharedCluster`: the
/// job's own label as written, or, on a rewritten job, the queue rayshare moved off it.
pub fn kueue_queue<'a>(job: &'a Value, cfg: &SharedClusters) -> Option<&'a str> {
    if cfg.kueue != Kueue::AdmitSharedCluster {
        return None;
    }
    labels::get(job, Meta::Labels, labels::KUEUE_QUEUE)
        .or_else(|| labels::get(job, Meta::Annotations, labels::KUEUE_QUEUE_OF_CLUSTER))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitting() -> SharedClusters {
        SharedClusters {
            kueue: Kueue::AdmitSharedCluster,
            ..SharedClusters::default()
        }
    }

    #[test]
    fn a_kueue_job_brings_its_queue_and_priority_to_the_cluster_only_when_admitting() {
        let job = json!({"metadata": {"labels": {
            labels::KUEUE_QUEUE: "team-q", labels::KUEUE_PRIORITY: "high"}}});
        let copied = Copied::of(&job, &admitting());
        assert!(copied.queued());
        assert_eq!(
            Value::Object(copied.labels),
            json!({labels::KUEUE_QUEUE: "team-q", labels::KUEUE_PRIORITY: "high"})
        );
        assert!(!Copied::of(&job, &SharedClusters::default()).queued());
    }

    #[test]
    fn a_rewritten_job_keeps_its_queue_in_rayshares_annotation() {
        let stored = json!({"metadata": {
            "labels": {labels::KUEUE_PRIORITY: "high"},
            "annotations": {labels::KUEUE_QUEUE_OF_CLUSTER: "team-q"}}});
        let written = json!({"metadata": {"labels": {
            labels::KUEUE_QUEUE: "team-q", labels::KUEUE_PRIORITY: "high"}}});
        assert_eq!(
            Copied::of(&stored, &admitting()),
            Copied::of(&written, &admitting())
        );
    }

    #[test]
    fn a_priority_class_without_a_queue_is_not_copied() {
        let job = json!({"metadata": {"labels": {labels::KUEUE_PRIORITY: "high"}}});
        assert_eq!(Copied::of(&job, &admitting()), Copied::default());
    }

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
