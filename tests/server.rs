//! `rayshare serve` over real sockets: the built binary, real TLS handshakes (HTTP/1.1,
//! HTTP/2, TLS 1.2), certificate rotation the way kubelet rotates Secret volumes,
//! graceful drain on SIGTERM, and config errors caught before listening.
//!
//! Every server runs against a kubeconfig whose API server never answers usefully, so
//! the caches never sync (`/readyz` stays 503) while `/mutate` still serves.

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
#[path = "support/ports.rs"]
mod ports;
use ports::free_port;

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

// ---------------------------------------------------------------------------------------
// Clients and reviews
// ---------------------------------------------------------------------------------------

/// A client trusting exactly `cas`; callers pick the protocol.
fn https(cas: &[&[u8]]) -> reqwest::ClientBuilder {
    cas.iter().fold(
        reqwest::Client::builder()
            .no_proxy()
            .tls_built_in_root_certs(false)
            .timeout(Duration::from_secs(15)),
        |b, ca| b.add_root_certificate(Certificate::from_pem(ca).unwrap()),
    )
}

fn client(cas: &[&[u8]]) -> reqwest::Client {
    https(cas).build().unwrap()
}

fn review(uid: &str, gvk: (&str, &str, &str), operation: &str, object: Value) -> Value {
    let (group, version, kind) = gvk;
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "operation": operation,
            "namespace": "team",
            "name": "x",
            "object": object,
        }
    })
}

/// A kind rayshare ignores: always allowed, never patched, never touches the API server.
fn deployment_review(uid: &str) -> Value {
    review(
        uid,
        ("apps", "v1", "Deployment"),
        "CREATE",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {}}),
    )
}

fn rayjob_review(uid: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/samples/rayjob-run-a.yaml");
    let object: Value = serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    review(uid, ("ray.io", "v1", "RayJob"), "CREATE", object)
}

async fn post_review(
    client: &reqwest::Client,
    server: &Server,
    body: &Value,
) -> reqwest::Result<reqwest::Response> {
    client.post(server.url("/mutate")).json(body).send().await
}

/// Checks a 200 answer to `uid` and returns its `response`.
async fn admitted(response: reqwest::Response, uid: &str) -> Value {
    let status = response.status();
    let body: Value = response.json().await.expect("a JSON AdmissionReview");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["apiVersion"], "admission.k8s.io/v1", "{body}");
    assert_eq!(body["kind"], "AdmissionReview", "{body}");
    let r = body["response"].clone();
    assert_eq!(r["uid"], uid, "{body}");
    r
}

/// Sends an ignored-kind review and checks it passes unchanged; returns the HTTP version.
async fn pass_through(client: &reqwest::Client, server: &Server, uid: &str) -> Version {
    let response = post_review(client, server, &deployment_review(uid))
        .await
        .unwrap_or_else(|e| panic!("request {uid}: {e:?}"));
    let version = response.version();
    let r = admitted(response, uid).await;
    assert_eq!(r["allowed"], true, "{r}");
    assert!(r.get("patch").is_none(), "{r}");
    version
}

/// Answers a raw request with `status`, returning the JSON error body.
async fn rejected(request: reqwest::RequestBuilder, status: StatusCode) -> Value {
    let response = request.send().await.expect("an HTTP answer");
    assert_eq!(response.status(), status);
    response.json().await.unwrap_or(Value::Null)
}

