//! End-to-end harness: a real kube-apiserver + etcd (tests/controlplane), the real CRDs
//! (from the Go modules of KubeRay and Volcano, tests/tools/crds.sh), and `rayshare serve`
//! registered through the chart's own MutatingWebhookConfiguration.
//!
//! One control plane per test binary; each test gets its own namespaces, its own rayshare
//! process(es) and its own webhook registration (selecting only its namespaces), so tests
//! run in parallel without seeing each other. tests/kit/src/world/ adds the scheduler,
//! controller-manager, kwok and KubeRay for the tests that need them.

mod api;
mod control_plane;
mod env;
mod instance;
mod seen;

pub use api::*;
pub use control_plane::*;
pub use env::*;
pub use instance::*;
pub use seen::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::LazyLock;
use std::time::Duration;

use kube::core::ApiResource;
use serde_json::Value;

pub const ENABLE_LABEL: &str = "rayshare.io/enabled";
pub const TEST_LABEL: &str = "rayshare.io/e2e-test";
/// With several instances, a pod labelled `SHARD_LABEL: i` goes to instance i.
pub const SHARD_LABEL: &str = "rayshare.io/e2e-shard";
pub const RAYSHARE_NAMESPACE: &str = "rayshare-system";

/// The repository's root (this kit lives in tests/kit).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `rayshare` binary cargo built for the running test or benchmark: cargo puts a
/// test's executable in `<profile>/deps/` and the package's binaries in `<profile>/`.
/// (`CARGO_BIN_EXE_rayshare` is set only while compiling the package's own tests.)
pub fn rayshare_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the running test's path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("a test runs from <target>/<profile>/deps");
    profile.join(format!("rayshare{}", std::env::consts::EXE_SUFFIX))
}

/// Runs one of the project's build scripts; it prints a path on stdout.
pub fn run_script(script: &Path) -> PathBuf {
    run_script_with(script, &[])
}

pub fn run_script_with(script: &Path, args: &[&str]) -> PathBuf {
    let out = Command::new("bash")
        .arg(script)
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    assert!(out.status.success(), "{} failed", script.display());
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

pub use crate::ports::free_port;

/// The last 60 lines of a log.
/// The last lines of a log (60, or RAYSHARE_TEST_LOG_LINES when a failure needs more).
pub fn tail(path: &Path) -> String {
    let keep = std::env::var("RAYSHARE_TEST_LOG_LINES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(60);
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(keep)..].join("\n")
}

/// helm (built from Go modules, cached).
pub static HELM: LazyLock<PathBuf> =
    LazyLock::new(|| run_script(&repo().join("tests/tools/build-helm.sh")));

/// `helm template <release> charts/rayshare --namespace <namespace> [--show-only <template>]
/// [--set <set>]...`: the rendered YAML, as helm prints it.
pub fn helm_render(
    release: &str,
    namespace: &str,
    show_only: Option<&str>,
    sets: &[&str],
) -> String {
    let mut cmd = Command::new(&*HELM);
    cmd.args(["template", release])
        .arg(repo().join("charts/rayshare"))
        .args(["--namespace", namespace]);
    if let Some(template) = show_only {
        cmd.args(["--show-only", template]);
    }
    for s in sets {
        cmd.args(["--set", s]);
    }
    let out = cmd.output().expect("running helm");
    assert!(
        out.status.success(),
        "helm template failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Renders one template of the chart as release `rayshare` in `rayshare-system`.
pub fn helm_template(show_only: &str, sets: &[&str]) -> Vec<Value> {
    let text = helm_render("rayshare", RAYSHARE_NAMESPACE, Some(show_only), sets);
    rayshare::offline::documents(&text).expect("helm renders YAML")
}

pub fn sample(file: &str) -> Value {
    let text = std::fs::read_to_string(repo().join("deploy/samples").join(file)).unwrap();
    serde_norway::from_str(&text).unwrap()
}

pub fn ray_cluster_resource() -> ApiResource {
    resource("ray.io", "v1", "RayCluster", "rayclusters")
}

pub fn ray_job_resource() -> ApiResource {
    resource("ray.io", "v1", "RayJob", "rayjobs")
}

pub fn pod_group_resource() -> ApiResource {
    resource("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups")
}

/// User and system CPU time of process `pid`, every thread's, from `/proc/<pid>/stat`
/// (in clock ticks: USER_HZ, 100 on Linux whatever the kernel's own tick).
pub fn process_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name (which may hold spaces) in parentheses.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    // utime and stime: fields 14 and 15 of the line, indices 11 and 12 after the name.
    let total = ticks(11)? + ticks(12)?;
    Some(Duration::from_millis(total * 10))
}

/// The sum of the Prometheus samples of `series` (its name and the `{`) whose line holds
/// every one of `with` (labels, as written: `kind="Pod"`).
pub fn metric_sum(metrics: &str, series: &str, with: &[&str]) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(series) && with.iter().all(|w| l.contains(w)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
