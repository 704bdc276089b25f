//! Feature settings, read from the YAML config file (`--config`).
//!
//! Process settings (ports, certificate paths, log format) are CLI flags; see `cli.rs`.
//! Every field has a default, so an empty file (or none) is a valid config.

use serde::{Deserialize, Serialize};

/// Annotation that opts a single object out of every rayshare mutation.
pub const DEFAULT_OPT_OUT_ANNOTATION: &str = "rayshare.io/skip";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    /// This installation's name: rayshare labels what it admits and makes with it and acts
    /// only on objects carrying it (several installations can share a cluster).
    pub instance: String,
    /// An object annotated with this key and the value "true" is left unchanged.
    pub opt_out_annotation: String,
    /// Budget for all API calls of one admission request; keep it below the webhook's
    /// `timeoutSeconds` so rayshare's answer (and its warnings) arrive in time.
    pub admission_timeout_ms: u64,
    /// The namespaces the webhook registration selects. A review is no proof of where it
    /// came from, so rayshare makes a PodGroup or an index claim at admission only in a
    /// namespace its own watch shows matching this (the chart renders both from
    /// `webhook.enableLabel` and `webhook.excludedNamespaces`).
    pub served_namespaces: ServedNamespaces,
    pub shared_clusters: SharedClusters,
    pub pod_groups: PodGroups,
    pub indices: Indices,
    pub reclaim: Reclaim,
    pub warm_ahead: WarmAhead,
}

/// A namespace is served when it carries `label_key=label_value` and is not excluded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ServedNamespaces {
    pub label_key: String,
    pub label_value: String,
    pub excluded: Vec<String>,
}

impl Default for ServedNamespaces {
    fn default() -> Self {
        Self {
            label_key: "rayshare.io/enabled".into(),
            label_value: "true".into(),
            excluded: strings(&["kube-system"]),
        }
    }
}

impl ServedNamespaces {
    /// Whether the namespace `name` with these labels is one the webhook is called for.
    pub fn serves<'a>(
        &self,
        name: &str,
        mut labels: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> bool {
        !self.excluded.iter().any(|e| e == name)
            && labels.any(|(k, v)| k == self.label_key && v == self.label_value)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SharedClusters {
    pub enabled: bool,
    /// Env vars whose values differ per run; moved from the cluster to the job's runtime env.
    pub run_scoped_env_names: Vec<String>,
    pub run_scoped_env_prefixes: Vec<String>,
    /// Pod-template labels and annotations that differ per run; dropped from the cluster.
    pub run_scoped_labels: Vec<String>,
    pub run_scoped_annotations: Vec<String>,
    /// Job labels copied onto the shared cluster (and so part of its identity).
    pub copied_job_labels: Vec<String>,
    /// Force in-tree autoscaling on for shared clusters, with this idle timeout.
    pub autoscaling: Autoscaling,
    /// Keep a minimal head-only stand-in `rayClusterSpec` next to the selector, for KubeRay
    /// run with `--batch-scheduler=volcano` (see README).
    pub volcano_stand_in_spec: bool,
    /// At most this many active jobs per shared cluster (0: no limit); further jobs of the
    /// same config go to `<name>-1`, `<name>-2`, ...
    pub max_jobs_per_cluster: u32,
    /// Upper bound on each shared-cluster call: admission's read of a cluster the cache
    /// does not know, the provisioner's create and stamp.
    pub create_timeout_ms: u64,
    /// Deny a RayJob whose shape rayshare does not understand (instead of passing it unchanged).
    pub deny_on_error: bool,
    /// Where on the head a job whose entrypoint downloads code into its working directory
    /// (Flyte's fast registration) gets a directory of its own (empty: never).
    pub job_workdir_root: String,
    pub stop_jobs: StopJobs,
    /// RayJobs that Kueue manages (`kueue.x-k8s.io/queue-name`).
    pub kueue: Kueue,
}

/// What rayshare does with a RayJob that carries `kueue.x-k8s.io/queue-name`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Kueue {
    /// Leave it as written: Kueue admits the job's own cluster (no sharing). Rewriting it
    /// alone would run it outside every quota: Kueue ignores jobs on existing clusters.
    #[default]
    Skip,
    /// Share, inside the quota: the shared cluster carries the job's queue (and priority
    /// class), is made suspended, and Kueue admits and charges it as a RayCluster of its
    /// own; the jobs on it run without a second charge. Jobs of different queues never
    /// share a cluster.
    AdmitSharedCluster,
}

/// Stopping the Ray jobs of deleted and finished RayJobs on shared clusters (leader only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StopJobs {
    pub enabled: bool,
    /// The Ray dashboard of a shared cluster; `{headIP}` (the IP of the head pod KubeRay
    /// made for the cluster), `{port}` (that pod's dashboard port), `{namespace}` and
    /// `{cluster}` are filled in.
    pub dashboard_url: String,
    /// Every shared cluster's job list is read this often (deletions missed while
    /// rayshare was down); a RayJob's deletion is acted on at once. Suspended shared
    /// clusters are looked at as often, to warn the jobs they cut off.
    pub interval_seconds: u64,
    /// Upper bound on each dashboard call.
    pub timeout_ms: u64,
}

impl Default for StopJobs {
    fn default() -> Self {
        Self {
            enabled: true,
            dashboard_url: "http://{headIP}:{port}".into(),
            interval_seconds: 30,
            timeout_ms: 3000,
        }
    }
}

