//! End-to-end harness: a real kube-apiserver + etcd (tests/controlplane), the real CRDs
//! (from the Go modules of KubeRay and Volcano, tests/tools/crds.sh), and `rayshare serve`
//! registered through the chart's own MutatingWebhookConfiguration.
//!
//! One control plane per test binary; each test gets its own namespaces, its own rayshare
//! process(es) and its own webhook registration (selecting only its namespaces), so tests
//! run in parallel without seeing each other. tests/kuberay/world.rs adds the scheduler,
//! controller-manager, kwok and KubeRay for the tests that need them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

pub const ENABLE_LABEL: &str = "rayshare.io/enabled";
pub const TEST_LABEL: &str = "rayshare.io/e2e-test";
/// With several instances, a pod labelled `SHARD_LABEL: i` goes to instance i.
pub const SHARD_LABEL: &str = "rayshare.io/e2e-shard";
pub const RAYSHARE_NAMESPACE: &str = "rayshare-system";

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
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

#[path = "../support/ports.rs"]
mod ports;
pub use ports::free_port;

/// The last 60 lines of a log.
pub fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

/// helm (built from Go modules, cached).
static HELM: LazyLock<PathBuf> =
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

/// The shared control plane of this test binary.
pub struct ControlPlane {
    _dir: tempfile::TempDir,
    _child: Child,
    /// The rayshare-controlplane binary (it also runs kube-scheduler and
    /// kube-controller-manager, see tests/controlplane/components.go).
    #[allow(dead_code)] // for tests/kuberay and the demo
    pub bin: PathBuf,
    /// Its data directory: `pki/`, kubeconfigs, logs.
    #[allow(dead_code)] // for tests/kuberay and the demo
    pub dir: PathBuf,
    pub admin_kubeconfig: PathBuf,
    pub rayshare_kubeconfig: PathBuf,
}

pub static CONTROL_PLANE: LazyLock<ControlPlane> = LazyLock::new(ControlPlane::start);

/// The client certificate the API server presents to every webhook that asks for one
/// (an AdmissionConfiguration whose kubeconfig has a `*` user): rayshare asks only when
/// started with `--client-ca`. Returns the AdmissionConfiguration's path.
fn webhook_client_identity(dir: &Path) -> PathBuf {
    let certs = rayshare::certs::generate_client("kube-apiserver").unwrap();
    let pki = dir.join("webhook-client");
    rayshare::certs::write(&pki, &certs).unwrap();
    let kubeconfig = json!({
        "apiVersion": "v1", "kind": "Config",
        "users": [{"name": "*", "user": {
            "client-certificate": pki.join("tls.crt"),
            "client-key": pki.join("tls.key"),
        }}],
    });
    std::fs::write(pki.join("kubeconfig"), kubeconfig.to_string()).unwrap();
    let webhook = json!({
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "WebhookAdmissionConfiguration",
        "kubeConfigFile": pki.join("kubeconfig"),
    });
    let admission = json!({
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [{"name": "MutatingAdmissionWebhook", "configuration": webhook}],
    });
    let path = pki.join("admission.json");
    std::fs::write(&path, admission.to_string()).unwrap();
    path
}

/// The CA of the client certificate the API server presents to webhooks.
pub fn webhook_client_ca() -> PathBuf {
    CONTROL_PLANE.dir.join("webhook-client/ca.crt")
}

impl ControlPlane {
    /// CPU time the control plane process (API server, etcd, scheduler and
    /// controller-manager) has used so far.
    #[allow(dead_code)] // for the benchmarks
    pub fn cpu(&self) -> Duration {
        process_cpu(self._child.id()).unwrap_or_default()
    }

