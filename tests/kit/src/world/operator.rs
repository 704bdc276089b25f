//! One KubeRay operator per test, and which KubeRay version the suite runs.

use std::time::{Duration, Instant};

use crate::harness::*;

use super::{Process, SLOW, WORLD};

/// Which KubeRay the suite runs: `RAYSHARE_KUBERAY=v1.5` for v1.5.1, `v1.4` for v1.4.2,
/// else v1.6.1 (tests/tools/build-kuberay.sh; tests/tools/crds.sh reads the same variable).
pub fn kuberay_version() -> Vec<&'static str> {
    match std::env::var("RAYSHARE_KUBERAY").as_deref() {
        Ok("v1.5") => vec!["v1.5"],
        Ok("v1.4") => vec!["v1.4"],
        Ok("") | Err(_) => vec![],
        Ok(other) => {
            panic!("RAYSHARE_KUBERAY={other}: only v1.5, v1.4 (or unset, v1.6.1) are built")
        }
    }
}

/// Whether the suite runs KubeRay v1.4, which differs where rayshare's tests look: no
/// `RayMultiHostIndexing` gate (an unknown gate is refused), no PodGroup per RayJob with
/// Volcano (only per RayCluster), and a job whose dashboard never answers stays Running.
pub fn kuberay_v1_4() -> bool {
    kuberay_version() == ["v1.4"]
}

/// How a test runs KubeRay.
#[derive(Debug, Clone, Default)]
pub struct KubeRayOptions {
    /// `--feature-gates`, e.g. `RayMultiHostIndexing=false`.
    pub feature_gates: String,
    /// `--batch-scheduler`, e.g. `volcano`.
    pub batch_scheduler: Option<String>,
    /// `HTTP_PROXY`: where KubeRay's dashboard calls go (a [`super::Dashboard`]).
    pub dashboard_proxy: Option<String>,
}

/// One KubeRay operator (ray-operator, tests/tools/build-kuberay.sh): no leader election,
/// no metrics listener, its health probe on a free port of 127.0.0.1. Tests run several at
/// once, each watching only its test's namespaces (with its own gates); with no namespaces
/// given it watches all. Stopped when dropped.
pub struct KubeRay {
    pub process: Process,
}

impl KubeRay {
    pub async fn start(name: &str, namespaces: &[&str], options: &KubeRayOptions) -> Self {
        let world = &*WORLD;
        let bin = run_script_with(
            &repo().join("tests/tools/build-kuberay.sh"),
            &kuberay_version(),
        );
        let port = free_port();
        let mut cmd = supervised(&bin);
        cmd.args([
            "--enable-leader-election=false",
            // Its default binds :8080 on every interface; "0" turns it off.
            "--metrics-addr=0",
            "--log-stdout-encoder=console",
        ])
        .arg(format!("--health-probe-bind-address=127.0.0.1:{port}"))
        .env("KUBECONFIG", &CONTROL_PLANE.admin_kubeconfig);
        if !namespaces.is_empty() {
            cmd.arg(format!("--watch-namespace={}", namespaces.join(",")));
        }
        if !options.feature_gates.is_empty() {
            cmd.arg(format!("--feature-gates={}", options.feature_gates));
        }
        if let Some(scheduler) = &options.batch_scheduler {
            cmd.arg(format!("--batch-scheduler={scheduler}"));
        }
        if let Some(proxy) = &options.dashboard_proxy {
            cmd.env("HTTP_PROXY", proxy).env("NO_PROXY", "");
        }
        let mut process = Process::spawn(
            &format!("kuberay {name}"),
            cmd,
            world.dir.join(format!("kuberay-{name}.log")),
        );
        let url = format!("http://127.0.0.1:{port}/readyz");
        let started = Instant::now();
        loop {
            process.assert_running();
            if let Ok(r) = reqwest::get(&url).await
                && r.status().is_success()
            {
                break;
            }
            assert!(
                started.elapsed() < SLOW,
                "KubeRay never became ready; its log:\n{}",
                tail(&process.log)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Self { process }
    }

    pub fn log_text(&self) -> String {
        self.process.log_text()
    }
}
