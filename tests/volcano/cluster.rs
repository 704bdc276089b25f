//! Volcano's scheduler and controller-manager, once per test binary.

use std::sync::LazyLock;
use std::time::Instant;

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

pub struct Volcano {
    _scheduler: Process,
    _controllers: Process,
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
        let mut volcano = Self {
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
                tokio::runtime::Runtime::new()
                    .unwrap()
                    .block_on(default_queue_open())
            })
            .join()
        });
        if ready.is_err() {
            volcano._scheduler.assert_running();
            volcano._controllers.assert_running();
            panic!("Volcano did not come up");
        }
        eprintln!(
            "[volcano] scheduler and controller-manager up in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        volcano
    }
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
