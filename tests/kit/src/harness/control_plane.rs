//! The one control plane a test binary shares, set up once with the CRDs and the chart's RBAC.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::*;

/// The shared control plane of this test binary.
pub struct ControlPlane {
    _dir: tempfile::TempDir,
    _child: Child,
    /// The rayshare-controlplane binary (it also runs kube-scheduler and
    /// kube-controller-manager, see tests/controlplane/components.go).
    pub bin: PathBuf,
    /// Its data directory: `pki/`, kubeconfigs, logs.
    pub dir: PathBuf,
    pub admin_kubeconfig: PathBuf,
    pub rayshare_kubeconfig: PathBuf,
}

pub static CONTROL_PLANE: LazyLock<ControlPlane> = LazyLock::new(ControlPlane::start);

/// The client certificate the API server presents to every webhook that asks for one
/// (an AdmissionConfiguration whose kubeconfig has a `*` user): rayshare asks only when
/// started with `--client-ca`. Returns the AdmissionConfiguration's path.
fn webhook_client_identity(dir: &Path) -> PathBuf {
    let certs = rayshare::http::certs::generate_client("kube-apiserver").unwrap();
    let pki = dir.join("webhook-client");
    rayshare::http::certs::write(&pki, &certs).unwrap();
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
            // The slice benchmark's CPU profiles come from the API server's /debug/pprof.
            .args(std::env::var_os("RAYSHARE_SLICE_PROFILE").map(|_| "--profiling=true"))
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
