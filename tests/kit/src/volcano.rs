//! Volcano's scheduler, controller-manager and webhook-manager (its admission webhooks),
//! once per test binary.

use std::path::Path;
use std::process::Command;
use std::sync::LazyLock;
use std::time::Instant;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::harness::*;
use crate::world::*;

/// Volcano's default scheduler configuration (its Helm chart's `volcano-scheduler.conf`).
const SCHEDULER_CONF: &str = "\
actions: \"enqueue, allocate, backfill\"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
";

/// Volcano's chart installed as its docs do (`helm install volcano ... -n volcano-system`);
/// its webhooks skip the release's namespace and kube-system, and serve every other one.
const RELEASE: &str = "volcano";
const RELEASE_NAMESPACE: &str = "volcano-system";

/// Where the readiness probes go: a namespace no rayshare registration selects.
const PROBE_NAMESPACE: &str = "volcano-probe";

pub struct Volcano {
    _scheduler: Process,
    _controllers: Process,
    _admission: Process,
}

pub static VOLCANO: LazyLock<Volcano> = LazyLock::new(Volcano::start);

pub fn queue_resource() -> kube::core::ApiResource {
    resource("scheduling.volcano.sh", "v1beta1", "Queue", "queues")
}

impl Volcano {
    fn start() -> Self {
        let world = &*WORLD_FOR_VOLCANO;
        let started = Instant::now();
        let bins = run_script(&repo().join("tests/tools/build-volcano.sh"));
        let admin = &CONTROL_PLANE.admin_kubeconfig;
        let conf = world.dir.join("volcano-scheduler.conf");
        std::fs::write(&conf, SCHEDULER_CONF).unwrap();
        let mut scheduler = supervised(bins.join("scheduler"));
        scheduler
            .arg("--kubeconfig")
            .arg(admin)
            .arg("--scheduler-conf")
            .arg(&conf)
            .args(["--scheduler-name=volcano", "--leader-elect=false"])
            .arg(format!("--listen-address=127.0.0.1:{}", free_port()))
            .arg(format!("--healthz-address=127.0.0.1:{}", free_port()))
            .args(["--schedule-period=500ms", "-v=3"]);
        let mut controllers = supervised(bins.join("controller-manager"));
        controllers
            .arg("--kubeconfig")
            .arg(admin)
            .args(["--leader-elect=false", "--scheduler-name=volcano"])
            .args(["--controllers=pg-controller,queue-controller", "-v=3"])
            .arg(format!("--healthz-address=127.0.0.1:{}", free_port()));
        // The admission webhooks go first, as a chart install creates them before any
        // Volcano pod runs: the scheduler's own `default` queue then passes them too (it
        // retries its create for a minute, until webhook-manager serves).
        let (admission, webhooks) = webhook_manager(&bins, &world.dir);
        let mut volcano = Self {
            _admission: Process::spawn(
                "volcano-webhook-manager",
                admission,
                world.dir.join("volcano-webhook-manager.log"),
            ),
            _scheduler: Process::spawn(
                "volcano-scheduler",
                scheduler,
                world.dir.join("volcano-scheduler.log"),
            ),
            _controllers: Process::spawn(
                "volcano-controller-manager",
                controllers,
                world.dir.join("volcano-controller-manager.log"),
            ),
        };
        let ready = std::thread::scope(|s| {
            s.spawn(|| {
                tokio::runtime::Runtime::new().unwrap().block_on(async {
                    admission_ready(&webhooks).await;
                    default_queue_open().await;
                })
            })
            .join()
        });
        if ready.is_err() {
            volcano._admission.assert_running();
            volcano._scheduler.assert_running();
            volcano._controllers.assert_running();
            panic!("Volcano did not come up");
        }
        eprintln!(
            "[volcano] webhook-manager, scheduler and controller-manager up in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        volcano
    }
}

/// The webhook configurations of Volcano's chart (v1.10: the chart creates them, and
/// webhook-manager only fills in their `caBundle`), registered, and webhook-manager's command
/// as the chart's Deployment runs it. Returns the command and the configurations' names.
fn webhook_manager(bins: &Path, dir: &Path) -> (Command, Vec<String>) {
    let chart = run_script_with(&repo().join("tests/tools/build-volcano.sh"), &["--chart"]);
    let values: Value =
        serde_norway::from_str(&std::fs::read_to_string(chart.join("values.yaml")).unwrap())
            .unwrap();
    // `/jobs/mutate,/jobs/validate,/podgroups/mutate,/pods/validate,/pods/mutate,...`
    let enabled = values["custom"]["enabled_admissions"].as_str().unwrap();
    let log_level = &values["custom"]["admission_log_level"];
    // Its ConfigMap's one file (resource groups for pods/mutate; all commented out).
    let conf_file = values["basic"]["admission_config_file"].as_str().unwrap();
    let conf = dir.join("volcano-admission.conf");
    std::fs::copy(chart.join(conf_file), &conf).unwrap();

    // The chart's admission-init Job makes a CA and a serving certificate for the
    // service's DNS name; here the API server calls 127.0.0.1.
    let pki = dir.join("volcano-admission");
    let certs = rayshare::http::certs::generate(&["127.0.0.1".into()]).unwrap();
    rayshare::http::certs::write(&pki, &certs).unwrap();

    let port = free_port();
    let rendered = helm_template_volcano(&chart, "templates/webhooks.yaml");
    let mut configurations = Vec::new();
    let mut paths = Vec::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Runtime::new().unwrap().block_on(async {
                let client = client(&CONTROL_PLANE.admin_kubeconfig).await;
                for mut configuration in rendered {
                    for webhook in configuration["webhooks"].as_array_mut().unwrap() {
                        // The chart points the API server at its Service
                        // (volcano-admission-service:443 + path); no Service routes to a
                        // process of this host (the control plane has no kube-proxy), so
                        // the same path by URL. No caBundle: webhook-manager sets it from
                        // --ca-cert-file, as in the chart.
                        let path = webhook["clientConfig"]["service"]["path"]
                            .as_str()
                            .unwrap()
                            .to_string();
                        webhook["clientConfig"] =
                            json!({"url": format!("https://127.0.0.1:{port}{path}")});
                        paths.push(path);
                    }
                    apply(&client, &configuration).await;
                    configurations.push(
                        configuration["metadata"]["name"]
                            .as_str()
                            .unwrap()
                            .to_string(),
                    );
                }
            })
        })
        .join()
        .expect("registering Volcano's webhooks")
    });
    // One configuration per enabled admission (webhook-manager waits for each by name).
    let mut expected: Vec<&str> = enabled.split(',').collect();
    expected.sort();
    paths.sort();
    assert_eq!(
        paths, expected,
        "the chart's webhooks vs enabled_admissions"
    );

    let mut cmd = supervised(bins.join("webhook-manager"));
    cmd.arg("--kubeconfig")
        .arg(&CONTROL_PLANE.admin_kubeconfig)
        .arg(format!("--enabled-admission={enabled}"))
        .arg("--tls-cert-file")
        .arg(pki.join("tls.crt"))
        .arg("--tls-private-key-file")
        .arg(pki.join("tls.key"))
        .arg("--ca-cert-file")
        .arg(pki.join("ca.crt"))
        .arg("--admission-conf")
        .arg(&conf)
        // The chart passes --webhook-namespace and --webhook-service-name; v1.10 reads
        // neither (nor --webhook-url) beyond refusing to start without one of them: it
        // registers nothing itself. The URL says what the configurations point at.
        .arg(format!("--webhook-url=https://127.0.0.1:{port}"))
        .args(["--enable-healthz=true", "--logtostderr"])
        .arg(format!("--healthz-address=127.0.0.1:{}", free_port()))
        .arg("--listen-address=127.0.0.1")
        .arg(format!("--port={port}"))
        .arg(format!("-v={log_level}"))
        // The API server presents a client certificate to every mutating webhook that asks
        // (the harness's AdmissionConfiguration, for rayshare's --client-ca), and
        // webhook-manager asks (VerifyClientCertIfGiven) with no client CA of its own, so Go
        // checks it against the system roots: make those that certificate's CA, or the TLS
        // handshake of every mutating webhook fails ("remote error: tls: unknown
        // certificate authority"; the scheduler then gives up creating queue `default`).
        .env("SSL_CERT_FILE", webhook_client_ca());
    (cmd, configurations)
}

