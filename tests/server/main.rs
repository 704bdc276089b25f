//! `rayshare serve` over real sockets: the built binary, real TLS handshakes (HTTP/1.1,
//! HTTP/2, TLS 1.2), certificate rotation the way kubelet rotates Secret volumes,
//! graceful drain on SIGTERM, and config errors caught before listening.
//!
//! Every server runs against a kubeconfig whose API server never answers usefully, so
//! the caches never sync (`/readyz` stays 503) while `/mutate` still serves.

mod clients;
mod lifecycle;
mod memory;
mod wire;

use std::net::{SocketAddr, TcpListener as StdTcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use reqwest::{Certificate, StatusCode, Version};
use serde_json::{Value, json};
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_rayshare");

/// The kit finds the binary from the test's own path; it must be the one cargo built.
#[test]
fn the_kit_runs_the_binary_cargo_built_for_this_test() {
    let bin = std::path::Path::new(BIN).canonicalize().unwrap();
    let kit = rayshare_testkit::harness::rayshare_bin()
        .canonicalize()
        .unwrap();
    assert_eq!(kit, bin);
}
/// Nothing listens on port 1: API calls fail fast with "connection refused".
const REFUSING_API_SERVER: &str = "https://127.0.0.1:1";

fn init_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

// ---------------------------------------------------------------------------------------
// Files: certificates, kubeconfig, config
// ---------------------------------------------------------------------------------------

/// A CA and a serving pair signed by it, as written by `rayshare certs`.
struct Pki {
    ca: Vec<u8>,
    cert: PathBuf,
    key: PathBuf,
}

fn generate_pki(dir: &Path) -> Pki {
    let out = Command::new(BIN)
        .args(["certs", "--host", "127.0.0.1", "--out"])
        .arg(dir)
        .output()
        .expect("running rayshare certs");
    assert!(
        out.status.success(),
        "rayshare certs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Pki {
        ca: std::fs::read(dir.join("ca.crt")).unwrap(),
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
    }
}

fn write_kubeconfig(dir: &Path, api_server: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: {api_server}
    insecure-skip-tls-verify: true
users:
- name: test
  user:
    token: not-a-real-token
contexts:
- name: test
  context:
    cluster: test
    user: test
    namespace: default
current-context: test
"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// A port that was free a moment ago.
use rayshare_testkit::ports::free_port;

/// Lays out `dir` the way kubelet writes a Secret volume and rotates it: the pair goes to
/// a fresh `..<generation>` directory, a `..data_tmp` symlink to it is renamed over
/// `..data` (atomic), `tls.crt`/`tls.key` point through `..data`, and the previous
/// generation is removed.
struct SecretVolume {
    dir: PathBuf,
    current: Option<String>,
}

impl SecretVolume {
    fn new(dir: PathBuf) -> Self {
        std::fs::create_dir_all(&dir).unwrap();
        Self { dir, current: None }
    }

    fn cert(&self) -> PathBuf {
        self.dir.join("tls.crt")
    }

    fn key(&self) -> PathBuf {
        self.dir.join("tls.key")
    }

    fn publish(&mut self, generation: &str, cert: &[u8], key: &[u8]) {
        use std::os::unix::fs::symlink;
        let name = format!("..{generation}");
        let data = self.dir.join(&name);
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("tls.crt"), cert).unwrap();
        std::fs::write(data.join("tls.key"), key).unwrap();
        let tmp = self.dir.join("..data_tmp");
        symlink(&name, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.join("..data")).unwrap();
        for file in ["tls.crt", "tls.key"] {
            let link = self.dir.join(file);
            if std::fs::symlink_metadata(&link).is_err() {
                symlink(Path::new("..data").join(file), &link).unwrap();
            }
        }
        if let Some(old) = self.current.replace(name) {
            std::fs::remove_dir_all(self.dir.join(old)).unwrap();
        }
    }
}

// ---------------------------------------------------------------------------------------
// The server process
// ---------------------------------------------------------------------------------------

struct ServeOptions {
    cert: PathBuf,
    key: PathBuf,
    api_server: String,
    config: Option<&'static str>,
    listen: u16,
    admin_listen: u16,
    /// More `serve` flags.
    extra: Vec<&'static str>,
}

impl ServeOptions {
    fn new(pki: &Pki) -> Self {
        Self::with_files(pki.cert.clone(), pki.key.clone())
    }

    fn with_files(cert: PathBuf, key: PathBuf) -> Self {
        Self {
            cert,
            key,
            api_server: REFUSING_API_SERVER.into(),
            config: None,
            listen: free_port(),
            admin_listen: free_port(),
            extra: Vec::new(),
        }
    }
}

/// A running `rayshare serve`; killed on drop, its log printed if the test is failing.
struct Server {
    child: Child,
    exited: Option<ExitStatus>,
    log: PathBuf,
    addr: SocketAddr,
    admin: SocketAddr,
}

impl Server {
    fn spawn(dir: &Path, opts: ServeOptions) -> Self {
        let kubeconfig = write_kubeconfig(dir, &opts.api_server);
        let log = dir.join("serve.log");
        let addr = SocketAddr::from(([127, 0, 0, 1], opts.listen));
        let admin = SocketAddr::from(([127, 0, 0, 1], opts.admin_listen));
        let mut cmd = Command::new(BIN);
        cmd.arg("serve")
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--admin-listen")
            .arg(admin.to_string())
            .arg("--tls-cert")
            .arg(&opts.cert)
            .arg("--tls-key")
            .arg(&opts.key)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args([
                "--cert-reload-seconds",
                "1",
                "--log-level",
                "info,rayshare=debug",
            ])
            .args(&opts.extra)
            .env_remove("KUBECONFIG")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.join("serve.out")).unwrap())
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(config) = opts.config {
            let path = dir.join("config.yaml");
            std::fs::write(&path, config).unwrap();
            cmd.arg("--config").arg(path);
        }
        let child = cmd.spawn().expect("spawning rayshare serve");
        Self {
            child,
            exited: None,
            log,
            addr,
            admin,
        }
    }

    /// Spawns and waits until the admin port answers `/livez`.
    async fn start(dir: &Path, opts: ServeOptions) -> Self {
        let mut server = Self::spawn(dir, opts);
        let admin = reqwest::Client::builder().no_proxy().build().unwrap();
        let livez = format!("http://{}/livez", server.admin);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = server.try_exit() {
                panic!("rayshare serve exited early ({status}):\n{}", server.log());
            }
            if let Ok(r) = admin.get(&livez).send().await
                && r.status() == StatusCode::OK
            {
                return server;
            }
            assert!(Instant::now() < deadline, "/livez never answered");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().expect("polling the child");
        }
        self.exited
    }

    /// The exit status, if the process ends within `limit`.
    async fn exit_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.try_exit() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.try_exit()
    }

    fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    async fn try_admin_get(&self, path: &str) -> reqwest::Result<(StatusCode, String)> {
        let r = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(5))
            .build()?
            .get(format!("http://{}{path}", self.admin))
            .send()
            .await?;
        Ok((r.status(), r.text().await?))
    }

    async fn admin_get(&self, path: &str) -> (StatusCode, String) {
        self.try_admin_get(path)
            .await
            .unwrap_or_else(|e| panic!("GET {path} on the admin port: {e}"))
    }

    async fn metrics(&self) -> String {
        let (status, text) = self.admin_get("/metrics").await;
        assert_eq!(status, StatusCode::OK);
        text
    }

    /// Polls `/metrics` until it contains `needle`.
    async fn await_metric(&self, needle: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let text = self.metrics().await;
            if text.contains(needle) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "metrics never showed {needle:?}:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.try_exit().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!("----- rayshare serve log -----\n{}", self.log());
        }
    }
}
