//! Label and annotation keys, and helpers to read and write object metadata maps.

use serde_json::{Value, json};

pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const MANAGER: &str = "rayshare";

// rayshare's own keys.
pub const SHARED_CLUSTER: &str = "rayshare.io/shared-cluster";
pub const CONFIG_DIGEST: &str = "rayshare.io/config-digest";
pub const JOB_CLUSTER: &str = "rayshare.io/cluster";
/// Which rayshare installation (config `instance`) admitted an object and makes what it
/// needs: each installation acts only on its own.
pub const INSTANCE: &str = "rayshare.io/instance";
pub const FOR_POD: &str = "rayshare.io/pod";
pub const ADMISSION_UID: &str = "rayshare.io/admission-uid";
/// On a PodGroup reused for a pod of the same name: when that pod was admitted.
pub const ADMITTED_AT: &str = "rayshare.io/admitted-at";
/// Annotation on each rewritten RayJob: its stripped cluster spec, as JSON (what the
/// provisioner makes the shared cluster from).
pub const CLUSTER_SPEC: &str = "rayshare.io/cluster-spec";
/// On a pod whose group rayshare is to make, naming the installation (config `instance`)
/// whose provisioner makes it.
pub const POD_GROUPED: &str = "rayshare.io/pod-group";
/// On a PodGroup: the uid of the pod it was made for (set when a stored pod takes it up).
pub const POD_UID: &str = "rayshare.io/pod-uid";
/// On index-claim Leases.
pub const INDEX_CLAIM: &str = "rayshare.io/index-claim";
/// On an index claim for a whole replica (a block): its host count. The webhook replica
/// that made it hands out those hosts from memory; per-host claims have no such label.
pub const CLAIM_HOSTS: &str = "rayshare.io/claim-hosts";
/// Annotation on a block claim, once its maker stops handing out its hosts: how many it
/// handed out (hosts `0..n`; the rest are free for per-host claims). `0` on a block taken
/// over because its pods never came.
pub const HOSTS_ASSIGNED: &str = "rayshare.io/hosts-assigned";
/// Annotation the provisioner sets on a RayJob that waited for its shared cluster, when
/// the cluster is made (RFC 3339): the update makes KubeRay look at the job at once
/// instead of after its retry delay. The only write rayshare makes to a RayJob.
pub const CLUSTER_MADE: &str = "rayshare.io/cluster-made";
/// On a shared cluster: the longest idle TTL its jobs asked for.
pub const IDLE_TTL: &str = "rayshare.io/idle-ttl-seconds";
/// Annotation on a shared cluster: the creation time of its newest job (RFC 3339), the
/// reclaimer's idle clock.
pub const LAST_ADMITTED: &str = "rayshare.io/last-admitted";
/// Annotation on a shared cluster: when its last active job ended or was deleted, as the
/// RayJob watch saw it (RFC 3339). A deleted job leaves no end time behind: without
/// this, a cluster whose long job was cancelled would count as idle since that job began.
pub const LAST_ACTIVE: &str = "rayshare.io/last-active";
/// Annotation set by the reclaimer on an idle cluster it will delete after the quiet period.
pub const RECLAIM_MARKED: &str = "rayshare.io/reclaim-marked-at";
/// Annotation (why, in words) and label (why, in a word: `rate`, `time-of-day`, `pause`) the
/// warm-ahead controller sets on a pool member it keeps warm past the idle
/// TTL, saying why; the reclaimer keeps such a member while `warmAhead.enabled`.
pub const KEPT_WARM: &str = "rayshare.io/kept-warm";

// The pool's labels on each shared cluster, for `kubectl get -L` (src/domain/reclaim/pool.rs):
// label-safe copies of what the annotations above and the reclaimer know.
/// The config digest, shortened to a label value (the same key as [`CONFIG_DIGEST`], the
/// annotation with the whole digest).
pub const POOL_DIGEST: &str = CONFIG_DIGEST;
pub const POOL_ACTIVE_JOBS: &str = "rayshare.io/active-jobs";
/// [`LAST_ADMITTED`] as a label value (`:` replaced).
pub const POOL_LAST_ADMISSION: &str = "rayshare.io/last-admission";
pub const POOL_RECLAIMABLE_AT: &str = "rayshare.io/reclaimable-at";

/// The cluster a RayJob selects (`spec.clusterSelector["ray.io/cluster"]`), if it selects one.
pub fn selected_cluster(job: &Value) -> Option<&str> {
    job["spec"]["clusterSelector"][RAY_CLUSTER].as_str()
}

