//! Kueue's controller manager, once per test binary, installed as its release manifests
//! install it, run as a process of this host: its eleven CRDs, its Ray and Kueue webhooks
//! registered from its own `config/components/webhook/manifests.yaml` (by URL instead of
//! its Service; names prefixed `kueue-` as kustomize does), integrations
//! `ray.io/rayjob` and `ray.io/raycluster`, and its own queues per test.

use std::path::Path;
use std::sync::LazyLock;
use std::time::Instant;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::ApiResource;
use serde_json::{Value, json};

use crate::harness::*;
use crate::world::*;

pub fn workload_resource() -> ApiResource {
    resource("kueue.x-k8s.io", "v1beta2", "Workload", "workloads")
}

/// The one ResourceFlavor every test's ClusterQueue uses (no node labels: the fake nodes
/// are all alike).
pub const FLAVOR: &str = "default-flavor";
/// A WorkloadPriorityClass above the default (0).
pub const HIGH: &str = "rayshare-e2e-high";

pub struct Kueue {
    pub process: Process,
}

pub static KUEUE: LazyLock<Kueue> = LazyLock::new(Kueue::start);

/// Kueue's configuration (`config.kueue.x-k8s.io/v1beta2`, v0.17.0's own version): its
/// own certificate management off (it would make certificates for its Service's DNS name;
/// the API server calls 127.0.0.1 here), no leader election, no metrics listener, the
/// on-demand visibility server off (it binds :8082 on every interface), Ray only.
fn config(port: u16, health: u16, certs: &Path) -> String {
    format!(
        "apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
manageJobsWithoutQueueName: false
internalCertManagement:
  enable: false
leaderElection:
  leaderElect: false
webhook:
  host: 127.0.0.1
  port: {port}
  certDir: {}
health:
  healthProbeBindAddress: 127.0.0.1:{health}
metrics:
  bindAddress: \"0\"
featureGates:
  VisibilityOnDemand: false
integrations:
  frameworks: [ray.io/rayjob, ray.io/raycluster]
",
        certs.display()
    )
}

/// With its own certificate management off, Kueue v0.17.0 reads a metrics certificate from
/// the fixed path /etc/kueue/metrics/certs (even with metrics off) and exits without it.
/// It gets one through an overlay on /etc in a mount namespace of its own: nothing is
/// written to this host's /etc.
const OVERLAY_ETC: &str = r#"mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/up,workdir=$1/work" /etc && shift && exec "$@""#;

impl Kueue {
    fn start() -> Self {
        let world = &*WORLD;
        let started = Instant::now();
        let bin = run_script(&repo().join("tests/tools/build-kueue.sh"));
        let dir = world.dir.join("kueue");
        let certs = dir.join("certs");
        let pki = rayshare::http::certs::generate(&["127.0.0.1".into()]).unwrap();
        rayshare::http::certs::write(&certs, &pki).unwrap();
        let overlay = dir.join("etc-overlay");
        let metrics_certs = overlay.join("up/kueue/metrics/certs");
        std::fs::create_dir_all(&metrics_certs).unwrap();
        std::fs::create_dir_all(overlay.join("work")).unwrap();
        for file in ["tls.crt", "tls.key"] {
            std::fs::copy(certs.join(file), metrics_certs.join(file)).unwrap();
        }
        let (port, health) = (free_port(), free_port());
        let config_file = dir.join("kueue-config.yaml");
        std::fs::write(&config_file, config(port, health, &certs)).unwrap();

        // CRDs and webhooks first, as its manifests install them before its Deployment.
        std::thread::scope(|s| {
            s.spawn(|| {
                tokio::runtime::Runtime::new()
                    .unwrap()
                    .block_on(install(port, &pki.ca_pem))
            })
            .join()
            .expect("installing Kueue's CRDs and webhooks")
        });
        let mut cmd = supervised("unshare");
        cmd.args([
            "--mount",
            "--propagation",
            "private",
            "bash",
            "-c",
            OVERLAY_ETC,
        ])
        .arg("kueue")
        .arg(&overlay)
        .arg(&bin)
        .arg("--config")
        .arg(&config_file)
        .arg("--kubeconfig")
        .arg(&CONTROL_PLANE.admin_kubeconfig)
        .arg("--zap-log-level=2");
        let mut kueue = Self {
            process: Process::spawn("kueue", cmd, world.dir.join("kueue.log")),
        };
        let ready = std::thread::scope(|s| {
            s.spawn(|| {
                tokio::runtime::Runtime::new()
                    .unwrap()
                    .block_on(serving(health))
            })
            .join()
        });
        if ready.is_err() {
            kueue.process.assert_running();
            panic!("Kueue did not come up:\n{}", tail(&kueue.process.log));
        }
        eprintln!(
            "[kueue] controller manager and webhooks up in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        kueue
    }
}

/// Kueue's CRDs, established, and its webhooks for Ray and its own kinds (the others,
/// pods, Jobs and so on, would refuse every such create: those integrations are off).
async fn install(port: u16, ca_pem: &str) {
    let admin = client(&CONTROL_PLANE.admin_kubeconfig).await;
    let crds = run_script(&repo().join("tests/tools/kueue-crds.sh"));
    let mut names = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&crds)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    for file in files {
        let crd: Value = serde_norway::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        names.push(crd["metadata"]["name"].as_str().unwrap().to_string());
        apply(&admin, &crd).await;
    }
    let api: Api<CustomResourceDefinition> = Api::all(admin.clone());
    wait_for("Kueue's CRDs to be established", || async {
        for name in &names {
            let crd = api.get(name).await.ok()?;
            let conditions = crd.status?.conditions?;
            conditions
                .iter()
                .find(|c| c.type_ == "Established" && c.status == "True")?;
        }
        Some(())
    })
    .await;

