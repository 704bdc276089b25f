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
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use crate::harness::*;

mod dashboard;
mod observe;
mod operator;

// Re-exported at the world's own path. Not every binary that includes the world uses both
// (tests/volcano starts no KubeRay), and the includers' allow(dead_code) does not cover an
// unused re-export.
pub use dashboard::Dashboard;
#[allow(unused_imports)]
pub use observe::*;
#[allow(unused_imports)]
pub use operator::*;

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

/// The project's own stages (a cold start of `rayshare.test/start-delay`, a Job's pod
/// kept running by `rayshare.test/keep-running`); see the file.
pub const OWN_STAGES: &str = "tests/kit/src/world/stages.yaml";

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
    processes: Arc<Mutex<Vec<Process>>>,
    pub dir: PathBuf,
    pub nodes: Vec<String>,
}

pub static WORLD: LazyLock<World> = LazyLock::new(|| World::start(true));
/// The world for the real Volcano scheduler: no kube-scheduler profile named `volcano`.
pub static WORLD_FOR_VOLCANO: LazyLock<World> = LazyLock::new(|| World::start(false));

/// The processes of the world started last in this binary. One runs at a time: the
/// benchmarks start both kinds on one API server ([`WORLD`] for KubeRay, then
/// [`WORLD_FOR_VOLCANO`]), and two kube-schedulers or controller-managers without leader
/// election would each act on every object. Starting a world stops the one before it,
/// whose static is then of no more use; its nodes stay, and the next world takes them up.
static RUNNING: Mutex<Option<Arc<Mutex<Vec<Process>>>>> = Mutex::new(None);

impl World {
    fn start(volcano_stand_in: bool) -> Self {
        let cp = &*CONTROL_PLANE;
        if let Some(before) = RUNNING.lock().unwrap().take() {
            eprintln!("[world] stopping the world before this one (same API server)");
            before.lock().unwrap().clear();
        }
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
        // Ours, only for pods that ask by annotation: a cold start, a submitter kept running.
        kwok_cmd.arg("--config").arg(repo().join(OWN_STAGES));
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
        let cluster = Self {
            processes: Arc::new(Mutex::new(processes)),
            dir,
            nodes: NODES.iter().map(|(n, _)| n.to_string()).collect(),
        };
        let probe = if volcano_stand_in {
            "probe-stand-in"
        } else {
            "probe-volcano"
        };
        let ready = std::thread::scope(|s| {
            s.spawn(|| {
                tokio::runtime::Runtime::new()
                    .unwrap()
                    .block_on(cluster.setup(probe))
            })
            .join()
        });
        if ready.is_err() {
            for p in cluster.processes.lock().unwrap().iter_mut() {
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
        *RUNNING.lock().unwrap() = Some(cluster.processes.clone());
        cluster
    }

    /// Nodes (kept when a world before this one made them), then proof that each
    /// component works: nodes Ready (kwok), a default ServiceAccount (controller-manager),
    /// a pod placed and Running (scheduler, kwok): `probe`, a name of this world's own, as
    /// the one before may have left its probe terminating.
    async fn setup(&self, probe: &str) {
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
            match nodes.create(&PostParams::default(), &node).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => panic!("creating node {name}: {e}"),
            }
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
        let name = probe;
        let probe: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "100m"}}}]},
        }))
        .unwrap();
        pods.create(&PostParams::default(), &probe).await.unwrap();
        wait_for_within(SLOW, "a probe pod to be scheduled and Running", || async {
            (pod_phase(&pods.get(name).await.ok()?) == "Running").then_some(())
        })
        .await;
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }
}
