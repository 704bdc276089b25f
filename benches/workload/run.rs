//! Plays the trace into one namespace with the KubeRay operator running, and watches
//! what it costs: each task's wait, each Ray pod's life, the RayClusters made.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::runtime::watcher;
use serde_json::{Value, json};

use crate::Params;
use crate::harness::*;
use crate::trace::{CONFIGS, Task};

/// What one run of the trace cost.
pub struct Outcome {
    /// Each started task's wait: its create answered -> KubeRay moved it past Initializing.
    pub waits: Vec<Duration>,
    /// The same, by config (index into CONFIGS).
    pub by_config: Vec<Vec<Duration>>,
    /// Each task's wait in the trace's order (`None`: not started).
    pub per_task: Vec<Option<Duration>>,
    /// Tasks that never started within the deadline.
    pub not_started: usize,
    /// Head and worker pods: the sum of (Running -> deleted), and of (created -> deleted).
    pub pod_seconds_running: f64,
    pub pod_seconds_held: f64,
    pub pods: usize,
    pub clusters: usize,
    /// From the first arrival to the last Ray pod gone.
    pub wall: Duration,
}

#[derive(Default, Clone, Copy)]
struct PodLife {
    created: Option<Instant>,
    running: Option<Instant>,
    gone: Option<Instant>,
}

#[derive(Default)]
struct Seen {
    /// RayJob name -> when first seen past Initializing.
    started: BTreeMap<String, Instant>,
    /// Ray pod uid -> its life.
    pods: BTreeMap<String, PodLife>,
    /// RayCluster uids.
    clusters: std::collections::BTreeSet<String>,
}

type Shared = Arc<Mutex<Seen>>;

fn watch(
    api: Api<DynamicObject>,
    lp: watcher::Config,
    seen: Shared,
    on: fn(&mut Seen, Instant, &DynamicObject, bool),
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let events = watcher(api, lp);
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            let now = Instant::now();
            match event {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                    on(&mut seen.lock().unwrap(), now, &o, false)
                }
                Ok(watcher::Event::Delete(o)) => on(&mut seen.lock().unwrap(), now, &o, true),
                _ => {}
            }
        }
    })
}

fn on_job(seen: &mut Seen, now: Instant, o: &DynamicObject, _deleted: bool) {
    let state = o.data["status"]["jobDeploymentStatus"]
        .as_str()
        .unwrap_or("");
    if !["", "New", "Initializing"].contains(&state) {
        let name = o.metadata.name.clone().unwrap_or_default();
        seen.started.entry(name).or_insert(now);
    }
}

fn on_pod(seen: &mut Seen, now: Instant, o: &DynamicObject, deleted: bool) {
    let uid = o.metadata.uid.clone().unwrap_or_default();
    let life = seen.pods.entry(uid).or_default();
    life.created.get_or_insert(now);
    if o.data["status"]["phase"] == "Running" {
        life.running.get_or_insert(now);
    }
    if deleted || o.metadata.deletion_timestamp.is_some() {
        life.gone.get_or_insert(now);
    }
}

fn on_cluster(seen: &mut Seen, _now: Instant, o: &DynamicObject, _deleted: bool) {
    seen.clusters
        .insert(o.metadata.uid.clone().unwrap_or_default());
}

/// Task `i` as Flyte would submit it: the sample RayJob with the config's image and
/// workers, its own run, and the kwok annotations for the cold start and the submitter.
pub fn job(i: usize, task: &Task, p: &Params) -> Value {
    let config = &CONFIGS[task.config];
    let mut job = sample("rayjob-run-a.yaml");
    let run = format!("r{i}");
    job["metadata"]["name"] = json!(format!("{}-{i}", config.name));
    job["metadata"]["labels"]["run"] = json!(run);
    let delay =
        json!({"rayshare.test/start-delay": format!("{}ms", p.cold_start_wall().as_millis())});
    let spec = &mut job["spec"];
    spec["submitterPodTemplate"]["metadata"] =
        json!({"annotations": {"rayshare.test/keep-running": "true"}});
    let head = &mut spec["rayClusterSpec"]["headGroupSpec"]["template"];
    head["metadata"]["annotations"] = delay.clone();
    head["metadata"]["labels"]["run"] = json!(run);
    head["spec"]["containers"][0]["image"] = json!(config.image);
    head["spec"]["containers"][0]["env"][0]["value"] = json!(run);
    let group = &mut spec["rayClusterSpec"]["workerGroupSpecs"][0];
    for key in ["replicas", "minReplicas", "maxReplicas"] {
        group[key] = json!(config.workers);
    }
    let worker = &mut group["template"];
    worker["metadata"]["annotations"] = delay;
    worker["metadata"]["labels"]["run"] = json!(run);
    worker["spec"]["containers"][0]["image"] = json!(config.image);
    worker["spec"]["containers"][0]["env"][0]["value"] = json!(run);
    job
}

