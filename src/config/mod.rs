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
    /// Only log what would be deleted.
    pub dry_run: bool,
    /// Reclaim only in these namespaces (empty: all).
    pub namespaces: Vec<String>,
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
    /// Upper bound on each API call of the PodGroup provisioner.
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

impl Default for Config {
    fn default() -> Self {
        Self {
            instance: "rayshare".into(),
            opt_out_annotation: DEFAULT_OPT_OUT_ANNOTATION.into(),
            admission_timeout_ms: 4000,
            served_namespaces: ServedNamespaces::default(),
            shared_clusters: SharedClusters::default(),
            pod_groups: PodGroups::default(),
            indices: Indices::default(),
            reclaim: Reclaim::default(),
        }
    }
}

impl Default for Reclaim {
    fn default() -> Self {
        Self {
            enabled: true,
            idle_ttl_seconds: 1800,
            ttl_annotation: "rayshare.io/idle-ttl-seconds".into(),
            max_idle_ttl_seconds: 86400,
            interval_seconds: 30,
            quiet_seconds: 40,
            dry_run: false,
            namespaces: vec![],
        }
    }
}

/// Pod-template labels (and, for symmetry, annotations) that Flyte sets per execution,
/// run, action or attempt. The README's table names the Flyte file that sets each.
const FLYTE_RUN_KEYS: &[&str] = &[
    // Flyte v2 (executor/pkg/plugin/task_exec_metadata.go, actions/k8s/client.go).
    "run",
    "action",
    "attempt",
    "flyte.org/run",
    "flyte.org/action",
    "flyte.org/is-root",
    // Flyte v1 (flytepropeller pkg/compiler/transformers/k8s/workflow.go).
    "execution-id",
    "shard-key",
];

/// Env vars Flyte sets per execution, run, action or attempt (README table).
const FLYTE_RUN_ENV: &[&str] = &[
    // Flyte v2 (executor/pkg/plugin/task_exec_metadata.go).
    "RUN_NAME",
    "ACTION_NAME",
    "_U_RUN_BASE",
    // Both (flyteplugins pluginmachinery/flytek8s/k8s_resource_adds.go).
    "FLYTE_ATTEMPT_NUMBER",
    "FLYTE_EXECUTION_URL",
];

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

impl Default for SharedClusters {
    fn default() -> Self {
        Self {
            enabled: true,
            run_scoped_env_names: strings(FLYTE_RUN_ENV),
            // FLYTE_INTERNAL_EXECUTION_ID (per execution/run) and the per task version
            // FLYTE_INTERNAL_TASK_VERSION etc.: all travel with the job.
            run_scoped_env_prefixes: strings(&["FLYTE_INTERNAL_"]),
            run_scoped_labels: strings(FLYTE_RUN_KEYS),
            run_scoped_annotations: strings(FLYTE_RUN_KEYS),
            copied_job_labels: strings(&[
                "ray.io/scheduler-name",
                "ray.io/priority-class-name",
                "volcano.sh/queue-name",
                "yunikorn.apache.org/queue",
            ]),
            autoscaling: Autoscaling::default(),
            volcano_stand_in_spec: false,
            max_jobs_per_cluster: 0,
            create_timeout_ms: 3000,
            deny_on_error: false,
            job_workdir_root: "/tmp/rayshare-jobs".into(),
            stop_jobs: StopJobs::default(),
            kueue: Kueue::default(),
        }
    }
}

impl Default for Autoscaling {
    fn default() -> Self {
        Self {
            enabled: false,
            idle_timeout_seconds: 60,
        }
    }
}

impl Default for PodGroups {
    fn default() -> Self {
        Self {
            enabled: true,
            scheduler_names: strings(&["volcano"]),
            default_queue: "default".into(),
            bare_pods: true,
            // flytepropeller's owner reference spells its kind in lower case.
            owner_kinds: strings(&["flyte.lyft.com/flyteworkflow", "flyte.org/TaskAction"]),
            excluded_owner_kinds: strings(&[
                "batch.volcano.sh/Job",
                "ray.io/RayCluster",
                "ray.io/RayJob",
                "kubeflow.org/PyTorchJob",
                "kubeflow.org/TFJob",
                "kubeflow.org/MPIJob",
                "jobset.x-k8s.io/JobSet",
            ]),
            create_at_admission: true,
            unconfirmed_grace_seconds: 30,
            orphan_grace_seconds: 120,
            reconcile_interval_seconds: 30,
            create_timeout_ms: 3000,
            deny_on_error: false,
        }
    }
}

impl Default for Indices {
    fn default() -> Self {
        Self {
            enabled: true,
            single_host_replica_index: false,
            set_hostname: false,
            tpu_env: false,
            claim_in_flight_seconds: 10,
            claim_takeover_ms: 2000,
            claim_grace_seconds: 60,
            reconcile_interval_seconds: 15,
            claim_timeout_ms: 4000,
            deny_on_error: false,
        }
    }
}

mod load;
pub use load::ConfigError;

#[cfg(test)]
mod tests;
