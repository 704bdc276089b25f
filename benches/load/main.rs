//! End-to-end load benchmark of `rayshare serve` (issue 9).
//!
//! Drives rayshare over real TLS on 127.0.0.1 the way kube-apiserver does (kept-alive
//! connections, HTTP/2 and HTTP/1.1) with AdmissionReviews built from the samples, next
//! to a floor server (axum + rustls, fixed answer), against the local control plane of
//! tests/controlplane. Writes `target/bench/results.json` (and `summary.md`); the plot
//! is drawn by tests/bench/plot.py.
//!
//! Run it with `bash tests/bench/run.sh` (builds the control plane, then runs
//! `cargo bench --bench load` and draws the plot). Under `cargo test` it does nothing.

use rayshare_testkit::load::{cluster, sys};

mod bodies;
mod client;
mod flood;
mod floor;
mod measures;
mod report;
mod results;
mod scenarios;
mod servers;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use data_encoding::BASE64;
use serde_json::{Value, json};

use bodies::{N, Template};
use client::{BodyFn, Pool, Proto, Run};
use results::*;
use sys::Proc;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--floor") {
        return floor::main(&args[1..]);
    }
    // `--report FILE`: rewrite summary.md (beside FILE) from a results.json, no runs.
    if let Some(file) = args
        .iter()
        .position(|a| a == "--report")
        .and_then(|i| args.get(i + 1))
    {
        return rereport(std::path::Path::new(file));
    }
    if !args.iter().any(|a| a == "--bench") {
        eprintln!("load benchmark: skipped outside `cargo bench` (run bash tests/bench/run.sh)");
        return ExitCode::SUCCESS;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let quick = args.iter().any(|a| a == "--quick") || std::env::var_os("BENCH_QUICK").is_some();
    // `--profile KIND[,KIND]`: set up as usual, then record a CPU profile (perf) of
    // rayshare saturated with each kind, instead of the benchmark.
    // `--compare BIN[,BIN...]`: saturate each rayshare binary (one core) with each kind,
    // side by side, instead of the benchmark (to try a change).
    let compare = args
        .iter()
        .position(|a| a == "--compare")
        .and_then(|i| args.get(i + 1))
        .map(|k| k.split(',').map(PathBuf::from).collect::<Vec<_>>());
    // `--memory`: how rayshare's RSS evolves over repeated load (leak or retention?).
    let memory = args.iter().any(|a| a == "--memory");
    // `--flood`: rayshare (default flags) under a flood of ~3 MiB RayJob reviews while pod
    // reviews keep coming (issue 27), instead of the benchmark; writes flood.md.
    let flood = args.iter().any(|a| a == "--flood");
    let profile = args
        .iter()
        .position(|a| a == "--profile")
        .and_then(|i| args.get(i + 1))
        .map(|k| k.split(',').map(String::from).collect::<Vec<_>>());
    Bench::new(quick).run(profile, compare, memory, flood);
    ExitCode::SUCCESS
}

/// How long and how hard each run goes.
struct Settings {
    sat_warmup: Duration,
    sat_measure: Duration,
    lat_warmup: Duration,
    /// Measured window of an open-loop run at a rate.
    lat_measure: fn(f64) -> Duration,
    rates: Vec<f64>,
    /// Requests in flight in a closed-loop (saturation) run.
    concurrency: usize,
    /// HTTP/2: connections (each kube-apiserver instance keeps one to a webhook).
    h2_conns: usize,
    /// HTTP/1.1: kept-alive connections in the pool.
    h1_conns: usize,
    bulk_namespaces: usize,
    bulk_clusters: usize,
    bulk_pods: usize,
}

impl Settings {
    fn new(quick: bool) -> Self {
        if quick {
            return Self {
                sat_warmup: Duration::from_millis(300),
                sat_measure: Duration::from_secs(1),
                lat_warmup: Duration::from_millis(200),
                lat_measure: |_| Duration::from_secs(1),
                rates: vec![500.0, 2000.0, 5000.0],
                concurrency: 64,
                h2_conns: 1,
                h1_conns: 64,
                bulk_namespaces: 10,
                bulk_clusters: 100,
                bulk_pods: 1000,
            };
        }
        Self {
            sat_warmup: Duration::from_millis(700),
            sat_measure: Duration::from_secs(3),
            lat_warmup: Duration::from_millis(500),
            // At least 2,500 samples (p99.9 is then the 3rd-slowest) and 2 s.
            lat_measure: |rate| Duration::from_secs_f64((2500.0 / rate).max(2.0)),
            rates: vec![500.0, 2000.0, 5000.0],
            concurrency: 64,
            h2_conns: 1,
            h1_conns: 64,
            bulk_namespaces: 100,
            bulk_clusters: 1000,
            bulk_pods: 10_000,
        }
    }