    let manifests = run_script_with(&repo().join("tests/tools/kueue-crds.sh"), &["--webhooks"]);
    let text = std::fs::read_to_string(&manifests).unwrap();
    let ca_bundle = data_encoding::BASE64.encode(ca_pem.as_bytes());
    for mut configuration in rayshare::offline::documents(&text).unwrap() {
        let kept: Vec<Value> = configuration["webhooks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| served(w))
            .map(|w| {
                let mut w = w.clone();
                let path = w["clientConfig"]["service"]["path"].as_str().unwrap();
                w["clientConfig"] = json!({
                    "url": format!("https://127.0.0.1:{port}{path}"),
                    "caBundle": ca_bundle,
                });
                w
            })
            .collect();
        let name = configuration["metadata"]["name"].as_str().unwrap();
        configuration["metadata"] = json!({"name": format!("kueue-{name}")});
        configuration["webhooks"] = json!(kept);
        apply(&admin, &configuration).await;
    }
}

/// A webhook for RayJobs, RayClusters or Kueue's own kinds.
fn served(webhook: &Value) -> bool {
    let rules = webhook["rules"].as_array().into_iter().flatten();
    rules.into_iter().all(|r| {
        let groups = r["apiGroups"].as_array().into_iter().flatten();
        let resources = r["resources"].as_array().into_iter().flatten();
        groups.into_iter().all(|g| g == "kueue.x-k8s.io")
            || resources
                .into_iter()
                .all(|x| x == "rayjobs" || x == "rayclusters")
    })
}

/// Ready, and its webhooks answer: the flavor and priority class every test uses are
/// created through them.
async fn serving(health: u16) {
    let url = format!("http://127.0.0.1:{health}/readyz");
    wait_for_within(SLOW, "Kueue to be ready", || async {
        reqwest::get(&url)
            .await
            .ok()
            .filter(|r| r.status().is_success())
            .map(|_| ())
    })
    .await;
    let admin = client(&CONTROL_PLANE.admin_kubeconfig).await;
    let objects = [
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": FLAVOR}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
            "metadata": {"name": HIGH}, "value": 1000}),
    ];
    for object in objects {
        let api = dynamic_api(&admin, &object).await;
        let obj: DynamicObject = serde_json::from_value(object.clone()).unwrap();
        wait_for_within(SLOW, "Kueue's webhooks to answer", || async {
            match api.create(&PostParams::default(), &obj).await {
                Ok(_) => Some(()),
                Err(kube::Error::Api(e)) if e.code == 409 => Some(()),
                Err(_) => None,
            }
        })
        .await;
    }
}

/// A ClusterQueue for the test's namespace only, with `cpu` CPUs and `memory` of quota,
/// preempting lower priorities within it, and a LocalQueue `default` there (Kueue labels
/// every RayJob and RayCluster of the namespace with it when they name no queue).
pub async fn queues(env: &TestEnv, cpu: &str, memory: &str) -> String {
    let name = format!("cq-{}", env.name);
    let cluster_queue = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": env.ns}},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{
                "name": FLAVOR, "resources": [
                    {"name": "cpu", "nominalQuota": cpu},
                    {"name": "memory", "nominalQuota": memory}]}]}],
        },
    });
    apply(&env.admin, &cluster_queue).await;
    let local_queue = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": env.ns},
        "spec": {"clusterQueue": name},
    });
    apply(&env.admin, &local_queue).await;
    // Kueue has it once the LocalQueue reports its ClusterQueue active.
    let local_queues = env.api(
        &resource("kueue.x-k8s.io", "v1beta2", "LocalQueue", "localqueues"),
        &env.ns,
    );
    wait_for_within(SLOW, "the LocalQueue to be active", || async {
        let q = serde_json::to_value(local_queues.get("default").await.ok()?).ok()?;
        let conditions = q["status"]["conditions"].as_array()?.clone();
        conditions
            .iter()
            .any(|c| c["type"] == "Active" && c["status"] == "True")
            .then_some(())
    })
    .await;
    name
}

/// The Workload Kueue made for RayCluster `cluster` (its controller owner), as JSON.
pub async fn workload_of(env: &TestEnv, cluster_uid: &str) -> Option<Value> {
    let workloads = env.api(&workload_resource(), &env.ns);
    let list = workloads.list(&ListParams::default()).await.ok()?;
    list.items
        .into_iter()
        .map(|w| serde_json::to_value(w).unwrap())
        .find(|w| {
            w["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|o| o["uid"] == cluster_uid)
        })
}

/// Whether a Workload's condition `type` is True.
pub fn condition(workload: &Value, type_: &str) -> bool {
    workload["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == type_ && c["status"] == "True")
}
