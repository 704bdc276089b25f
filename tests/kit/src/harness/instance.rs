//! `rayshare serve` processes that die with the test binary, and what they report.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

/// `program` wrapped so that it dies with the test binary: a bash wrapper sends it SIGTERM
/// once its stdin, held by us, closes (the child is dropped, or the test binary dies
/// however it dies). Add the program's arguments to the returned command.
pub fn supervised(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new("bash");
    cmd.args([
        "-c",
        // Background jobs get /dev/null as stdin unless told otherwise: hand the
        // watcher our stdin explicitly (fd 3).
        r#"exec 3<&0; "$@" & child=$!; { cat >/dev/null; kill -TERM $child 2>/dev/null; } <&3 & wait $child"#,
        "bash",
    ])
    .arg(program)
    .stdin(Stdio::piped());
    cmd
}

/// One `rayshare serve` process, stopped when dropped (and when the test binary dies, see
/// [`supervised`]).
/// Another build of rayshare for the instances started from now on (the provisioning
/// benchmark compares two builds); `None`: this one.
pub static OTHER_BUILD: std::sync::Mutex<Option<Build>> = std::sync::Mutex::new(None);

pub struct Build {
    pub path: PathBuf,
    /// It has no `instance` setting (and would refuse the key).
    pub predates_instance: bool,
}

pub struct Rayshare {
    child: Child,
    dir: PathBuf,
    name: String,
    config_yaml: String,
    namespace: String,
    ports: (u16, u16),
    extra_args: Vec<String>,
    pub log: PathBuf,
    pub admin_url: String,
    pub url: String,
}

impl Rayshare {
    pub fn start(
        dir: &Path,
        name: &str,
        config_yaml: &str,
        namespace: &str,
        extra_args: &[String],
    ) -> Self {
        let ports = (free_port(), free_port());
        Self::start_on(dir, name, config_yaml, namespace, ports, extra_args)
    }

    /// Stops this instance and starts a fresh process on the same ports.
    pub async fn restart(&mut self) {
        self.stop();
        let fresh = Self::start_on(
            &self.dir,
            &self.name,
            &self.config_yaml,
            &self.namespace,
            self.ports,
            &self.extra_args,
        );
        *self = fresh;
        self.wait_ready().await;
    }

    fn start_on(
        dir: &Path,
        name: &str,
        config_yaml: &str,
        namespace: &str,
        ports: (u16, u16),
        extra_args: &[String],
    ) -> Self {
        let (port, admin_port) = ports;
        let config = dir.join(format!("{name}.config.yaml"));
        std::fs::write(&config, config_yaml).unwrap();
        let log = dir.join(format!("{name}.log"));
        let _ = std::fs::rename(&log, dir.join(format!("{name}.previous.log")));
        let bin = OTHER_BUILD
            .lock()
            .unwrap()
            .as_ref()
            .map(|b| b.path.clone())
            .unwrap_or_else(super::rayshare_bin);
        let child = supervised(bin)
            .arg("serve")
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin_port}")])
            .arg("--tls-cert")
            .arg(dir.join("tls.crt"))
            .arg("--tls-key")
            .arg(dir.join("tls.key"))
            .arg("--config")
            .arg(&config)
            .arg("--kubeconfig")
            .arg(&CONTROL_PLANE.rayshare_kubeconfig)
            .args(["--pod-name", name, "--pod-namespace", namespace])
            .args(["--drain-timeout-seconds", "5"])
            .args(extra_args)
            .env("RAYSHARE_LOG", "info,rayshare=debug")
            // Fast reconciler takeover when a test stops the leader.
            .env("RAYSHARE_LEADER_LEASE_SECONDS", "3")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("starting rayshare");
        Self {
            child,
            dir: dir.to_path_buf(),
            name: name.into(),
            config_yaml: config_yaml.into(),
            namespace: namespace.into(),
            ports,
            extra_args: extra_args.to_vec(),
            log,
            admin_url: format!("http://127.0.0.1:{admin_port}"),
            url: format!("https://127.0.0.1:{port}/mutate"),
        }
    }

    /// CPU time this rayshare process has used so far (its supervisor's only child).
    pub fn cpu(&self) -> Duration {
        let supervisor = self.child.id();
        std::fs::read_to_string(format!("/proc/{supervisor}/task/{supervisor}/children"))
            .ok()
            .and_then(|pids| pids.split_whitespace().find_map(|p| p.parse().ok()))
            .and_then(process_cpu)
            .unwrap_or_default()
    }

    /// The pid of the rayshare process itself (its supervisor's only child); `None` once
    /// it has exited (the supervisor reaps it and exits too).
    pub fn pid(&self) -> Option<u32> {
        let supervisor = self.child.id();
        std::fs::read_to_string(format!("/proc/{supervisor}/task/{supervisor}/children"))
            .ok()?
            .split_whitespace()
            .find_map(|p| p.parse().ok())
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log of the process this one replaced (`restart`), empty if none.
    #[allow(dead_code)] // not every test binary restarts an instance
    pub fn previous_log_text(&self) -> String {
        std::fs::read_to_string(self.dir.join(format!("{}.previous.log", self.name)))
            .unwrap_or_default()
    }

    /// Waits until the log holds `line`: rayshare logs a call after it returns, and its
    /// log is written by a background thread, so a test that saw the call's effect
    /// through the API may be there first.
    pub async fn wait_for_log(&self, line: &str) {
        wait_for(&format!("{line:?} in the log"), || async {
            self.log_text().contains(line).then_some(())
        })
        .await
    }

    /// Stops the process and waits for it.
    pub fn stop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }

    pub async fn wait_ready(&self) {
        let url = format!("{}/readyz", self.admin_url);
        let started = Instant::now();
        loop {
            if let Ok(r) = reqwest::get(&url).await
                && r.status().is_success()
            {
                return;
            }
            if started.elapsed() > Duration::from_secs(60) {
                panic!("rayshare never became ready; its log:\n{}", tail(&self.log));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Passes the leader's reconciler of `kind` has finished (0 on a follower).
    pub async fn reconcile_passes(&self, kind: &str) -> u64 {
        let line = format!("rayshare_reconcile_passes_total{{kind=\"{kind}\"}} ");
        let metrics = self.metrics().await;
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line)?.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Waits until `n` more passes of the reconciler `kind` have ended than had now (so
    /// with `n = 1`, the pass that may be under way).
    pub async fn wait_passes(&self, kind: &str, n: u64) {
        let passes = self.reconcile_passes(kind).await;
        wait_for(&format!("{n} more {kind} passes"), || async {
            (self.reconcile_passes(kind).await >= passes + n).then_some(())
        })
        .await
    }

    pub async fn metrics(&self) -> String {
        reqwest::get(format!("{}/metrics", self.admin_url))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

impl Drop for Rayshare {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- rayshare log {} ---\n{}",
                self.log.display(),
                tail(&self.log)
            );
        }
        self.stop();
    }
}
