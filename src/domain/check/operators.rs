//! KubeRay (its CRDs, its operator's version and batch scheduler), Volcano and Kueue.

use serde_json::Value;

use super::Line;

/// KubeRay versions the KubeRay suite runs (README, Compatibility).
pub const TESTED_KUBERAY: &[&str] = &["v1.6.1", "v1.5.1", "v1.4.2"];

/// Whether an API group/version serves a resource, from discovery.
#[derive(Debug, Clone, PartialEq)]
pub enum Served {
    Yes,
    No,
    /// Discovery failed for another reason than the group being absent.
    Unknown(String),
}

/// Whether discovery's API groups (or why they could not be read) include `group`.
pub fn served_group(groups: &Result<Vec<String>, String>, group: &str) -> Served {
    match groups {
        Ok(names) if names.iter().any(|n| n == group) => Served::Yes,
        Ok(_) => Served::No,
        Err(e) => Served::Unknown(e.clone()),
    }
}

/// Whether a KubeRay operator found runs `--batch-scheduler=volcano`.
pub fn schedules_with_volcano(operators: &Result<Vec<Operator>, String>) -> bool {
    operators.as_ref().is_ok_and(|found| {
        found
            .iter()
            .any(|o| o.batch_scheduler.as_deref() == Some("volcano"))
    })
}

/// KubeRay's operator as its Deployment says.
#[derive(Debug, Clone, PartialEq)]
pub struct Operator {
    pub namespace: String,
    pub name: String,
    pub image: String,
    /// The image's tag (`v1.6.1`), if it has one.
    pub version: Option<String>,
    /// `--batch-scheduler` (`volcano`, ...), or `volcano` for the older
    /// `--enable-batch-scheduler`.
    pub batch_scheduler: Option<String>,
    pub feature_gates: Option<String>,
}

fn image_path(image: &str) -> &str {
    let named = image.split('@').next().unwrap_or(image);
    let slash = named.rfind('/').map_or(0, |i| i + 1);
    match named[slash..].rfind(':') {
        Some(colon) => &named[..slash + colon],
        None => named,
    }
}

fn is_operator_image(image: &str) -> bool {
    let path = image_path(image);
    path.ends_with("kuberay/operator") || path.ends_with("kuberay-operator")
}

/// `--name=value` or `--name value` among `args`.
fn flag(args: &[&str], name: &str) -> Option<String> {
    let long = format!("--{name}");
    args.iter().enumerate().find_map(|(i, a)| {
        if let Some(value) = a.strip_prefix(&format!("{long}=")) {
            Some(value.to_string())
        } else if *a == long {
            Some(args.get(i + 1).map_or("true", |v| v).to_string())
        } else {
            None
        }
    })
}

