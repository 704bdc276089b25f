//! A server-side dry-run RayJob create: did it come back rewritten?

use serde_json::Value;

use super::Line;
use crate::domain::labels::RAY_CLUSTER;

/// What the API server answered the dry-run create in `namespace`.
#[derive(Debug, Clone, PartialEq)]
pub enum DryRun {
    Returned {
        namespace: String,
        object: Value,
    },
    Refused {
        namespace: String,
        message: String,
    },
    /// RBAC does not let the user create RayJobs there.
    Forbidden {
        namespace: String,
    },
    /// Not run: no opted-in namespace, or KubeRay's RayJob kind not served.
    NotRun(String),
}

/// The dry run's verdict; `kuberay_volcano`: KubeRay runs `--batch-scheduler=volcano`,
/// whose Volcano plugin refuses a RayJob without a `rayClusterSpec`.
pub fn lines(dry_run: &DryRun, kuberay_volcano: bool) -> Vec<Line> {
    match dry_run {
        DryRun::Returned { namespace, object } => {
            let cluster = object["spec"]["clusterSelector"][RAY_CLUSTER].as_str();
            let Some(cluster) = cluster else {
                return vec![Line::fail(
                    "dry-run",
                    format!(
                        "a RayJob in {namespace} came back unchanged: rayshare did not rewrite it"
                    ),
                    "rayshare was not called or could not act: see the endpoints and readyz lines, its logs and rayshare_errors_total (with failurePolicy Ignore an unreachable webhook is silent)",
                )];
            };
            let mut out = vec![Line::ok(
                "dry-run",
                format!(
                    "a RayJob in {namespace} came back with clusterSelector {RAY_CLUSTER}={cluster}"
                ),
            )];
            if kuberay_volcano && object["spec"]["rayClusterSpec"].is_null() {
                out.push(Line::fail(
                    "batch scheduler",
                    "KubeRay runs --batch-scheduler=volcano, but rewritten RayJobs lose their rayClusterSpec: KubeRay's Volcano plugin keeps every one Initializing",
                    "set the chart's kuberay.batchScheduler=volcano (config.sharedClusters.volcanoStandInSpec: true)",
                ));
            }
            out
        }
        DryRun::Refused { namespace, message } => vec![Line::fail(
            "dry-run",
            format!("a RayJob in {namespace} was refused: {message}"),
            "a webhook or policy refused it (the message names which)",
        )],
        DryRun::Forbidden { namespace } => vec![Line::warn(
            "dry-run",
            format!("not run: you may not create RayJobs in {namespace}"),
            "run check as someone who may, or name another opted-in namespace with -n",
        )],
        DryRun::NotRun(why) => vec![Line::warn(
            "dry-run",
            format!("not run: {why}"),
            "opt a namespace in (or name one with -n), with KubeRay's CRDs installed",
        )],
    }
}