async fn poll<T>(limit: Duration, what: &str, mut attempt: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(t) = attempt().await {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Accepts connections and never answers: every API call hangs until its own timeout.
async fn black_hole() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    (addr, task)
}

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_http1_and_http2() {
    init_crypto();
    let dir = TempDir::new().unwrap();
    let pki = generate_pki(&dir.path().join("certs"));
    let server = Server::start(dir.path(), ServeOptions::new(&pki)).await;
    let ca: &[u8] = &pki.ca;

    let http1 = https(&[ca]).http1_only().build().unwrap();
    assert_eq!(pass_through(&http1, &server, "h1").await, Version::HTTP_11);
    let http2 = client(&[ca]);
    assert_eq!(pass_through(&http2, &server, "h2").await, Version::HTTP_2);

    let tls12 = https(&[ca])
        .min_tls_version(reqwest::tls::Version::TLS_1_2)
        .max_tls_version(reqwest::tls::Version::TLS_1_2)
        .build()
        .unwrap();
    assert_eq!(
        pass_through(&tls12, &server, "tls12").await,
        Version::HTTP_2
    );
    let tls13 = https(&[ca])
        .min_tls_version(reqwest::tls::Version::TLS_1_3)
        .build()
        .unwrap();
    pass_through(&tls13, &server, "tls13").await;

    // A client that does not trust the CA must not get through.
    let stranger = generate_pki(&dir.path().join("stranger"));
    let err = post_review(&client(&[&stranger.ca]), &server, &deployment_review("x"))
        .await
        .expect_err("a client trusting another CA must fail the handshake");
    assert!(err.is_connect(), "{err:?}");

    let metrics = server.metrics().await;
    assert!(
        metrics.contains(
            r#"rayshare_admission_requests_total{kind="other",operation="CREATE",outcome="ignored"} 4"#
        ),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_over_the_wire() {
    init_crypto();
    let dir = TempDir::new().unwrap();
    let pki = generate_pki(&dir.path().join("certs"));
    let server = Server::start(dir.path(), ServeOptions::new(&pki)).await;
    let c = client(&[&pki.ca]);
    let mutate = server.url("/mutate");
    let json_post = || c.post(&mutate).header("content-type", "application/json");

    let v = rejected(json_post().body("{nope"), StatusCode::BAD_REQUEST).await;
    assert_eq!(v["cause"], "not_json", "{v}");
    assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");

    rejected(c.get(&mutate), StatusCode::METHOD_NOT_ALLOWED).await;

    let v = rejected(
        c.post(&mutate)
            .header("content-type", "text/plain")
            .body("{}"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
    )
    .await;
    assert_eq!(v["cause"], "content_type", "{v}");

    // Over HTTP/2 (negotiated here): the 413 arrives cleanly. Over HTTP/1.1 the server
    // closes the connection while the client is still sending, so some clients see a
    // broken pipe / incomplete message instead of the 413.
    let v = rejected(
        json_post().body(vec![b' '; 4 * 1024 * 1024]),
        StatusCode::PAYLOAD_TOO_LARGE,
    )
    .await;
    assert_eq!(v["cause"], "too_large", "{v}");

    let v = rejected(
        c.post(server.url("/validate")).json(&json!({})),
        StatusCode::NOT_FOUND,
    )
    .await;
    assert_eq!(v["cause"], "not_found", "{v}");

    // Still serving, on the same client (HTTP/2 connection) and on a fresh HTTP/1.1 one.
    assert_eq!(pass_through(&c, &server, "after-h2").await, Version::HTTP_2);
    let http1 = https(&[&pki.ca]).http1_only().build().unwrap();
    pass_through(&http1, &server, "after-h1").await;

    let metrics = server.metrics().await;
    for needle in [
        "rayshare_admission_requests_total",
        r#"outcome="bad_request"} 3"#,
        r#"rayshare_errors_total{cause="not_json"} 1"#,
        r#"rayshare_errors_total{cause="content_type"} 1"#,
        r#"rayshare_errors_total{cause="too_large"} 1"#,
    ] {
        assert!(metrics.contains(needle), "no {needle:?} in:\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cert_rotation_by_symlink_swap_with_zero_failed_requests() {
    init_crypto();
    let dir = TempDir::new().unwrap();
    let old = generate_pki(&dir.path().join("old"));
    let new = generate_pki(&dir.path().join("new"));
    let read = |p: &Path| std::fs::read(p).unwrap();
    let mut volume = SecretVolume::new(dir.path().join("tls"));
    volume.publish("2026_a", &read(&old.cert), &read(&old.key));
    let opts = ServeOptions::with_files(volume.cert(), volume.key());
    let server = Server::start(dir.path(), opts).await;

    // A fresh client (so a fresh handshake, no session resumption) per request.
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU32::new(0));
    let traffic = tokio::spawn({
        let (url, stop, ok) = (server.url("/mutate"), stop.clone(), ok.clone());
        let (old_ca, new_ca) = (old.ca.clone(), new.ca.clone());
        async move {
            let mut failures = Vec::new();
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let c = client(&[&old_ca, &new_ca]);
                let uid = format!("rotation-{i}");
                match c.post(&url).json(&deployment_review(&uid)).send().await {
                    Ok(r) if r.status() == StatusCode::OK => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(r) => failures.push(format!("{uid}: HTTP {}", r.status())),
                    Err(e) => failures.push(format!("{uid}: {e:?}")),
                }
            }
            failures
        }
    });
    let started = Instant::now();
    poll(
        Duration::from_secs(10),
        "traffic before the swap",
        async || (ok.load(Ordering::Relaxed) >= 5).then_some(()),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1).saturating_sub(started.elapsed())).await;
    let before_swap = ok.load(Ordering::Relaxed);

    volume.publish("2026_b", &read(&new.cert), &read(&new.key));
    poll(Duration::from_secs(5), "the new certificate", async || {
        let r = post_review(&client(&[&new.ca]), &server, &deployment_review("new")).await;
        r.ok().filter(|r| r.status() == StatusCode::OK)
    })
    .await;
    let only_old = client(&[&old.ca]);
    let err = post_review(&only_old, &server, &deployment_review("old"))
        .await
        .expect_err("the old certificate must be out of service");
    assert!(err.is_connect(), "{err:?}");
    // Keep the traffic going a little past the swap.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let failures = traffic.await.unwrap();
    let ok = ok.load(Ordering::Relaxed);
    assert!(
        failures.is_empty(),
        "{} of {} requests failed: {failures:#?}",
        failures.len(),
        ok as usize + failures.len()
    );
    assert!(
        ok >= before_swap + 5,
        "{before_swap} requests before the swap, {ok} in all"
    );
    server
        .await_metric(
            r#"rayshare_certificate_reloads_total{cause="reloaded"} 1"#,
            Duration::from_secs(1),
        )
        .await;

    // A broken pair (the key is garbage) is rejected; the new pair stays in service.
    volume.publish("2026_c", &read(&new.cert), b"not a key");
    let metrics = server
        .await_metric(
            r#"rayshare_certificate_reloads_total{cause="rejected"}"#,
            Duration::from_secs(5),
        )
        .await;
    assert!(
        metrics.contains(r#"rayshare_errors_total{cause="cert_reload"}"#),
        "{metrics}"
    );
    let fresh = client(&[&new.ca]);
    pass_through(&fresh, &server, "after-broken").await;
    // Logged before the metric is counted, but written to the file by a background thread.
    poll(Duration::from_secs(5), "the rejection logged", async || {
        server
            .log()
            .contains("new serving certificate rejected")
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_in_flight_request() {
    init_crypto();
    let dir = TempDir::new().unwrap();
    let pki = generate_pki(&dir.path().join("certs"));
    let (api, api_task) = black_hole().await;
    let mut opts = ServeOptions::new(&pki);
    opts.api_server = format!("https://{api}");
    // Long enough that SIGTERM and the /readyz polls land while the request is held,
    // even on a loaded machine.
    opts.config = Some("admissionTimeoutMs: 8000\nsharedClusters:\n  createTimeoutMs: 6000\n");
    let mut server = Server::start(dir.path(), opts).await;
    let (status, body) = server.admin_get("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("caches not synced"), "{body}");

    let started = Instant::now();
    let in_flight = tokio::spawn({
        let (c, url, body) = (
            client(&[&pki.ca]),
            server.url("/mutate"),
            rayjob_review("u1"),
        );
        async move { c.post(url).json(&body).send().await }
    });
    server
        .await_metric("rayshare_admission_in_flight 1", Duration::from_secs(5))
        .await;
    let kill = Command::new("kill")
        .arg("-TERM")
        .arg(server.pid().to_string())
        .status()
        .unwrap();
    assert!(kill.success());

    poll(
        Duration::from_secs(5),
        "/readyz to say draining",
        async || {
            let (status, body) = server.try_admin_get("/readyz").await.ok()?;
            (status == StatusCode::SERVICE_UNAVAILABLE && body.contains("draining")).then_some(())
        },
    )
    .await;
    assert!(
        !in_flight.is_finished(),
        "the request should still be waiting for the API server"
    );

    let response = in_flight
        .await
        .unwrap()
        .expect("the in-flight request is answered");
    let elapsed = started.elapsed();
    let r = admitted(response, "u1").await;
    assert_eq!(r["allowed"], true, "{r}");
    // Admission writes nothing; its one read (is the cluster there?) timed out, so the
    // job is rewritten anyway (the provisioner makes the cluster once the job is stored).
    assert!(r.get("patch").is_some(), "{r}");
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains("could not check shared RayCluster") && warnings.contains("timed out"),
        "{r}"
    );
    assert!(
        elapsed >= Duration::from_millis(5800),
        "answered after {elapsed:?}"
    );

    let status = server
        .exit_within(Duration::from_secs(10))
        .await
        .expect("rayshare serve should exit after draining");
    assert!(status.success(), "exit status {status}");
    for addr in [server.addr, server.admin] {
        let err = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
            .expect_err("nothing should listen after exit");
        assert_eq!(
            err.kind(),
            std::io::ErrorKind::ConnectionRefused,
            "{addr}: {err}"
        );
    }
    api_task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_config_fails_before_listening() {
    init_crypto();
    let dir = TempDir::new().unwrap();
    let pki = generate_pki(&dir.path().join("certs"));
    // Hold both ports: a server that tried to listen would fail with "cannot listen"
    // (exit 1) instead of naming the config field (exit 2).
    let admission = StdTcpListener::bind("127.0.0.1:0").unwrap();
    let admin = StdTcpListener::bind("127.0.0.1:0").unwrap();
    let cases = [
        (
            "podGroups:\n  schedulerNames: []\n",
            2,
            "podGroups.schedulerNames",
        ),
        ("sharedClusters: {bogus: 1}\n", 2, "sharedClusters"),
        // Control: a valid config reaches the listeners, which are taken.
        (
            "sharedClusters:\n  createTimeoutMs: 1500\n",
            1,
            "cannot listen",
        ),
    ];
    for (i, (config, code, needle)) in cases.into_iter().enumerate() {
        let case_dir = dir.path().join(format!("case{i}"));
        std::fs::create_dir(&case_dir).unwrap();
        let mut opts = ServeOptions::new(&pki);
        opts.config = Some(config);
        opts.listen = admission.local_addr().unwrap().port();
        opts.admin_listen = admin.local_addr().unwrap().port();
        let mut server = Server::spawn(&case_dir, opts);
        let status = server
            .exit_within(Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("config {config:?}: still running"));
        let log = server.log();
        assert_eq!(status.code(), Some(code), "config {config:?}: {log}");
        assert!(log.contains(needle), "config {config:?}: {log}");
    }
}

/// The whole server started in this process (`App`), answering, then stopped by its
/// shutdown future: what an embedding or an in-process test does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_runs_in_process_and_stops_on_shutdown() {
    use clap::Parser;
    use rayshare::cli::{Cli, Command as Sub};
    init_crypto();
    let dir = TempDir::new().unwrap();
    let pki = generate_pki(&dir.path().join("certs"));
    let kubeconfig = write_kubeconfig(dir.path(), REFUSING_API_SERVER);
    let cli = Cli::try_parse_from([
        "rayshare",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--tls-cert",
        pki.cert.to_str().unwrap(),
        "--tls-key",
        pki.key.to_str().unwrap(),
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--drain-timeout-seconds",
        "1",
    ])
    .unwrap();
    let Sub::Serve(args) = cli.command else {
        panic!("serve")
    };
    let app = rayshare::app::App::build(*args, tokio::runtime::Handle::current())
        .await
        .unwrap();
    let (addr, admin) = app.addresses().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(app.run(async move {
        let _ = stopped.await;
    }));
    let answer = client(&[&pki.ca])
        .post(format!("https://{addr}/mutate"))
        .json(&rayjob_review("in-process"))
        .send()
        .await
        .expect("the in-process server answers");
    assert_eq!(answer.status(), StatusCode::OK);
    let live = reqwest::get(format!("http://{admin}/livez")).await.unwrap();
    assert_eq!(live.status(), StatusCode::OK);
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("run returns after shutdown")
        .unwrap()
        .unwrap();
}
