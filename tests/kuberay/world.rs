//! The cluster around the API server, for tests through the real KubeRay operator:
//! kube-scheduler and kube-controller-manager (run by the control plane's own binary, from
//! the same k8s.io/kubernetes module), kwok with a few fake nodes (pods scheduled onto them
//! become Running and Ready; no container runs), and per test a KubeRay operator that
//! watches only that test's namespace, with that test's feature gates and batch scheduler.
//!
//! Started lazily, once per test binary, on top of the harness's control plane; every
//! process dies with the test binary (see `harness::supervised`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Node, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::harness::*;

/// How long the world's controllers get for what they do on their own schedule (2 cores,
/// shared with compilers: generous).
pub const SLOW: Duration = Duration::from_secs(120);

/// A helper process with its log, stopped when dropped.
pub struct Process {
    name: String,
    child: Child,
    pub log: PathBuf,
}

impl Process {
    /// Starts `cmd` (made by `harness::supervised`), stdout and stderr to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: PathBuf) -> Self {
        let out = std::fs::File::create(&log).unwrap();
        let child = cmd
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Self {
            name: name.into(),
            child,
            log,
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Fails loudly when the process already died (a bad flag, a crash).
    pub fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "{} exited ({status}); its log {}:\n{}",
                self.name,
                self.log.display(),
                tail(&self.log)
            );
        }
    }

    pub fn stop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- {} log {} ---\n{}",
                self.name,
                self.log.display(),
                tail(&self.log)
            );
        }
        self.stop();
    }
}

/// The fake nodes: (name, extended resources). Every node has 64 CPUs, 256 GiB and room
/// for 250 pods; nothing runs there, so the numbers only steer the scheduler.
const NODES: &[(&str, &[(&str, &str)])] = &[
    ("kwok-cpu-0", &[]),
    ("kwok-cpu-1", &[]),
    ("kwok-cpu-2", &[]),
    ("kwok-gpu-0", &[("nvidia.com/gpu", "8")]),
    ("kwok-tpu-0", &[("google.com/tpu", "32")]),
    ("kwok-tpu-1", &[("google.com/tpu", "32")]),
    ("kwok-tpu-2", &[("google.com/tpu", "32")]),
    ("kwok-tpu-3", &[("google.com/tpu", "32")]),
];

/// The annotation kwok is told to manage nodes by.
const KWOK_NODE: (&str, &str) = ("kwok.x-k8s.io/node", "fake");

/// kwok's default stages, as `kwokctl` configures them: nodes become Ready and keep their
/// leases; pods become Running and Ready, pods of Jobs then Succeeded, deleted pods go.
const KWOK_STAGES: &[&str] = &[
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
];

/// kube-scheduler's config: no leader election; besides the default profile, unless the
/// real Volcano scheduler runs (tests/volcano), a profile named `volcano`, so pods that
/// KubeRay (`--batch-scheduler=volcano`) hands to Volcano get placed too. It stands in for
/// Volcano's scheduler without its gang semantics.
fn scheduler_config(kubeconfig: &Path, volcano_stand_in: bool) -> String {
    let stand_in = if volcano_stand_in {
        "- schedulerName: volcano\n"
    } else {
        ""
    };
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
         clientConnection:\n  kubeconfig: {}\n  qps: 100\n  burst: 200\n\
         leaderElection:\n  leaderElect: false\n\
         profiles:\n- schedulerName: default-scheduler\n{stand_in}",
        kubeconfig.display()
    )
}

/// The cluster around the control plane, once per test binary.
pub struct World {
    processes: Vec<Process>,
    pub dir: PathBuf,
    pub nodes: Vec<String>,
}

pub static WORLD: LazyLock<World> = LazyLock::new(|| World::start(true));
/// The world for the real Volcano scheduler: no kube-scheduler profile named `volcano`.
pub static WORLD_FOR_VOLCANO: LazyLock<World> = LazyLock::new(|| World::start(false));