/// Deleting shared clusters that stayed idle (no active RayJob selecting them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Reclaim {
    pub enabled: bool,
    /// Idle time after which a shared cluster is deleted.
    pub idle_ttl_seconds: u64,
    /// Job annotation that asks for a longer TTL (copied to its cluster; the longest wins).
    pub ttl_annotation: String,
    /// Cap on what a job may ask for.
    pub max_idle_ttl_seconds: u64,
    pub interval_seconds: u64,
    /// How long an idle cluster carries the reclaim mark before it is deleted: longer
    /// than an admitted job takes to be stored (the webhook timeout and then some).
    pub quiet_seconds: u64,
    /// How long after the mark a head that does not say what it runs (its dashboard does
    /// not answer) holds the delete; 0: the RayJobs alone decide.
    pub head_silence_seconds: u64,
    /// Only log what would be deleted.
    pub dry_run: bool,
    /// Reclaim only in these namespaces (empty: all).
    pub namespaces: Vec<String>,
}

/// Keeping a config's shared clusters warm ahead of demand, from the arrivals it has seen
/// (`domain::warm_ahead`, carried out by `reconcile::warm_ahead`). Off by default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct WarmAhead {
    pub enabled: bool,
    /// Every config in these namespaces is kept warm while a task is expected.
    pub namespaces: Vec<String>,
    /// A RayJob annotated with this key and "true" opts its config in, in any namespace.
    pub opt_in_annotation: String,
    /// Pool members kept able to take a job while a task is expected within the idle TTL.
    pub min_warm: u32,
    /// At most this many warm members (kept idle or made ahead) per config.
    pub max_per_config: u32,
    /// At most this many warm members over all configs of one namespace.
    pub max_per_namespace: u32,
    /// The weight of past arrivals halves every this long.
    pub half_life_seconds: u64,
    /// Arrivals at most this far apart are one burst (a map task's fan-out).
    pub burst_window_seconds: u64,
    /// The time-of-day memory's period (0: none).
    pub period_seconds: u64,
    /// Configs whose arrivals are remembered; past it the stalest is forgotten.
    pub max_configs: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Autoscaling {
    pub enabled: bool,
    pub idle_timeout_seconds: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PodGroups {
    pub enabled: bool,
    /// Pods whose `spec.schedulerName` is one of these get a PodGroup.
    pub scheduler_names: Vec<String>,
    /// Queue used when neither the pod nor its namespace names one.
    pub default_queue: String,
    /// Group pods without a controller owner (bare pods, as Flyte v1 and v2 make them when
    /// no owner is set).
    pub bare_pods: bool,
    /// Controller-owner kinds (`group/Kind`, `Kind`, or `*` for any) whose pods get a group
    /// of their own. Pods of other owners are left to Volcano's own controller, which
    /// groups all pods of one owner together.
    pub owner_kinds: Vec<String>,
    /// Owner kinds (`Kind` or `group/Kind`; any owner reference) never grouped: they bring
    /// their own gang scheduling. Wins over `ownerKinds`.
    pub excluded_owner_kinds: Vec<String>,
    /// Make the group while the pod is admitted, so it exists when later admission steps
    /// look for it: Volcano's own `pods/validate` webhook (installed by default up to
    /// v1.11, `failurePolicy: Fail`) refuses a pod whose group does not exist yet. With
    /// `false` the group is made only once the pod is stored (then a forged review makes
    /// nothing at all, but Volcano's webhook must not validate pods).
    pub create_at_admission: bool,
    /// Age after which a group made at admission that no stored pod has taken up (a pod
    /// refused by a later admission step, or a forged review) is deleted, unless a pod
    /// names it.
    pub unconfirmed_grace_seconds: u64,
    /// Age after which a PodGroup without its pod (and without an owner) is deleted.
    pub orphan_grace_seconds: u64,
    /// How often the orphan reconciler runs.
    pub reconcile_interval_seconds: u64,
    /// Upper bound on each API call of the PodGroup provisioner, and on each try of
    /// admission's create (one unanswered in half of it is sent again, both within
    /// `admissionTimeoutMs`).
    pub create_timeout_ms: u64,
    /// Deny a Volcano pod whose shape rayshare does not understand.
    pub deny_on_error: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Indices {
    pub enabled: bool,
    /// Also give pods of single-host groups a replica index.
    pub single_host_replica_index: bool,
    /// Set `spec.hostname` / `spec.subdomain` from the indices.
    pub set_hostname: bool,
    /// Inject `TPU_WORKER_ID`, `TPU_NAME`, `TPU_WORKER_HOSTNAMES` into pods requesting TPUs.
    pub tpu_env: bool,
    /// Age after which a claim whose pod never appeared is released.
    /// A claim counts this long without its pod (the pod's admission may still be on its
    /// way); after that, a claim no live pod holds is released when its slot is wanted.
    pub claim_in_flight_seconds: u64,
    /// A pod that would open a replica past the group's count first waits this long for
    /// the pods of the claims still in flight inside it, then takes those claims over (a
    /// rejected or forged admission would otherwise leave a gap in a slice). At most
    /// `claim_in_flight_seconds`: a claim past that is released anyway.
    pub claim_takeover_ms: u64,
    pub claim_grace_seconds: u64,
    pub reconcile_interval_seconds: u64,
    pub claim_timeout_ms: u64,
    pub deny_on_error: bool,
}

mod defaults;
use defaults::strings;
mod load;
pub use load::ConfigError;

#[cfg(test)]
mod tests;
