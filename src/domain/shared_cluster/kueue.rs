//! Shared clusters inside Kueue's quota (`sharedClusters.kueue: admitSharedCluster`).
//!
//! Kueue ignores a RayJob on an existing cluster, so a rewritten job alone would run
//! outside every quota. Instead the shared cluster is what Kueue admits: it carries the
//! job's queue and priority class (both part of its identity, so jobs of different queues
//! never share), it is made suspended, Kueue charges its head and workers while it lives
//! and starts it when the quota allows; the jobs on it wait for it and are not charged
//! again. Reclaiming it frees the quota. What Kueue refuses on a RayCluster it admits
//! leaves the job to Kueue as written.

use serde_json::{Value, json};

use super::copied::Copied;
use super::{Plan, Rewrite, identity, provision};
use crate::config::{Kueue, SharedClusters};
use crate::domain::labels;
use crate::domain::labels::Meta;

/// Most worker groups Kueue admits in one RayCluster (8 pod sets with the head).
pub const MAX_WORKER_GROUPS: usize = 7;

/// Why a job Kueue manages is left as written, if it is: sharing is off for Kueue, or
/// Kueue would refuse its cluster (autoscaling, too many worker groups, one named head).
pub fn blocker(job: &Value, cfg: &SharedClusters) -> Option<String> {
    labels::get(job, Meta::Labels, labels::KUEUE_QUEUE)?;
    if cfg.kueue == Kueue::Skip {
        return Some("it is managed by Kueue, which ignores jobs on existing clusters (sharedClusters.kueue: admitSharedCluster shares inside the quota)".into());
    }
    let cluster = &job["spec"]["rayClusterSpec"];
    if cfg.autoscaling.enabled || cluster["enableInTreeAutoscaling"] == true {
        return Some("Kueue admits no autoscaling RayCluster".into());
    }
    let groups = cluster["workerGroupSpecs"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if groups.len() > MAX_WORKER_GROUPS {
        return Some(format!(
            "Kueue admits at most {MAX_WORKER_GROUPS} worker groups per RayCluster"
        ));
    }
    if groups.iter().any(|g| g["groupName"] == "head") {
        return Some("Kueue admits no worker group named head".into());
    }
    None
}

/// The rewritten job of a Kueue-admitted cluster: Kueue's label moves to rayshare's
/// annotation (Kueue's webhook suspends a labelled job, and KubeRay fails a suspended job
/// on an existing cluster), and the job is not suspended: its cluster waits instead.
pub fn into_kueue_cluster(job: &mut Value, queue: &str) {
    let queue = queue.to_string();
    if let Some(l) = job["metadata"]["labels"].as_object_mut() {
        l.remove(labels::KUEUE_QUEUE);
    }
    labels::set(
        job,
        Meta::Annotations,
        labels::KUEUE_QUEUE_OF_CLUSTER,
        &queue,
    );
    job["spec"]["suspend"] = json!(false);
}

/// A job rayshare already rewrote that Kueue's webhook, called after rayshare's (its
/// configuration's name sorts first), then put in a queue: its namespace's `default`
/// LocalQueue. Suspended on an existing cluster, KubeRay would fail it. rayshare is called
/// again (`reinvocationPolicy: IfNeeded`): under `admitSharedCluster` the job moves to that
/// queue's shared cluster; under `skip` the rewrite cannot be undone, and the warning says
/// how to order the webhooks. `None`: not such a job.
pub fn queued_after_rewrite(job: &Value, namespace: &str, cfg: &SharedClusters) -> Option<Plan> {
    let queue = labels::get(job, Meta::Labels, labels::KUEUE_QUEUE)?;
    let selected = labels::selected_cluster(job)?;
    if labels::get(job, Meta::Labels, labels::JOB_CLUSTER) != Some(selected) {
        return None;
    }
    if cfg.kueue == Kueue::Skip {
        return Some(Plan::Skip(Some(format!(
            "rayshare: Kueue's webhook put this job in queue {queue} after rayshare sent it to shared RayCluster {selected}; KubeRay will fail it: order Kueue's mutating webhook before rayshare's (see rayshare's docs/shared-clusters.md, Kueue)"
        ))));
    }
    let text = labels::get(job, Meta::Annotations, labels::CLUSTER_SPEC)?;
    let spec: Value = serde_json::from_str(text).ok().filter(Value::is_object)?;
    let copied = Copied::of(job, cfg);
    let digest = identity::digest(&spec, &copied);
    let name = identity::cluster_name(&digest);
    let cluster = provision::cluster_object(&name, namespace, spec, &copied, &digest);
    let mut moved = job.clone();
    moved["spec"]["clusterSelector"] = json!({ labels::RAY_CLUSTER: name });
    labels::set(&mut moved, Meta::Labels, labels::JOB_CLUSTER, &name);
    into_kueue_cluster(&mut moved, queue);
    let warnings = vec![
        format!("rayshare: runs on shared RayCluster {name}"),
        format!(
            "rayshare: Kueue put this job in queue {queue} after rayshare's first look; it runs on that queue's shared cluster, which Kueue admits"
        ),
    ];
    Some(Plan::Rewrite(Box::new(Rewrite {
        job: moved,
        cluster,
        name,
        digest,
        warnings,
    })))
}

#[cfg(test)]
mod tests;