    fn start() -> Self {
        let bin = run_script(&repo().join("tests/controlplane/build.sh"));
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("controlplane.log");
        let admission_config = webhook_client_identity(dir.path());
        let child = Command::new(&bin)
            .arg("--data-dir")
            .arg(dir.path())
            .args(["--parent-pid", &std::process::id().to_string()])
            .arg("--")
            .arg(format!(
                "--admission-control-config-file={}",
                admission_config.display()
            ))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.path().join("controlplane.out")).unwrap())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("starting the control plane");
        let ready = dir.path().join("ready");
        let started = Instant::now();
        while !ready.exists() {
            if started.elapsed() > Duration::from_secs(180) {
                panic!(
                    "control plane not ready after 180 s; its log:\n{}\napiserver log:\n{}",
                    tail(&log),
                    tail(&dir.path().join("apiserver.log"))
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let cp = Self {
            bin,
            dir: dir.path().to_path_buf(),
            admin_kubeconfig: dir.path().join("admin.kubeconfig"),
            rayshare_kubeconfig: dir.path().join("rayshare.kubeconfig"),
            _dir: dir,
            _child: child,
        };
        // Cluster-wide setup, once: CRDs, rayshare's namespace, the chart's RBAC.
        std::thread::scope(|s| {
            s.spawn(|| {
                tokio::runtime::Runtime::new()
                    .unwrap()
                    .block_on(cp.install())
            })
            .join()
            .expect("control plane setup")
        });
        cp
    }

    async fn install(&self) {
        let client = client(&self.admin_kubeconfig).await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for path in crd_files() {
            let crd: CustomResourceDefinition =
                serde_norway::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            crds.create(&PostParams::default(), &crd)
                .await
                .unwrap_or_else(|e| panic!("installing {}: {e}", path.display()));
        }
        for crd in crds.list(&Default::default()).await.unwrap() {
            wait_for(&format!("CRD {} established", crd.name_any()), || async {
                let c = crds.get(&crd.name_any()).await.ok()?;
                let conds = c.status?.conditions?;
                conds
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
                    .then_some(())
            })
            .await;
        }
        create_namespace(&client, RAYSHARE_NAMESPACE, &[]).await;
        // The chart's RBAC (with token-mode clusters' Secrets) and its own-objects policy,
        // exactly: a permission the chart lacks, or a write the policy refuses, fails a test.
        for template in ["templates/rbac.yaml", "templates/admission-policy.yaml"] {
            for object in helm_template(template, &["rbac.rayAuthSecrets=true"]) {
                apply(&client, &object).await;
            }
        }
    }
}

/// The chart's leader-election Role and its binding, in `namespace`: each test's replicas
/// elect their leader there, where the chart elects it in the release namespace.
pub async fn leader_role_in(client: &Client, namespace: &str) {
    // Rendered once per test binary, not once per test.
    static LEADER_RBAC: LazyLock<Vec<Value>> = LazyLock::new(|| {
        helm_template("templates/rbac.yaml", &[])
            .into_iter()
            .filter(|o| o["kind"] == "Role" || o["kind"] == "RoleBinding")
            .collect()
    });
    for object in LEADER_RBAC.iter() {
        let mut object = object.clone();
        object["metadata"]["namespace"] = json!(namespace);
        apply(client, &object).await;
    }
}

/// The CRD files of KubeRay and Volcano, from their Go modules (tests/tools/crds.sh).
pub fn crd_files() -> Vec<PathBuf> {
    let dir = run_script(&repo().join("tests/tools/crds.sh"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

pub async fn client(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// Creates any object given as JSON (kind resolved from apiVersion/kind by discovery).
pub async fn apply(client: &Client, object: &Value) -> DynamicObject {
    let api = dynamic_api(client, object).await;
    let obj: DynamicObject = serde_json::from_value(object.clone()).unwrap();
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating {}: {e}", object["metadata"]["name"]))
}

/// Creates a sample-based object in `namespace` (optionally as a dry run) and returns what
/// the API server stored (or would store), after every admission step.
pub async fn create_in(
    client: &Client,
    namespace: &str,
    mut object: Value,
    dry_run: bool,
) -> Value {
    object["metadata"]["namespace"] = json!(namespace);
    let api = dynamic_api(client, &object).await;
    let obj: DynamicObject = serde_json::from_value(object.clone()).unwrap();
    let params = PostParams {
        dry_run,
        ..Default::default()
    };
    let created = api
        .create(&params, &obj)
        .await
        .unwrap_or_else(|e| panic!("creating {}: {e}", object["metadata"]["name"]));
    serde_json::to_value(created).unwrap()
}

pub async fn dynamic_api(client: &Client, object: &Value) -> Api<DynamicObject> {
    let api_version = object["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, object["kind"].as_str().unwrap());
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
    match (caps.scope, object["metadata"]["namespace"].as_str()) {
        (kube::discovery::Scope::Namespaced, Some(ns)) => {
            Api::namespaced_with(client.clone(), ns, &ar)
        }
        _ => Api::all_with(client.clone(), &ar),
    }
}

pub fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

pub async fn create_namespace(client: &Client, name: &str, labels: &[(&str, &str)]) {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels}
    }))
    .unwrap();
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("creating namespace {name}: {e}"),
    }
}

/// Polls `check` until it yields, or panics after 60 s naming what it waited for.
pub async fn wait_for<T, F, Fut>(what: &str, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    wait_for_within(Duration::from_secs(60), what, check).await
}

/// [`wait_for`] with another deadline (for what a controller does on its own schedule).
pub async fn wait_for_within<T, F, Fut>(deadline: Duration, what: &str, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if started.elapsed() > deadline {
            panic!("timed out after {deadline:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

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
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_rayshare").into());
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
    #[allow(dead_code)] // for the benchmarks
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
    #[allow(dead_code)] // for tests/e2e/hostile.rs
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

    /// Waits until the log holds `line`: rayshare logs a call after it returns, and its
    /// log is written by a background thread, so a test that saw the call's effect
    /// through the API may be there first.
    #[allow(dead_code)] // not every test binary reads logs
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
    #[allow(dead_code)] // not every test binary waits for passes
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

/// One test's world: namespaces, rayshare instance(s), and a webhook registration.
pub struct TestEnv {
    pub name: String,
    /// Enabled namespace.
    pub ns: String,
    /// Namespace without the enable label.
    pub ns_off: String,
    pub admin: Client,
    /// Before `_dir`: fields drop in order, and the instances print their logs on failure.
    pub instances: Vec<Rayshare>,
    _dir: tempfile::TempDir,
    pub ca: String,
    /// The webhook's `timeoutSeconds` when the config's admission budget needs more than
    /// the chart's default (as an operator raising the one must raise the other).
    webhook_timeout_seconds: Option<u64>,
}

pub const DEFAULT_CONFIG: &str = "";

impl TestEnv {
    /// Starts `replicas` rayshare instances with `config_yaml`, and registers the chart's
    /// webhook pointing at them (one entry per instance: the API server calls each in
    /// turn, so with two instances both really serve).
    pub async fn new(name: &str, config_yaml: &str, replicas: usize) -> Self {
        Self::with_args(name, config_yaml, replicas, &[]).await
    }

    /// [`TestEnv::new`] with extra `rayshare serve` arguments for every instance.
    pub async fn with_args(
        name: &str,
        config_yaml: &str,
        replicas: usize,
        extra_args: &[String],
    ) -> Self {
        let cp = &*CONTROL_PLANE;
        let admin = client(&cp.admin_kubeconfig).await;
        let ns = format!("e2e-{name}");
        let ns_off = format!("e2e-{name}-off");
        create_namespace(&admin, &ns, &[(ENABLE_LABEL, "true"), (TEST_LABEL, name)]).await;
        create_namespace(&admin, &ns_off, &[(TEST_LABEL, name)]).await;
        leader_role_in(&admin, &ns).await;
        let dir = tempfile::tempdir().unwrap();
        let certs = rayshare::certs::generate(&["127.0.0.1".into()]).unwrap();
        rayshare::certs::write(dir.path(), &certs).unwrap();
        // Tests share one API server: keep each test's reclaimer to its own namespace (a
        // shared cluster carries its TTL, so any reclaimer would honour another test's).
        let config = if config_yaml.contains("reclaim:") {
            config_yaml.to_string()
        } else {
            format!("{config_yaml}\nreclaim:\n  namespaces: [{ns}]\n")
        };
        // Each test is its own installation: its provisioners act on its objects only.
        let mut parsed: Value = serde_norway::from_str(&config).unwrap();
        if !parsed.is_object() {
            parsed = json!({});
        }
        let predates = OTHER_BUILD
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|b| b.predates_instance);
        if !predates {
            parsed["instance"] = json!(name);
        }
        let webhook_timeout_seconds = parsed["admissionTimeoutMs"]
            .as_u64()
            .map(|ms| ms.div_ceil(1000) + 1);
        let config = serde_norway::to_string(&parsed).unwrap();
        let instances: Vec<Rayshare> = (0..replicas)
            .map(|i| {
                let name = format!("{name}-{i}");
                Rayshare::start(dir.path(), &name, &config, &ns, extra_args)
            })
            .collect();
        for r in &instances {
            r.wait_ready().await;
        }
        let env = Self {
            name: name.into(),
            ns,
            ns_off,
            admin,
            _dir: dir,
            instances,
            ca: certs.ca_pem,
            webhook_timeout_seconds,
        };
        env.register_webhook().await;
        env
    }

    /// The chart's MutatingWebhookConfiguration, rewritten to call this test's instances
    /// by URL, and to select only this test's namespaces.
    pub fn webhook_configuration(&self) -> Value {
        let timeout = self
            .webhook_timeout_seconds
            .map(|t| format!("webhook.timeoutSeconds={t}"));
        let rendered = helm_template(
            "templates/webhook.yaml",
            &Vec::from_iter(timeout.as_deref()),
        );
        let mut mwc = rendered
            .into_iter()
            .find(|o| o["kind"] == "MutatingWebhookConfiguration")
            .expect("the chart renders a MutatingWebhookConfiguration");
        let template = mwc["webhooks"][0].clone();
        let ca_bundle = data_encoding::BASE64.encode(self.ca.as_bytes());
        let webhooks: Vec<Value> = self
            .instances
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut w = template.clone();
                w["name"] = json!(format!("i{i}.{}", template["name"].as_str().unwrap()));
                w["clientConfig"] = json!({"url": r.url, "caBundle": ca_bundle});
                let selector = &mut w["namespaceSelector"];
                if !selector["matchLabels"].is_object() {
                    selector["matchLabels"] = json!({});
                }
                selector["matchLabels"][TEST_LABEL] = json!(self.name);
                if self.instances.len() > 1 {
                    // Pods choose their instance by label, so a test can alternate them.
                    let objects = &mut w["objectSelector"];
                    if !objects["matchExpressions"].is_array() {
                        objects["matchExpressions"] = json!([]);
                    }
                    objects["matchExpressions"]
                        .as_array_mut()
                        .unwrap()
                        .push(json!(
                            {"key": SHARD_LABEL, "operator": "In", "values": [i.to_string()]}
                        ));
                }
                w
            })
            .collect();
        mwc["webhooks"] = json!(webhooks);
        mwc["metadata"] = json!({"name": format!("rayshare-e2e-{}", self.name)});
        mwc
    }

    async fn register_webhook(&self) {
        let mwc: MutatingWebhookConfiguration =
            serde_json::from_value(self.webhook_configuration()).unwrap();
        Api::<MutatingWebhookConfiguration>::all(self.admin.clone())
            .create(&PostParams::default(), &mwc)
            .await
            .expect("registering the webhook");
        // Really being called: a dry-run volcano pod comes back with a group annotation.
        // Under Volcano's own webhook (tests/volcano) it is refused instead: a dry run makes
        // no group, and `validatepod.volcano.sh` refuses a pod naming a group that does not
        // exist. Only rayshare names a group on the probe, so that refusal, naming the
        // probe's group, proves rayshare was called too.
        const PROBE: &str = "webhook-probe";
        let pods: Api<Pod> = Api::namespaced(self.admin.clone(), &self.ns);
        let probe: Pod = serde_json::from_value(json!({
            "metadata": {"name": PROBE, "labels": {SHARD_LABEL: "0"}},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]}
        }))
        .unwrap();
        let dry_run = PostParams {
            dry_run: true,
            ..Default::default()
        };
        wait_for("the webhook to be called", || async {
            match pods.create(&dry_run, &probe).await {
                Ok(created) => created
                    .annotations()
                    .contains_key("scheduling.k8s.io/group-name")
                    .then_some(()),
                // `... "validatepod.volcano.sh" denied the request: failed to get PodGroup
                // for pod <ns/webhook-probe>: podgroups.scheduling.volcano.sh
                // "webhook-probe" not found`: the quoted name is the group's.
                Err(kube::Error::Api(e)) => (e.message.contains("validatepod.volcano.sh")
                    && e.message.contains(&format!("\"{PROBE}\"")))
                .then_some(()),
                Err(_) => None,
            }
        })
        .await;
    }

    pub fn api(&self, ar: &ApiResource, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.admin.clone(), namespace, ar)
    }
}

