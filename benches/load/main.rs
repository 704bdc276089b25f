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

mod bodies;
mod client;
mod cluster;
mod floor;
mod report;
mod sys;

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
    let profile = args
        .iter()
        .position(|a| a == "--profile")
        .and_then(|i| args.get(i + 1))
        .map(|k| k.split(',').map(String::from).collect::<Vec<_>>());
    Bench::new(quick).run(profile, compare, memory);
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

        let certs = rayshare::certs::generate(&["127.0.0.1".into()]).expect("certificates");
        let cert_dir = out.join("certs");
        rayshare::certs::write(&cert_dir, &certs).expect("writing certificates");

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

    /// rayshare from this build (or `RAYSHARE_BIN`), with a feature config file or the
    /// defaults.
    fn start_rayshare(&mut self, cores: usize, config: Option<&std::path::Path>) -> Server {
        let bin = std::env::var_os("RAYSHARE_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rayshare")));
        self.start_rayshare_bin(cores, &bin, config)
    }

    fn start_rayshare_bin(
        &mut self,
        cores: usize,
        bin: &std::path::Path,
        config: Option<&std::path::Path>,
    ) -> Server {
        self.instances += 1;
        let port = sys::free_port();
        let admin = sys::free_port();
        let log_path = self.out.join(format!("rayshare-{}.log", self.instances));
        let log = std::fs::File::create(&log_path).expect("log file");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
        let admin_addr: SocketAddr = format!("127.0.0.1:{admin}").parse().expect("address");
        sys::pin(&self.server_cores(cores));
        let mut cmd = Command::new(bin);
        cmd.arg("serve");
        if let Some(config) = config {
            cmd.arg("--config").arg(config);
        }
        let proc = Proc::spawn(
            "rayshare",
            cmd.args(["--listen", &addr.to_string()])
                .args(["--admin-listen", &admin_addr.to_string()])
                .arg("--tls-cert")
                .arg(&self.cert)
                .arg("--tls-key")
                .arg(&self.key)
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .args(["--pod-namespace", "rayshare-system"])
                .args(["--pod-name", &format!("rayshare-bench-{}", self.instances)])
                // As the Helm chart runs it.
                .args(["--log-format", "json", "--log-level", "info"])
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log file"))
                .stderr(log),
        );
        sys::pin(&self.cpus);
        let mut server = Server {
            name: "rayshare",
            proc,
            addr,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while sys::http_get_status(admin_addr, "/readyz") != Some(200) {
            server.proc.check_alive();
            assert!(
                Instant::now() < deadline,
                "rayshare not ready in 60 s (see {})",
                log_path.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    fn start_floor(&mut self, cores: usize) -> Server {
        let port = sys::free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
        sys::pin(&self.server_cores(cores));
        let proc = Proc::spawn(
            "floor",
            Command::new(std::env::current_exe().expect("own path"))
                .args(["--floor", "--listen", &addr.to_string()])
                .arg("--tls-cert")
                .arg(&self.cert)
                .arg("--tls-key")
                .arg(&self.key)
                .stdin(Stdio::null()),
        );
        sys::pin(&self.cpus);
        let mut server = Server {
            name: "floor",
            proc,
            addr,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(addr).is_err() {
            server.proc.check_alive();
            assert!(Instant::now() < deadline, "floor not listening");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// Sends one request on a fresh connection; the AdmissionReview answered.
    fn probe(&self, server: &Server, body: bytes::Bytes) -> Value {
        self.rt.block_on(async {
            let pool = Pool::connect(server.addr, &self.ca_pem, Proto::H2, 1)
                .await
                .unwrap_or_else(|e| panic!("connecting to {}: {e}", server.name));
            let answer = pool
                .send(body)
                .await
                .unwrap_or_else(|e| panic!("{} answered: {e}", server.name));
            serde_json::from_slice(&answer).expect("a JSON answer")
        })
    }

    fn api_requests(&self) -> BTreeMap<String, f64> {
        self.rt.block_on(cluster::api_requests(&self.kube))
    }

    fn run(mut self, profile: Option<Vec<String>>, compare: Option<Vec<PathBuf>>, memory: bool) {
        let started = Instant::now();
        let s = &self.settings;
        let (bulk_ns, bulk_rc, bulk_pods) = (s.bulk_namespaces, s.bulk_clusters, s.bulk_pods);
        // The CRDs from their Go modules (tests/tools/crds.sh prints the directory).
        let crd_dir = std::env::var_os("RAYSHARE_CRDS")
            .map(PathBuf::from)
            .unwrap_or_else(|| cluster::crds_from_modules(&self.repo));
        self.rt.block_on(async {
            cluster::install_crds(&self.kube, &crd_dir).await;
            cluster::create_namespace(&self.kube, "bench", &[("rayshare.io/enabled", "true")])
                .await;
            cluster::create_namespace(&self.kube, "rayshare-system", &[]).await;
        });

        // Fresh servers, one core each, idle.
        // Defaults, except that a PodGroup whose pod never came counts as orphaned after
        // 5 s (not 2 min) and the orphan pass runs every 5 s (not 30 s): so the pass can
        // be measured below, in seconds rather than minutes.
        let config = self.out.join("rayshare-config.yaml");
        std::fs::write(
            &config,
            "podGroups:\n  orphanGraceSeconds: 5\n  reconcileIntervalSeconds: 5\n",
        )
        .expect("writing the config");
        let mut ray = self.start_rayshare(1, Some(&config));
        let floor = self.start_floor(1);
        std::thread::sleep(Duration::from_secs(2));
        let calls_at_start = self.api_requests();
        let (ray_idle, _) = sys::rss_kib(ray.proc.pid());
        let (floor_idle, _) = sys::rss_kib(floor.proc.pid());
        eprintln!(
            "load: [{}] idle RSS: rayshare {:.1} MiB, floor {:.1} MiB",
            elapsed(started),
            mib(ray_idle),
            mib(floor_idle)
        );

        // The objects, as the API server stores them.
        let sample = |name: &str| -> Value {
            let text = std::fs::read_to_string(self.repo.join("deploy/samples").join(name))
                .expect("sample");
            rayshare::offline::documents(&text).expect("sample YAML")[0].clone()
        };
        let dry = |object: &Value| -> Value {
            bodies::as_admitted(
                self.rt
                    .block_on(cluster::create(&self.kube, "bench", object, true)),
            )
        };
        let volcano_pod = dry(&sample("volcano-pod.yaml"));
        let rayjob_a = dry(&sample("rayjob-run-a.yaml"));
        let rayjob_b = dry(&sample("rayjob-run-b.yaml"));

        // The shared cluster of run-a's config, made by rayshare from the sample itself.
        let create_job = Template::new(
            &bodies::review(&rayjob_a, "rayjobs", "bench", false),
            self.seed,
        );
        let answer = self.probe(&ray, create_job.render(u64::MAX >> 1));
        let shared = shared_cluster_name(&answer)
            .unwrap_or_else(|| panic!("rayshare did not rewrite the sample RayJob: {answer}"));
        let stored_cluster = self.rt.block_on(cluster::get(
            &self.kube,
            "bench",
            &json!({"kind": "RayCluster"}),
            &shared,
        ));
        eprintln!("load: shared RayCluster {shared} created through rayshare");

        let worker_text =
            std::fs::read_to_string(self.repo.join("tests/bench/ray-worker-pod.yaml"))
                .expect("tests/bench/ray-worker-pod.yaml");
        let worker = |cluster: &str, group: &str, namespace: &str| -> Value {
            let text = worker_text
                .replace("{{cluster}}", cluster)
                .replace("{{group}}", group)
                .replace("{{namespace}}", namespace);
            let object = rayshare::offline::documents(&text).expect("worker pod YAML")[0].clone();
            let mut pod = bodies::as_admitted(
                self.rt
                    .block_on(cluster::create(&self.kube, namespace, &object, true)),
            );
            pod["metadata"]["name"] = json!(format!("{cluster}-{group}-worker-{N}"));
            pod
        };
        let worker_pod = worker(&shared, "cpu", "bench");

        // A multi-host group (4 hosts per replica) for the claim path.
        let mut tpu = clean_cluster(&stored_cluster, "bench-tpu", "bench");
        tpu["spec"]["workerGroupSpecs"][0]["groupName"] = json!("tpu");
        tpu["spec"]["workerGroupSpecs"][0]["numOfHosts"] = json!(4);
        self.rt
            .block_on(cluster::create(&self.kube, "bench", &tpu, false));
        let multihost_pod = worker("bench-tpu", "tpu", "bench");

        let template = |object: &Value, resource: &str, dry_run: bool| {
            Arc::new(Template::new(
                &bodies::review(object, resource, "bench", dry_run),
                self.seed,
            ))
        };
        let with_n = |object: &Value| {
            let mut o = object.clone();
            let name = o["metadata"]["name"].as_str().unwrap_or("job").to_string();
            o["metadata"]["name"] = json!(format!("{name}-{N}"));
            o
        };
        let mut grouped_pod = volcano_pod.clone();
        rayshare::labels::set(
            &mut grouped_pod,
            rayshare::labels::Meta::Annotations,
            rayshare::labels::GROUP_NAME,
            "train-7f3k2-pg",
        );
        let kinds = vec![
            Kind {
                name: "pod-unchanged",
                about: "deploy/samples/volcano-pod.yaml already naming its PodGroup (as a Volcano Job's pods do): nothing to change".into(),
                templates: vec![template(&grouped_pod, "pods", false)],
                expect_patch: false,
                calls_api: false,
            },
            Kind {
                name: "pod-podgroup",
                about: "deploy/samples/volcano-pod.yaml, dryRun: true: PodGroup planned and patched in, the create skipped (measured separately: pod-podgroup-create)".into(),
                templates: vec![template(&volcano_pod, "pods", true)],
                expect_patch: true,
                calls_api: false,
            },
            Kind {
                name: "worker-pod",
                about: format!("KubeRay worker pod (tests/bench/ray-worker-pod.yaml) of single-host group cpu of the cached shared cluster {shared}: cache lookup, no claim"),
                templates: vec![template(&worker_pod, "pods", false)],
                expect_patch: false,
                calls_api: false,
            },
            Kind {
                name: "rayjob-cached",
                about: format!("deploy/samples/rayjob-run-{{a,b}}.yaml alternately (unique names), dryRun: false, their shared cluster {shared} already cached: rewrite, no API call"),
                templates: vec![
                    template(&with_n(&rayjob_a), "rayjobs", false),
                    template(&with_n(&rayjob_b), "rayjobs", false),
                ],
                expect_patch: true,
                calls_api: false,
            },
        ];
        let separate = vec![
            Kind {
                name: "pod-podgroup-create",
                about: "deploy/samples/volcano-pod.yaml, dryRun: false: each request creates its PodGroup in the API server".into(),
                templates: vec![template(&volcano_pod, "pods", false)],
                expect_patch: true,
                calls_api: true,
            },
            Kind {
                name: "worker-pod-multihost",
                about: "KubeRay worker pod of a 4-host group, dryRun: true: the claim path lists the group's claim Leases (one API call), creates nothing".into(),
                templates: vec![template(&multihost_pod, "pods", true)],
                expect_patch: true,
                calls_api: true,
            },
        ];

        // Wait until rayshare's cache has both clusters.
        self.wait_until(&ray, "the fixture clusters are cached", &kinds[2], |a| {
            warnings(a).is_empty()
        });
        self.wait_until(&ray, "bench-tpu is cached", &separate[1], has_patch);

        // Large caches: many RayClusters, namespaces and pods (not in rayshare's namespaces).
        let t = Instant::now();
        self.rt.block_on(async {
            for i in 0..bulk_ns {
                cluster::create_namespace(&self.kube, &format!("bulk-{i:02}"), &[]).await;
            }
        });
        let mut objects = Vec::new();
        for i in 0..bulk_rc {
            let mut c = clean_cluster(
                &stored_cluster,
                &format!("bulk-rc-{i:04}"),
                &format!("bulk-{:02}", i % bulk_ns),
            );
            rayshare::labels::set(
                &mut c,
                rayshare::labels::Meta::Annotations,
                rayshare::labels::CONFIG_DIGEST,
                &format!("{:064x}", i as u128 * 0x9e37_79b9_7f4a_7c15),
            );
            objects.push(c);
        }
        for i in 0..bulk_pods {
            let mut p = volcano_pod.clone();
            let meta = p["metadata"].as_object_mut().expect("metadata");
            meta.remove("generateName");
            meta.remove("managedFields");
            meta.insert("name".into(), json!(format!("bulk-pod-{i:05}")));
            meta.insert(
                "namespace".into(),
                json!(format!("bulk-{:02}", i % bulk_ns)),
            );
            objects.push(p);
        }
        let failed = self
            .rt
            .block_on(cluster::create_many(&self.kube, objects, 32));
        assert_eq!(failed, 0, "{failed} bulk objects could not be created");
        eprintln!(
            "load: [{}] created {bulk_ns} namespaces, {bulk_rc} RayClusters, {bulk_pods} pods in {:.1}s",
            elapsed(started),
            t.elapsed().as_secs_f64()
        );
        let probes: Vec<usize> = (0..10).map(|k| bulk_rc - 1 - k * bulk_rc / 10).collect();
        for &i in &probes {
            let ns = format!("bulk-{:02}", i % bulk_ns);
            let mut pod = worker_pod.clone();
            pod["metadata"]["labels"]["ray.io/cluster"] = json!(format!("bulk-rc-{i:04}"));
            let kind = Kind {
                name: "probe",
                about: String::new(),
                templates: vec![Arc::new(Template::new(
                    &bodies::review(&pod, "pods", &ns, true),
                    self.seed,
                ))],
                expect_patch: false,
                calls_api: false,
            };
            self.wait_until(&ray, "the bulk clusters are cached", &kind, |a| {
                warnings(a).is_empty()
            });
        }
        std::thread::sleep(Duration::from_secs(3));
        let (ray_large, _) = sys::rss_kib(ray.proc.pid());
        eprintln!(
            "load: [{}] RSS with {bulk_rc} RayClusters and {} namespaces cached: {:.1} MiB",
            elapsed(started),
            bulk_ns + 2,
            mib(ray_large)
        );

        // What each kind gets from rayshare.
        let mut kind_info = serde_json::Map::new();
        for kind in kinds.iter().chain(&separate) {
            let answer = self.probe(&ray, kind.body()(1));
            let summary = answer_summary(&answer);
            let ok = has_patch(&answer) == kind.expect_patch;
            if !ok {
                eprintln!(
                    "load: WARNING: {} answered unexpectedly: {answer}",
                    kind.name
                );
            }
            kind_info.insert(
                kind.name.into(),
                json!({
                    "about": kind.about,
                    "body_bytes": kind.body_bytes(),
                    "rayshare_answer": summary,
                    "as_expected": ok,
                }),
            );
        }
        let floor_answer = self.probe(&floor, kinds[0].body()(1));
        assert_eq!(floor_answer["response"]["allowed"], true);

        if memory {
            self.memory(&ray, &kinds);
            return;
        }
        if let Some(bins) = compare {
            self.compare(&floor, &kinds, &bins);
            return;
        }
        if let Some(profile) = profile {
            self.profile(&ray, &kinds, &separate, &profile);
            return;
        }

        // Other work on the machine skews everything: wait (a while) for it to stop.
        let background = sys::wait_for_quiet(0.15, Duration::from_secs(180));
        self.results
            .insert("background_cores_before_runs", json!(round3(background)));
        if background >= 0.15 {
            eprintln!("load: WARNING: the machine is busy ({background:.2} cores) with other work");
        }

        // One core: servers on CPU 0, load generator on CPU 1.
        let load = self.load_runtime(1);

        // The orphan-PodGroup pass, on purpose: the probe of pod-podgroup-create above made
        // a group whose pod never comes; the leader's next pass lists every pod of the
        // cluster to find that out. Admission goes on meanwhile (1,000 req/s).
        let calls = self.api_requests();
        let (rss_before, _) = sys::rss_kib(ray.proc.pid());
        let pool = self.connect(&load, &ray, Proto::H2);
        let run = load.block_on(client::open_loop(
            pool,
            kinds[0].body(),
            1000.0,
            Duration::ZERO,
            Duration::from_secs(if self.quick { 8 } else { 14 }),
            ray.proc.pid(),
        ));
        let pages = cluster::delta(&calls, &self.api_requests())
            .get("LIST pods")
            .copied()
            .unwrap_or(0);
        let (rss_after, _) = sys::rss_kib(ray.proc.pid());
        eprintln!(
            "load: [{}] orphan-PodGroup pass ({pages} pages of pods listed): RSS {:.1} -> {:.1} MiB; pod-unchanged at 1000/s meanwhile: p50 {:.2} p99 {:.2} max {:.2} ms",
            elapsed(started),
            mib(rss_before),
            mib(rss_after),
            run.pct_us(0.5) / 1000.0,
            run.pct_us(0.99) / 1000.0,
            run.pct_us(1.0) / 1000.0
        );
        self.results.insert(
            "orphan_pass",
            json!({
                "about": "one PodGroup without its pod; rayshare's leader lists every pod of the cluster (metadata, pages of 500, all kept) to check; orphanGraceSeconds 5 and reconcileIntervalSeconds 5 for this instance",
                "pod_list_pages": pages,
                "rss_kib_before": rss_before,
                "rss_kib_after": rss_after,
                "admission_meanwhile": {
                    "kind": kinds[0].name,
                    "offered_rps": 1000,
                    "protocol": "h2",
                    "p50_us": round1(run.pct_us(0.5)),
                    "p99_us": round1(run.pct_us(0.99)),
                    "p999_us": round1(run.pct_us(0.999)),
                    "max_us": round1(run.pct_us(1.0)),
                    "errors": run.errors,
                },
            }),
        );

        self.paused_during_floor.set(Some(ray.proc.pid()));
        for proto in [Proto::H2, Proto::H1] {
            for kind in &kinds {
                for server in [&ray, &floor] {
                    self.saturate(&load, server, kind, proto, 1);
                }
            }
        }
        for proto in [Proto::H2, Proto::H1] {
            for kind in &kinds {
                for server in [&ray, &floor] {
                    for &rate in &self.settings.rates.clone() {
                        self.open(&load, server, kind, proto, rate, 1);
                    }
                }
            }
        }
        drop(load);
        let (ray_after, ray_hwm) = sys::rss_kib(ray.proc.pid());
        // rayshare's orphan-PodGroup pass lists every pod of the cluster (the probe of
        // pod-podgroup-create left one orphan); nothing else here lists pods.
        let pod_lists = cluster::delta(&calls_at_start, &self.api_requests())
            .get("LIST pods")
            .copied()
            .unwrap_or(0);
        let (floor_after, floor_hwm) = sys::rss_kib(floor.proc.pid());
        eprintln!("load: [{}] one-core runs done", elapsed(started));

        // Two cores: fresh servers (rayshare lists the large caches at start).
        ray.proc.check_alive();
        ray.proc.stop();
        floor.proc.stop();
        let ray2 = self.start_rayshare(2, None);
        let floor2 = self.start_floor(2);
        self.paused_during_floor.set(Some(ray2.proc.pid()));
        std::thread::sleep(Duration::from_secs(3));
        let (ray_fresh_large, ray_fresh_hwm) = sys::rss_kib(ray2.proc.pid());
        let load = self.load_runtime(2);
        for proto in [Proto::H2, Proto::H1] {
            for kind in &kinds {
                for server in [&ray2, &floor2] {
                    self.saturate(&load, server, kind, proto, 2);
                }
            }
        }
        drop(load);
        eprintln!("load: [{}] two-core runs done", elapsed(started));
        let (ray2_after, ray2_hwm) = sys::rss_kib(ray2.proc.pid());
        ray2.proc.stop();
        floor2.proc.stop();

        self.paused_during_floor.set(None);

        // The paths with API calls, at low rates, one core.
        let ray3 = self.start_rayshare(1, None);
        let load = self.load_runtime(1);
        let low_rates: Vec<f64> = if self.quick {
            vec![100.0]
        } else {
            vec![100.0, 300.0]
        };
        for kind in &separate {
            for &rate in &low_rates {
                self.open(&load, &ray3, kind, Proto::H2, rate, 1);
            }
        }
        drop(load);
        ray3.proc.stop();
        eprintln!("load: [{}] API-path runs done", elapsed(started));

        self.results.insert(
            "rss_kib",
            json!({
                "rayshare": {
                    "idle_fresh": ray_idle,
                    "large_caches_incremental": ray_large,
                    "after_one_core_runs": ray_after,
                    "peak_after_one_core_runs": ray_hwm,
                    "pod_list_pages_during_one_core_runs": pod_lists,
                    "after_orphan_pass": self.results.get("orphan_pass").map(|o| o["rss_kib_after"].clone()),
                    "large_caches_fresh_start": ray_fresh_large,
                    "large_caches_fresh_start_peak": ray_fresh_hwm,
                    "after_two_core_runs": ray2_after,
                    "peak_after_two_core_runs": ray2_hwm,
                },
                "floor": {
                    "idle_fresh": floor_idle,
                    "after_one_core_runs": floor_after,
                    "peak_after_one_core_runs": floor_hwm,
                },
                "large_caches": {
                    "ray_clusters": bulk_rc + 2,
                    "namespaces": bulk_ns + 2,
                    "pods": bulk_pods,
                    "note": "rayshare caches RayClusters (spec reduced to worker groups) and Namespaces, not pods; but its leader's reconcilers list RayClusters and RayJobs every 30 s, and the orphan-PodGroup pass lists every pod of the cluster (metadata, 500 per page, all pages kept) whenever a PodGroup has been without its pod for 2 min: see pod_list_pages_during_one_core_runs",
                },
            }),
        );
        self.results.insert("kinds", Value::Object(kind_info));
        self.finish(started);
    }

    /// Records `perf record -g` of rayshare (one core) saturated by each kind, and prints
    /// the hottest functions.
    fn profile(&mut self, ray: &Server, kinds: &[Kind], separate: &[Kind], which: &[String]) {
        let load = self.load_runtime(1);
        for name in which {
            let kind = kinds
                .iter()
                .chain(separate)
                .find(|k| k.name == name)
                .unwrap_or_else(|| panic!("no kind {name}"));
            let data = self.out.join(format!("perf-{name}.data"));
            let secs = 8;
            let mut perf = Command::new("perf")
                .args(["record", "-F", "997", "--call-graph", "dwarf,16384", "-o"])
                .arg(&data)
                .args([
                    "-p",
                    &ray.proc.pid().to_string(),
                    "--",
                    "sleep",
                    &secs.to_string(),
                ])
                .stdout(Stdio::null())
                .spawn()
                .expect("perf record");
            let pool = self.connect(&load, ray, Proto::H2);
            let run = load.block_on(client::closed_loop(
                pool,
                kind.body(),
                self.settings.concurrency,
                Duration::from_millis(500),
                Duration::from_secs(secs - 1),
                ray.proc.pid(),
            ));
            let _ = perf.wait();
            eprintln!(
                "profile {name}: {:.0} req/s, {:.1} µs CPU/req; perf data in {}\n  perf report -i {} --no-children --percent-limit 1 --stdio",
                run.throughput,
                run.server_cpu_us_per_req(),
                data.display(),
                data.display()
            );
        }
    }

    /// RSS of rayshare (one core) after rounds of saturation and of overload.
    fn memory(&mut self, ray: &Server, kinds: &[Kind]) {
        let load = self.load_runtime(1);
        let rss = |what: &str| {
            let (rss, hwm) = sys::rss_kib(ray.proc.pid());
            eprintln!(
                "memory: {what}: RSS {:.1} MiB (peak {:.1})",
                mib(rss),
                mib(hwm)
            );
        };
        rss("start");
        let idle: u64 = std::env::var("BENCH_MEMORY_IDLE_SECONDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(70);
        let mut calls = self.api_requests();
        for i in 1..=idle / 10 {
            std::thread::sleep(Duration::from_secs(10));
            let now = self.api_requests();
            let lists: Vec<String> = cluster::delta(&calls, &now)
                .into_iter()
                .filter(|(k, _)| k.starts_with("LIST"))
                .map(|(k, v)| format!("{k} x{v}"))
                .collect();
            calls = now;
            rss(&format!(
                "idle {}s (API lists: {})",
                i * 10,
                lists.join(", ")
            ));
        }
        // Protocols alternate, so a leak shows as growth across rounds of either.
        let rounds = [
            (1, Proto::H2),
            (2, Proto::H1),
            (3, Proto::H2),
            (4, Proto::H1),
        ];
        for (round, proto) in rounds {
            for kind in kinds {
                let pool = self.connect(&load, ray, proto);
                let run = load.block_on(client::closed_loop(
                    pool,
                    kind.body(),
                    64,
                    Duration::ZERO,
                    Duration::from_secs(3),
                    ray.proc.pid(),
                ));
                rss(&format!(
                    "round {round}, {} {} saturated ({} requests)",
                    proto.name(),
                    kind.name,
                    run.completed()
                ));
            }
        }
        for (round, proto) in rounds {
            let pool = self.connect(&load, ray, proto);
            let run = load.block_on(client::open_loop(
                pool,
                kinds[3].body(),
                6000.0,
                Duration::ZERO,
                Duration::from_secs(2),
                ray.proc.pid(),
            ));
            rss(&format!(
                "overload {round}: {} {} at 6000/s for 2 s (p99 {:.0} ms)",
                proto.name(),
                kinds[3].name,
                run.pct_us(0.99) / 1000.0
            ));
            std::thread::sleep(Duration::from_secs(5));
            rss(&format!("overload {round} + 5 s idle"));
        }
    }

    /// Saturation (one core, both protocols) of several rayshare binaries and the floor.
    fn compare(&mut self, floor: &Server, kinds: &[Kind], bins: &[PathBuf]) {
        let servers: Vec<Server> = bins
            .iter()
            .map(|b| self.start_rayshare_bin(1, b, None))
            .collect();
        std::thread::sleep(Duration::from_secs(2));
        let load = self.load_runtime(1);
        for kind in kinds {
            for proto in [Proto::H2, Proto::H1] {
                for (i, server) in servers.iter().enumerate() {
                    eprint!("  [{}] ", bins[i].display());
                    self.saturate(&load, server, kind, proto, 1);
                }
                self.saturate(&load, floor, kind, proto, 1);
            }
        }
    }

    fn load_runtime(&self, cores: usize) -> tokio::runtime::Runtime {
        let client = self.client_cores(cores);
        // The main thread drives block_on and paces open-loop runs: it stays there too.
        sys::pin(&client);
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(client.len())
            .enable_all()
            .build()
            .expect("load runtime")
    }

    fn wait_until(&self, server: &Server, what: &str, kind: &Kind, ok: impl Fn(&Value) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let answer = self.probe(server, kind.body()(0));
            if ok(&answer) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "waited 120 s for {what}; last answer: {answer}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn connect(&self, load: &tokio::runtime::Runtime, server: &Server, proto: Proto) -> Arc<Pool> {
        let conns = self.settings.conns(proto);
        Arc::new(
            load.block_on(Pool::connect(server.addr, &self.ca_pem, proto, conns))
                .unwrap_or_else(|e| panic!("connecting to {}: {e}", server.name)),
        )
    }

    /// Runs `run` (noting rayshare's API calls); when something else kept the machine
    /// busy (`quiet`: more than NOISE cores), waits for quiet and runs it again, up to
    /// BENCH_NOISE_RETRIES (2) times, keeping the quietest run.
    fn measure(
        &self,
        server: &Server,
        quiet: bool,
        run: impl Fn() -> Run,
    ) -> (Run, Option<BTreeMap<String, u64>>, u32) {
        const NOISE: f64 = 0.25;
        let retries: u32 = std::env::var("BENCH_NOISE_RETRIES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2);
        let mut best: Option<(Run, Option<BTreeMap<String, u64>>)> = None;
        let mut attempts = 0;
        // The idle rayshare has background work (reconcilers, watches): not the floor's.
        let paused = (server.name == "floor").then_some(self.paused_during_floor.get());
        let signal = |sig| {
            if let Some(Some(pid)) = paused {
                // SAFETY: signalling our own child by pid.
                unsafe {
                    libc::kill(pid as i32, sig);
                }
            }
        };
        while attempts <= retries {
            attempts += 1;
            let before = (server.name == "rayshare").then(|| self.api_requests());
            signal(libc::SIGSTOP);
            let r = run();
            signal(libc::SIGCONT);
            let api = before.map(|b| cluster::delta(&b, &self.api_requests()));
            let other = r.other_cores();
            if best.as_ref().is_none_or(|(b, _)| other < b.other_cores()) {
                best = Some((r, api));
            }
            let budget_left = self.retry_budget.get() > Duration::ZERO;
            if !quiet || other <= NOISE || attempts > retries || !budget_left {
                break;
            }
            eprintln!(
                "  .. other processes used {other:.2} cores during that run: waiting for quiet, then again"
            );
            let t = Instant::now();
            sys::wait_for_quiet(0.15, Duration::from_secs(20));
            self.retry_budget.set(
                self.retry_budget
                    .get()
                    .saturating_sub(t.elapsed() + Duration::from_secs(5)),
            );
        }
        let (r, api) = best.expect("at least one run");
        (r, api, attempts)
    }

    fn saturate(
        &mut self,
        load: &tokio::runtime::Runtime,
        server: &Server,
        kind: &Kind,
        proto: Proto,
        cores: usize,
    ) {
        let s = &self.settings;
        let (run, api, attempts) = self.measure(server, true, || {
            let pool = self.connect(load, server, proto);
            load.block_on(client::closed_loop(
                pool,
                kind.body(),
                s.concurrency,
                s.sat_warmup,
                s.sat_measure,
                server.proc.pid(),
            ))
        });
        eprintln!(
            "  saturation {:>8} {cores} core {:>8} {:<20} {:>7.0} req/s  p99 {:>7.0} µs  server {:>5.1} µs/req ({:.2} cores)  client {:.2}  other {:.2} cores{}",
            proto.name(),
            server.name,
            kind.name,
            run.throughput,
            run.pct_us(0.99),
            run.server_cpu_us_per_req(),
            run.server_cores(),
            run.client_cores(),
            run.other_cores(),
            errors_note(&run)
        );
        let mut entry = run_json(&run, server.name, kind.name, proto, cores);
        entry["attempts"] = json!(attempts);
        entry["server_rss_kib_after"] = json!(sys::rss_kib(server.proc.pid()).0);
        entry["concurrency"] = json!(s.concurrency);
        entry["connections"] = json!(s.conns(proto));
        if let Some(api) = api {
            entry["api_admission_calls"] = json!(cluster::admission_calls(&api));
            entry["api_requests"] = json!(api);
        }
        self.saturation.push(entry);
    }

    fn open(
        &mut self,
        load: &tokio::runtime::Runtime,
        server: &Server,
        kind: &Kind,
        proto: Proto,
        rate: f64,
        cores: usize,
    ) {
        let s = &self.settings;
        // The API paths keep the control plane busy: that is not noise.
        let quiet = !kind.calls_api;
        let (run, api, attempts) = self.measure(server, quiet, || {
            let pool = self.connect(load, server, proto);
            load.block_on(client::open_loop(
                pool,
                kind.body(),
                rate,
                s.lat_warmup,
                (s.lat_measure)(rate),
                server.proc.pid(),
            ))
        });
        eprintln!(
            "  latency {:>8} {cores} core {:>8} {:<20} @{:>5.0}/s: p50 {:>6.0} p99 {:>6.0} p99.9 {:>7.0} µs  server {:>5.1} µs/req  lag p99 {:.0} µs  other {:.2} cores{}",
            proto.name(),
            server.name,
            kind.name,
            rate,
            run.pct_us(0.5),
            run.pct_us(0.99),
            run.pct_us(0.999),
            run.server_cpu_us_per_req(),
            client::percentile(&run.send_lag, 0.99) / 1000.0,
            run.other_cores(),
            errors_note(&run)
        );
        let mut entry = run_json(&run, server.name, kind.name, proto, cores);
        entry["attempts"] = json!(attempts);
        entry["server_rss_kib_after"] = json!(sys::rss_kib(server.proc.pid()).0);
        entry["offered_rps"] = json!(rate);
        entry["connections"] = json!(s.conns(proto));
        entry["send_lag_p99_us"] = json!(round1(client::percentile(&run.send_lag, 0.99) / 1000.0));
        if let Some(api) = api {
            let calls = cluster::admission_calls(&api);
            entry["api_admission_calls"] = json!(calls);
            entry["api_calls_per_request"] = json!(round3(
                calls as f64 / (run.completed() + run.errors).max(1) as f64
            ));
            entry["api_requests"] = json!(api);
        }
        if kind.calls_api {
            self.api_paths.push(entry);
        } else {
            self.latency.push(entry);
        }
    }

    fn finish(mut self, started: Instant) {
        let s = &self.settings;
        let results = json!({
            "benchmark": "rayshare load benchmark (issue 9): bash tests/bench/run.sh",
            "quick": self.quick,
            "machine": self.machine,
            "settings": {
                "saturation": format!("closed loop, {} requests in flight, {:?} warm-up, {:?} measured", s.concurrency, s.sat_warmup, s.sat_measure),
                "latency": format!("open loop at fixed rates (latency from each request's due time), {:?} warm-up, >= {:?} measured", s.lat_warmup, (s.lat_measure)(1e9)),
                "h2": format!("{} connection(s), multiplexed", s.h2_conns),
                "http1": format!("{} kept-alive connections", s.h1_conns),
                "one_core": "server pinned to CPU 0, load generator to CPU 1",
                "two_cores": "server and load generator both on CPUs 0-1 (they compete)",
                "rayshare": "rayshare serve, default feature config (first instance: podGroups orphanGraceSeconds/reconcileIntervalSeconds 5, see orphan_pass), --log-format json --log-level info (as the Helm chart), admin kubeconfig of the local control plane",
                "floor": "axum + rustls (ring, TLS 1.2/1.3, ALPN h2/http1.1, same certificate), reads the body, answers a fixed AdmissionReview",
            },
            "kinds": self.results.remove("kinds"),
            "saturation": self.saturation,
            "latency": self.latency,
            "api_paths": self.api_paths,
            "rss_kib": self.results.remove("rss_kib"),
            "background_cores_before_runs": self.results.remove("background_cores_before_runs"),
            "orphan_pass": self.results.remove("orphan_pass"),
            "micro": micro_results(&self.repo),
        });
        let mut results = results;
        let (summary, targets) = report::summarize(&results);
        results["targets"] = targets;
        let path = self.out.join("results.json");
        std::fs::write(&path, serde_json::to_string_pretty(&results).expect("JSON"))
            .expect("writing results.json");
        std::fs::write(self.out.join("summary.md"), &summary).expect("writing summary.md");
        println!("{summary}");
        eprintln!(
            "load: [{}] wrote {} and summary.md",
            elapsed(started),
            path.display()
        );
    }
}

fn rereport(file: &std::path::Path) -> ExitCode {
    let text = std::fs::read_to_string(file).expect("reading results.json");
    let mut results: Value = serde_json::from_str(&text).expect("results.json is JSON");
    let (summary, targets) = report::summarize(&results);
    results["targets"] = targets;
    std::fs::write(file, serde_json::to_string_pretty(&results).expect("JSON"))
        .expect("writing results.json");
    let dir = file.parent().unwrap_or(std::path::Path::new("."));
    std::fs::write(dir.join("summary.md"), &summary).expect("writing summary.md");
    println!("{summary}");
    ExitCode::SUCCESS
}

/// The criterion results of `cargo bench --bench mutate`, when it ran before.
fn micro_results(repo: &std::path::Path) -> Value {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("target"))
        .join("criterion");
    let read = |p: PathBuf| -> Option<Value> {
        serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let new = entry.path().join("new");
        let (Some(b), Some(e)) = (
            read(new.join("benchmark.json")),
            read(new.join("estimates.json")),
        ) else {
            continue;
        };
        out.push(json!({
            "name": b["full_id"],
            "mean_ns": e["mean"]["point_estimate"].as_f64().map(|v| v.round()),
            "median_ns": e["median"]["point_estimate"].as_f64().map(|v| v.round()),
        }));
    }
    out.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Value::Array(out)
}

fn errors_note(run: &Run) -> String {
    match &run.first_error {
        Some(e) => format!("  ERRORS {} (first: {e})", run.errors),
        None => String::new(),
    }
}

fn round1(v: f64) -> f64 {
    if v.is_finite() {
        (v * 10.0).round() / 10.0
    } else {
        -1.0
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn run_json(run: &Run, server: &str, kind: &str, proto: Proto, cores: usize) -> Value {
    json!({
        "server": server,
        "kind": kind,
        "protocol": proto.name(),
        "cores": cores,
        "throughput_rps": run.throughput.round(),
        "completed": run.completed(),
        "errors": run.errors,
        "first_error": run.first_error,
        "p50_us": round1(run.pct_us(0.5)),
        "p99_us": round1(run.pct_us(0.99)),
        "p999_us": round1(run.pct_us(0.999)),
        "max_us": round1(run.pct_us(1.0)),
        "server_cpu_us_per_req": round1(run.server_cpu_us_per_req()),
        "server_cores_busy": round3(run.server_cores()),
        "client_cores_busy": round3(run.client_cores()),
        "other_cores_busy": round3(run.other_cores()),
        "window_s": round3(run.window.as_secs_f64()),
    })
}

fn patch_ops(answer: &Value) -> Vec<Value> {
    answer["response"]["patch"]
        .as_str()
        .and_then(|p| BASE64.decode(p.as_bytes()).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

fn has_patch(answer: &Value) -> bool {
    !patch_ops(answer).is_empty()
}

fn warnings(answer: &Value) -> Vec<String> {
    answer["response"]["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(String::from))
        .collect()
}

fn answer_summary(answer: &Value) -> Value {
    let ops = patch_ops(answer);
    json!({
        "allowed": answer["response"]["allowed"],
        "patch_ops": ops.len(),
        "patch_paths": ops.iter().map(|o| o["path"].clone()).collect::<Vec<_>>(),
        "warnings": warnings(answer),
    })
}

fn shared_cluster_name(answer: &Value) -> Option<String> {
    patch_ops(answer).iter().find_map(|op| {
        let path = op["path"].as_str()?;
        if path == "/spec/clusterSelector" {
            op["value"]["ray.io/cluster"].as_str().map(String::from)
        } else if path == "/spec/clusterSelector/ray.io~1cluster" {
            op["value"].as_str().map(String::from)
        } else {
            None
        }
    })
}

/// A stored RayCluster as a new object named `name` in `namespace`.
fn clean_cluster(stored: &Value, name: &str, namespace: &str) -> Value {
    let mut c = stored.clone();
    let meta = c["metadata"].as_object_mut().expect("metadata");
    for key in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
        "ownerReferences",
    ] {
        meta.remove(key);
    }
    meta.insert("name".into(), json!(name));
    meta.insert("namespace".into(), json!(namespace));
    c.as_object_mut().expect("object").remove("status");
    c
}