impl World {
    fn start(volcano_stand_in: bool) -> Self {
        let cp = &*CONTROL_PLANE;
        let started = Instant::now();
        let kwok = run_script(&repo().join("tests/tools/build-kwok.sh"));
        let stages = run_script_with(&repo().join("tests/tools/build-kwok.sh"), &["--stages"]);
        let dir = cp.dir.join("world");
        std::fs::create_dir_all(&dir).unwrap();
        let admin = &cp.admin_kubeconfig;
        let pki = cp.dir.join("pki");

        let scheduler_yaml = dir.join("kube-scheduler.yaml");
        std::fs::write(&scheduler_yaml, scheduler_config(admin, volcano_stand_in)).unwrap();
        let mut scheduler = supervised(&cp.bin);
        scheduler
            .arg("kube-scheduler")
            .arg("--config")
            .arg(&scheduler_yaml)
            // No serving: nothing scrapes it, and no port to pick.
            .arg("--secure-port=0");

        let mut controller_manager = supervised(&cp.bin);
        controller_manager
            .arg("kube-controller-manager")
            .arg("--kubeconfig")
            .arg(admin)
            .args(["--leader-elect=false", "--secure-port=0"])
            .args(["--cluster-name=rayshare-e2e", "--controllers=*"])
            // The service-account token controller signs with the API server's key.
            .arg("--service-account-private-key-file")
            .arg(pki.join("sa.key"))
            .arg("--root-ca-file")
            .arg(pki.join("ca.crt"));

        let mut kwok_cmd = supervised(&kwok);
        kwok_cmd
            .arg("--kubeconfig")
            .arg(admin)
            .arg("--manage-all-nodes=false")
            .arg(format!(
                "--manage-nodes-with-annotation-selector={}={}",
                KWOK_NODE.0, KWOK_NODE.1
            ))
            // Pod IPs, away from the API server's service range (10.0.0.0/24).
            .arg("--cidr=10.244.0.0/16")
            // Keep the node leases fresh, so the node lifecycle controller never evicts.
            .arg("--node-lease-duration-seconds=40");
        for stage in KWOK_STAGES {
            kwok_cmd.arg("--config").arg(stages.join(stage));
        }
        // kwok also reads ~/.kwok/kwok.yaml: point its work dir at ours.
        kwok_cmd.env("KWOK_WORKDIR", dir.join("kwok"));

        let processes = vec![
            Process::spawn("kube-scheduler", scheduler, dir.join("kube-scheduler.log")),
            Process::spawn(
                "kube-controller-manager",
                controller_manager,
                dir.join("kube-controller-manager.log"),
            ),
            Process::spawn("kwok", kwok_cmd, dir.join("kwok.log")),
        ];
        let mut cluster = Self {
            processes,
            dir,
            nodes: NODES.iter().map(|(n, _)| n.to_string()).collect(),
        };
        let ready = std::thread::scope(|s| {
            s.spawn(|| {
                tokio::runtime::Runtime::new()
                    .unwrap()
                    .block_on(cluster.setup())
            })
            .join()
        });
        if ready.is_err() {
            for p in &mut cluster.processes {
                p.assert_running();
                eprintln!("--- {} ---\n{}", p.name, tail(&p.log));
            }
            panic!("the cluster did not come up");
        }
        eprintln!(
            "[world] scheduler, controller-manager, kwok and {} nodes up in {:.1}s",
            NODES.len(),
            started.elapsed().as_secs_f64()
        );
        cluster
    }

    /// Nodes, then proof that each component works: nodes Ready (kwok), a default
    /// ServiceAccount (controller-manager), a pod placed and Running (scheduler, kwok).
    async fn setup(&self) {
        let client = client(&CONTROL_PLANE.admin_kubeconfig).await;
        let nodes: Api<Node> = Api::all(client.clone());
        for (name, extra) in NODES {
            let mut capacity = json!({"cpu": "64", "memory": "256Gi", "pods": "250"});
            for (resource, amount) in *extra {
                capacity[*resource] = json!(amount);
            }
            let node: Node = serde_json::from_value(json!({
                "metadata": {
                    "name": name,
                    "annotations": {KWOK_NODE.0: KWOK_NODE.1},
                    "labels": {"type": "kwok", "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
                },
                "status": {"capacity": capacity, "allocatable": capacity},
            }))
            .unwrap();
            nodes.create(&PostParams::default(), &node).await.unwrap();
        }
        wait_for_within(SLOW, "every fake node to be Ready (kwok)", || async {
            let list = nodes.list(&ListParams::default()).await.ok()?;
            let ready = list.items.iter().filter(|n| node_ready(n)).count();
            (ready == NODES.len()).then_some(())
        })
        .await;

        let probe_ns = "rayshare-world";
        create_namespace(&client, probe_ns, &[]).await;
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), probe_ns);
        wait_for_within(
            SLOW,
            "a default ServiceAccount (kube-controller-manager)",
            || async { accounts.get_opt("default").await.ok()?.map(|_| ()) },
        )
        .await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), probe_ns);
        let probe: Pod = serde_json::from_value(json!({
            "metadata": {"name": "probe"},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "100m"}}}]},
        }))
        .unwrap();
        pods.create(&PostParams::default(), &probe).await.unwrap();
        wait_for_within(SLOW, "a probe pod to be scheduled and Running", || async {
            (pod_phase(&pods.get("probe").await.ok()?) == "Running").then_some(())
        })
        .await;
        pods.delete("probe", &DeleteParams::default())
            .await
            .unwrap();
    }
}

pub fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

pub fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

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

/// Events about objects of `kind` in `namespace`.
pub async fn events(client: &Client, namespace: &str, kind: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().fields(&format!("involvedObject.kind={kind}")))
        .await
        .unwrap()
        .items
}

/// "reason (name): message" of each event, for assertion messages.
pub fn describe(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            format!(
                "{} {} ({}): {}",
                e.type_.as_deref().unwrap_or(""),
                e.reason.as_deref().unwrap_or(""),
                e.involved_object.name.as_deref().unwrap_or(""),
                e.message.as_deref().unwrap_or("")
            )
        })
        .collect()
}

/// The objects of `ar` in `namespace`, as JSON.
pub async fn list_json(
    client: &Client,
    ar: &kube::core::ApiResource,
    namespace: &str,
    labels: &str,
) -> Vec<Value> {
    Api::<kube::api::DynamicObject>::namespaced_with(client.clone(), namespace, ar)
        .list(&ListParams::default().labels(labels))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|o| serde_json::to_value(o).unwrap())
        .collect()
}

/// Ray pods (head and workers) in `namespace`, by RayCluster name.
pub async fn ray_pods(
    client: &Client,
    namespace: &str,
) -> std::collections::BTreeMap<String, Vec<Pod>> {
    let mut out = std::collections::BTreeMap::<String, Vec<Pod>>::new();
    let pods = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels("ray.io/is-ray-node=yes"))
        .await
        .unwrap();
    for pod in pods {
        if let Some(cluster) = pod.labels().get("ray.io/cluster").cloned() {
            out.entry(cluster).or_default().push(pod);
        }
    }
    out
}