/// The uid of a RayCluster that exists and is not being deleted.
pub async fn cluster_uid(env: &TestEnv, name: &str) -> Option<String> {
    let c = env
        .api(&ray_cluster_resource(), &env.ns)
        .get_opt(name)
        .await
        .unwrap()?;
    c.metadata
        .deletion_timestamp
        .is_none()
        .then(|| c.metadata.uid.unwrap())
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

/// What KubeRay would do when a job ends (there is no operator in these tests).
pub async fn finish(env: &TestEnv, name: &str) {
    let patch = serde_json::json!({"status": {"jobDeploymentStatus": "Complete", "endTime": k8s_openapi::jiff::Timestamp::now().to_string()}});
    env.api(&ray_job_resource(), &env.ns)
        .patch_status(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
}

/// Waits until the API server refuses a RayCluster in the test's namespace (a dry-run
/// create): `what` (a policy, a quota) is in force once the API server's informer has it.
pub async fn wait_until_ray_clusters_refused(env: &TestEnv, what: &str) {
    let probe: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "probe", "namespace": env.ns},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
            "containers": [{"name": "ray-head", "image": "rayproject/ray"}]}}}}}))
    .unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    wait_for(&format!("{what} to be in force"), || async {
        clusters
            .create(&dry_run, &probe)
            .await
            .is_err()
            .then_some(())
    })
    .await;
}
