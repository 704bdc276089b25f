//! Every section's defaults (the values an empty config file has).

use super::*;

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
            warm_ahead: WarmAhead::default(),
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
            head_silence_seconds: 300,
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

pub(super) fn strings(items: &[&str]) -> Vec<String> {
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

impl Default for WarmAhead {
    fn default() -> Self {
        Self {
            enabled: false,
            namespaces: vec![],
            opt_in_annotation: "rayshare.io/warm-ahead".into(),
            min_warm: 1,
            max_per_config: 4,
            max_per_namespace: 4,
            half_life_seconds: 3600,
            burst_window_seconds: 10,
            period_seconds: 86400,
            max_configs: 1000,
        }
    }
}