/// KubeRay's operators among Deployments: a container running KubeRay's operator image.
pub fn operators(deployments: &[Value]) -> Vec<Operator> {
    let mut found = Vec::new();
    for d in deployments {
        let containers = d["spec"]["template"]["spec"]["containers"].as_array();
        for c in containers.into_iter().flatten() {
            let image = c["image"].as_str().unwrap_or_default();
            if !is_operator_image(image) {
                continue;
            }
            let args: Vec<&str> = ["command", "args"]
                .iter()
                .flat_map(|k| c[*k].as_array().into_iter().flatten())
                .filter_map(Value::as_str)
                .collect();
            let batch_scheduler = flag(&args, "batch-scheduler")
                .filter(|s| !s.is_empty())
                .or_else(|| {
                    (flag(&args, "enable-batch-scheduler").as_deref() == Some("true"))
                        .then(|| "volcano".into())
                });
            let tagged = image.split('@').next().unwrap_or(image);
            let version = tagged[image_path(image).len()..]
                .strip_prefix(':')
                .map(str::to_string);
            found.push(Operator {
                namespace: d["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .into(),
                name: d["metadata"]["name"].as_str().unwrap_or_default().into(),
                image: image.into(),
                version,
                batch_scheduler,
                feature_gates: flag(&args, "feature-gates"),
            });
        }
    }
    found
}

/// KubeRay's CRDs and its operator.
/// `operators`: those found, or why the Deployments could not be listed.
pub fn kuberay_lines(ray_jobs: &Served, operators: &Result<Vec<Operator>, String>) -> Vec<Line> {
    let crd = match ray_jobs {
        Served::Yes => Line::ok("kuberay CRDs", "ray.io/v1 serves rayjobs and rayclusters"),
        Served::No => Line::fail(
            "kuberay CRDs",
            "ray.io/v1 rayjobs are not served",
            "install KubeRay (its CRDs) before rayshare: rayshare reports ready only once its RayJob and RayCluster watches listed",
        ),
        Served::Unknown(e) => Line::warn(
            "kuberay CRDs",
            format!("discovery failed: {e}"),
            "try again",
        ),
    };
    let operators = match operators {
        Ok(found) => found.as_slice(),
        Err(e) => {
            let line = Line::warn(
                "kuberay",
                format!("cannot list Deployments: {e}"),
                "you need `list deployments` in all namespaces to find KubeRay's operator",
            );
            return vec![crd, line];
        }
    };
    let operator = match operators {
        [] => Line::warn(
            "kuberay",
            "no Deployment runs KubeRay's operator image (.../kuberay/operator)",
            "without the operator no RayJob runs; if it runs under another image name, check its version and --batch-scheduler by hand",
        ),
        [op] => operator_line(op),
        several => {
            let names: Vec<String> = several
                .iter()
                .map(|o| {
                    format!(
                        "{}/{} ({})",
                        o.namespace,
                        o.name,
                        o.version.as_deref().unwrap_or("untagged")
                    )
                })
                .collect();
            Line::warn(
                "kuberay",
                format!("several operators: {}", names.join(", ")),
                "two operators reconcile the same RayJobs unless they watch different namespaces",
            )
        }
    };
    vec![crd, operator]
}

fn operator_line(op: &Operator) -> Line {
    let version = op.version.as_deref().unwrap_or("untagged");
    let mut said = format!("{}/{} runs {version}", op.namespace, op.name);
    match &op.batch_scheduler {
        Some(s) => said.push_str(&format!(", --batch-scheduler={s}")),
        None => said.push_str(", no batch scheduler"),
    }
    if let Some(gates) = &op.feature_gates {
        said.push_str(&format!(", --feature-gates={gates}"));
    }
    if TESTED_KUBERAY.contains(&version) {
        Line::ok("kuberay", said)
    } else {
        Line::warn(
            "kuberay",
            format!("{said} (untested version)"),
            format!(
                "rayshare is tested with KubeRay {}",
                TESTED_KUBERAY.join(", ")
            ),
        )
    }
}

/// Volcano: its PodGroup CRD, and whether anything needs it (pods sent to rayshare, KubeRay
/// scheduling through it).
pub fn volcano_line(pod_groups: &Served, pods_sent: bool, kuberay_volcano: bool) -> Line {
    match pod_groups {
        Served::Yes => Line::ok("volcano", "scheduling.volcano.sh serves podgroups"),
        Served::No if kuberay_volcano => Line::fail(
            "volcano",
            "KubeRay runs --batch-scheduler=volcano but Volcano's PodGroup CRD is not served",
            "install Volcano, or run KubeRay without --batch-scheduler",
        ),
        Served::No if pods_sent => Line::warn(
            "volcano",
            "absent, yet pods are sent to rayshare",
            "without Volcano set config.podGroups.enabled=false (indices alone need no Volcano)",
        ),
        Served::No => Line::ok("volcano", "absent (PodGroups off)"),
        Served::Unknown(e) => Line::warn("volcano", format!("discovery failed: {e}"), "try again"),
    }
}

pub fn kueue_line(workloads: &Served) -> Line {
    match workloads {
        Served::Yes => Line::ok(
            "kueue",
            "kueue.x-k8s.io served: RayJobs with a queue label are left to Kueue unless config.sharedClusters.kueue=admitSharedCluster",
        ),
        Served::No => Line::ok("kueue", "absent"),
        Served::Unknown(e) => Line::warn("kueue", format!("discovery failed: {e}"), "try again"),
    }
}