    fn conns(&self, proto: Proto) -> usize {
        match proto {
            Proto::H2 => self.h2_conns,
            Proto::H1 => self.h1_conns,
        }
    }
}

/// One kind of admission request.
struct Kind {
    name: &'static str,
    about: String,
    templates: Vec<Arc<Template>>,
    /// The answer rayshare should give: a patch or none.
    expect_patch: bool,
    /// Each request makes an API call (measured separately, at low rates).
    calls_api: bool,
}

impl Kind {
    fn body(&self) -> BodyFn {
        let templates = self.templates.clone();
        Arc::new(move |n| templates[n as usize % templates.len()].render(n))
    }

    fn body_bytes(&self) -> usize {
        self.templates[0].size()
    }
}

struct Server {
    name: &'static str,
    proc: Proc,
    addr: SocketAddr,
    /// rayshare's admin listener (/metrics); the floor has none.
    admin: Option<SocketAddr>,
}

struct Bench {
    settings: Settings,
    quick: bool,
    repo: PathBuf,
    out: PathBuf,
    ca_pem: Vec<u8>,
    cert: PathBuf,
    key: PathBuf,
    kubeconfig: PathBuf,
    rt: tokio::runtime::Runtime,
    kube: kube::Client,
    cpus: Vec<usize>,
    machine: Value,
    /// rayshare, stopped (SIGSTOP) while the floor is measured.
    paused_during_floor: std::cell::Cell<Option<u32>>,
    /// Time left for re-running runs disturbed by other work on the machine.
    retry_budget: std::cell::Cell<Duration>,
    seed: u64,
    instances: usize,
    _controlplane: Proc,
    results: BTreeMap<&'static str, Value>,
    saturation: Vec<Value>,
    latency: Vec<Value>,
    api_paths: Vec<Value>,
}

fn elapsed(start: Instant) -> String {
    format!("{:.0}s", start.elapsed().as_secs_f64())
}

impl Bench {
    fn new(quick: bool) -> Self {
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let out = std::env::var_os("RAYSHARE_BENCH_OUT")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo.join("target/bench"));
        std::fs::create_dir_all(&out).expect("output directory");
        let cpus: Vec<usize> = (0..sys::online_cpus()).collect();
        if cpus.len() < 2 {
            eprintln!("load: only one CPU: the load generator shares it with the servers");
        }

        let certs = rayshare::http::certs::generate(&["127.0.0.1".into()]).expect("certificates");
        let cert_dir = out.join("certs");
        rayshare::http::certs::write(&cert_dir, &certs).expect("writing certificates");

        let cp_bin = std::env::var_os("RAYSHARE_CONTROLPLANE")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let o = Command::new("bash")
                    .arg(repo.join("tests/controlplane/build.sh"))
                    .stderr(Stdio::inherit())
                    .output()
                    .expect("running tests/controlplane/build.sh");
                assert!(o.status.success(), "tests/controlplane/build.sh failed");
                PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())
            });
        let cp_dir = out.join("controlplane");
        let _ = std::fs::remove_dir_all(&cp_dir);
        let log = std::fs::File::create(out.join("controlplane.log")).expect("log file");
        eprintln!("load: starting the local control plane");
        let mut cp = Proc::spawn(
            "rayshare-controlplane",
            Command::new(&cp_bin)
                .arg("--data-dir")
                .arg(&cp_dir)
                .args(["--parent-pid", &std::process::id().to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log),
        );
        sys::wait_for_file(&cp_dir.join("ready"), Duration::from_secs(180), &mut cp);
        let kubeconfig = cp_dir.join("admin.kubeconfig");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let kube = rt.block_on(cluster::client(&kubeconfig));
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        Self {
            settings: Settings::new(quick),
            quick,
            repo,
            out,
            ca_pem: certs.ca_pem.into_bytes(),
            cert: cert_dir.join("tls.crt"),
            key: cert_dir.join("tls.key"),
            kubeconfig,
            rt,
            kube,
            cpus,
            machine: sys::machine(),
            paused_during_floor: std::cell::Cell::new(None),
            retry_budget: std::cell::Cell::new(Duration::from_secs(
                std::env::var("BENCH_RETRY_BUDGET_SECONDS")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(120),
            )),
            seed,
            instances: 0,
            _controlplane: cp,
            results: BTreeMap::new(),
            saturation: Vec::new(),
            latency: Vec::new(),
            api_paths: Vec::new(),
        }
    }

    fn server_cores(&self, cores: usize) -> Vec<usize> {
        self.cpus[..cores.min(self.cpus.len())].to_vec()
    }

    /// One core: the server on CPU 0, the load generator on CPU 1. Two: both on both.
    fn client_cores(&self, cores: usize) -> Vec<usize> {
        if cores == 1 && self.cpus.len() > 1 {
            self.cpus[1..2].to_vec()
        } else {
            self.server_cores(cores)
        }
    }
}