// KubeRay.
pub const RAY_CLUSTER: &str = "ray.io/cluster";
pub const RAY_NODE_TYPE: &str = "ray.io/node-type";
pub const RAY_GROUP: &str = "ray.io/group";
pub const REPLICA_INDEX: &str = "ray.io/worker-group-replica-index";
pub const REPLICA_NAME: &str = "ray.io/worker-group-replica-name";
pub const HOST_INDEX: &str = "ray.io/replica-host-index";

// Volcano and Kueue.
pub const GROUP_NAME: &str = "scheduling.k8s.io/group-name";
pub const QUEUE_NAME: &str = "scheduling.volcano.sh/queue-name";
pub const KUEUE_QUEUE: &str = "kueue.x-k8s.io/queue-name";
/// Kueue's WorkloadPriorityClass of a job (a label, like the queue).
pub const KUEUE_PRIORITY: &str = "kueue.x-k8s.io/priority-class";
/// On a rewritten RayJob: the Kueue queue its shared cluster is admitted in. Kueue's
/// label itself comes off the job (KubeRay fails a job on an existing cluster that Kueue
/// suspends); this keeps the queue, so the provisioner makes the same cluster.
pub const KUEUE_QUEUE_OF_CLUSTER: &str = "rayshare.io/kueue-queue-name";

/// Which string map of an object's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meta {
    Labels,
    Annotations,
}

impl Meta {
    pub fn field(self) -> &'static str {
        match self {
            Self::Labels => "labels",
            Self::Annotations => "annotations",
        }
    }
}

/// `metadata.<labels|annotations>[key]` as a string.
pub fn get<'a>(object: &'a Value, map: Meta, key: &str) -> Option<&'a str> {
    object.get("metadata")?.get(map.field())?.get(key)?.as_str()
}

/// Sets `metadata.<labels|annotations>[key]`, creating the maps as needed.
pub fn set(object: &mut Value, map: Meta, key: &str, value: &str) {
    let metadata = &mut object["metadata"];
    if !metadata.is_object() {
        *metadata = json!({});
    }
    let map = &mut metadata[map.field()];
    if !map.is_object() {
        *map = json!({});
    }
    map[key] = json!(value);
}

/// Whether `s` may be a label value.
pub fn is_label_value(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_creates_missing_maps() {
        let mut v = json!({});
        set(&mut v, Meta::Labels, "a/b", "c");
        assert_eq!(get(&v, Meta::Labels, "a/b"), Some("c"));
        let mut v = json!({"metadata": {"labels": null}});
        set(&mut v, Meta::Labels, "x", "y");
        assert_eq!(get(&v, Meta::Labels, "x"), Some("y"));
    }
}

/// The label selectors rayshare lists and watches with, by what they select.
pub mod select {
    use super::*;

    /// This installation's shared clusters (another installation reclaims its own).
    pub fn shared_clusters(instance: &str) -> String {
        format!("{MANAGED_BY}={MANAGER},{SHARED_CLUSTER}=true,{INSTANCE}={instance}")
    }

    /// Everything this installation made (its PodGroups).
    pub fn made_by(instance: &str) -> String {
        format!("{MANAGED_BY}={MANAGER},{INSTANCE}={instance}")
    }

    /// The RayJobs this installation rewrote onto a shared cluster.
    pub fn rewritten_jobs(instance: &str) -> String {
        format!("{JOB_CLUSTER},{INSTANCE}={instance}")
    }

    /// The RayJobs of every installation that run on a shared cluster.
    pub const SHARED_CLUSTER_JOBS: &str = JOB_CLUSTER;

    /// The pods whose PodGroup this installation makes.
    pub fn grouped_pods(instance: &str) -> String {
        format!("{POD_GROUPED}={instance}")
    }

    /// Per-host index claims (not blocks).
    pub fn per_host_claims() -> String {
        format!("{INDEX_CLAIM}=true,!{CLAIM_HOSTS}")
    }

    /// The objects admitted under one admission token (a RayJob's run identity).
    pub fn admitted_as(token: &str) -> String {
        format!("{ADMISSION_UID}={token}")
    }

    /// Ray worker pods that carry a replica index.
    pub fn indexed_workers() -> String {
        format!("{RAY_NODE_TYPE}=worker,{REPLICA_INDEX}")
    }
}