/// `helm template volcano <chart> --namespace volcano-system --show-only <template>`, with
/// the chart's default values.
fn helm_template_volcano(chart: &Path, template: &str) -> Vec<Value> {
    let helm = run_script(&repo().join("tests/tools/build-helm.sh"));
    let out = Command::new(helm)
        .args(["template", RELEASE])
        .arg(chart)
        .args(["--namespace", RELEASE_NAMESPACE, "--show-only", template])
        .output()
        .expect("running helm");
    assert!(
        out.status.success(),
        "helm template of Volcano's chart failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    rayshare::offline::documents(&String::from_utf8(out.stdout).unwrap()).unwrap()
}

/// webhook-manager serves: it has set every configuration's `caBundle` (which it does before
/// it listens), and the API server gets its answers through them, mutating and validating.
async fn admission_ready(configurations: &[String]) {
    let client = client(&CONTROL_PLANE.admin_kubeconfig).await;
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    wait_for_within(SLOW, "webhook-manager to set every caBundle", || async {
        for name in configurations {
            let bundles: Vec<bool> = match mutating.get_opt(name).await.ok()? {
                Some(m) => m
                    .webhooks?
                    .iter()
                    .map(|w| w.client_config.ca_bundle.is_some())
                    .collect(),
                None => validating
                    .get_opt(name)
                    .await
                    .ok()??
                    .webhooks?
                    .iter()
                    .map(|w| w.client_config.ca_bundle.is_some())
                    .collect(),
            };
            if !bundles.iter().all(|b| *b) {
                return None;
            }
        }
        Some(())
    })
    .await;
    create_namespace(&client, PROBE_NAMESPACE, &[]).await;
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    // podgroups/mutate puts a group without a queue into `default` (the CRD has no default).
    let groups: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), PROBE_NAMESPACE, &pod_group_resource());
    let group: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "probe"}, "spec": {"minMember": 1},
    }))
    .unwrap();
    wait_for_within(SLOW, "mutatepodgroup.volcano.sh to answer", || async {
        let created = groups.create(&dry_run, &group).await.ok()?;
        (created.data["spec"]["queue"] == "default").then_some(())
    })
    .await;
    // pods/validate refuses a Volcano pod whose group does not exist.
    let pods: Api<Pod> = Api::namespaced(client.clone(), PROBE_NAMESPACE);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "probe",
            "annotations": {"scheduling.k8s.io/group-name": "no-such-group"}},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap();
    wait_for_within(SLOW, "validatepod.volcano.sh to answer", || async {
        match pods.create(&dry_run, &pod).await {
            Err(kube::Error::Api(e)) => e.message.contains("validatepod.volcano.sh").then_some(()),
            _ => None,
        }
    })
    .await;
}

/// The scheduler creates the `default` queue and the queue controller opens it.
async fn default_queue_open() {
    let client = client(&CONTROL_PLANE.admin_kubeconfig).await;
    wait_open(&client, "default").await;
}

/// Waits until the queue controller has opened queue `name`.
async fn wait_open(client: &kube::Client, name: &str) {
    let queues: Api<DynamicObject> = Api::all_with(client.clone(), &queue_resource());
    wait_for_within(SLOW, &format!("queue {name} to be Open"), || async {
        let q = queues.get_opt(name).await.ok()??;
        (q.data["status"]["state"] == "Open").then_some(())
    })
    .await;
}

/// Creates a queue and waits until the queue controller has opened it.
pub async fn open_queue(client: &kube::Client, name: &str, capability: Option<Value>) {
    let queues: Api<DynamicObject> = Api::all_with(client.clone(), &queue_resource());
    let mut spec = json!({"weight": 1, "reclaimable": false});
    if let Some(c) = capability {
        spec["capability"] = c;
    }
    let queue: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap();
    queues.create(&PostParams::default(), &queue).await.unwrap();
    wait_open(client, name).await;
}