/// One task: arrive, wait until KubeRay starts it, let the driver run, then delete the
/// RayJob (as Flyte's abort or a cleanup would once the task is done). Its wait, if it
/// started.
async fn play(
    env: &TestEnv,
    namespace: &str,
    seen: &Shared,
    start: Instant,
    (i, task): (usize, &Task),
    p: &Params,
) -> Option<Duration> {
    tokio::time::sleep_until((start + p.wall(task.at)).into()).await;
    let stored = create_in(&env.admin, namespace, job(i, task, p), false).await;
    let created = Instant::now();
    let name = stored["metadata"]["name"].as_str().unwrap().to_string();
    let deadline = created + p.start_deadline;
    let started = loop {
        if let Some(at) = seen.lock().unwrap().started.get(&name) {
            break Some(*at);
        }
        if Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    if let Some(at) = started {
        tokio::time::sleep_until((at + p.wall(task.run)).into()).await;
    }
    let jobs = env.api(&ray_job_resource(), namespace);
    if let Err(e) = jobs.delete(&name, &DeleteParams::default()).await {
        eprintln!("[workload] deleting {name}: {e}");
    }
    let wait = started.map(|at| at.saturating_duration_since(created));
    // Which cluster served it, for reading a run's story on stderr.
    let cluster = stored["spec"]["clusterSelector"]["ray.io/cluster"]
        .as_str()
        .unwrap_or("its own");
    eprintln!(
        "[workload] {name} at {:.0} s -> {cluster}: waited {wait:?}",
        task.at
    );
    wait
}

/// Plays `tasks` into `namespace` (served by rayshare or not) and waits, after the last
/// task, until every Ray pod is gone (at most `p.drain_deadline`).
pub async fn run(env: &TestEnv, namespace: &str, tasks: &[Task], p: &Params) -> Outcome {
    let seen: Shared = Arc::default();
    let all = watcher::Config::default();
    let ray_pods = watcher::Config::default().labels("ray.io/is-ray-node=yes");
    let watches = [
        watch(
            env.api(&ray_job_resource(), namespace),
            all.clone(),
            seen.clone(),
            on_job,
        ),
        watch(
            env.api(&ray_cluster_resource(), namespace),
            all,
            seen.clone(),
            on_cluster,
        ),
        watch(
            env.api(&pod_resource(), namespace),
            ray_pods,
            seen.clone(),
            on_pod,
        ),
    ];
    let start = Instant::now() + Duration::from_millis(500);
    // In the tasks' order (a FuturesUnordered would give them in the order they end).
    let results: Vec<Option<Duration>> = futures::future::join_all(
        tasks
            .iter()
            .enumerate()
            .map(|t| play(env, namespace, &seen, start, t, p)),
    )
    .await;
    eprintln!(
        "[workload] {namespace}: every task done after {:.0} s; waiting for the Ray pods to go",
        start.elapsed().as_secs_f64()
    );
    let pods = Api::<DynamicObject>::namespaced_with(env.admin.clone(), namespace, &pod_resource());
    let deadline = Instant::now() + p.drain_deadline;
    while Instant::now() < deadline {
        let left = pods
            .list(&ListParams::default().labels("ray.io/is-ray-node=yes"))
            .await
            .map_or(1, |l| l.items.len());
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let end = Instant::now();
    for w in watches {
        w.abort();
    }
    let seen = seen.lock().unwrap();
    let life = |from: Option<Instant>, gone: Option<Instant>| {
        from.map_or(0.0, |f| {
            gone.unwrap_or(end)
                .saturating_duration_since(f)
                .as_secs_f64()
        })
    };
    let waits: Vec<Duration> = results.iter().flatten().copied().collect();
    let mut by_config = vec![Vec::new(); CONFIGS.len()];
    for (task, wait) in tasks.iter().zip(&results) {
        by_config[task.config].extend(*wait);
    }
    Outcome {
        per_task: results.clone(),
        not_started: results.len() - waits.len(),
        waits,
        by_config,
        pod_seconds_running: seen.pods.values().map(|l| life(l.running, l.gone)).sum(),
        pod_seconds_held: seen.pods.values().map(|l| life(l.created, l.gone)).sum(),
        pods: seen.pods.len(),
        clusters: seen.clusters.len(),
        wall: end.saturating_duration_since(start),
    }
}

fn pod_resource() -> kube::core::ApiResource {
    resource("", "v1", "Pod", "pods")
}
