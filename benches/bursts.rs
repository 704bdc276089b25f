//! Bursts, the way workloads arrive (issues 16 and 20), through the local API server:
//!
//! - RayJobs: 50 and 500 jobs of 5 configs created at once; the time from each create's
//!   answer to its shared cluster being seen (a watch), clusters made per config (must be
//!   1), API calls on RayClusters per job. With RAYSHARE_OLD_BIN (a build of commit
//!   a8d52f7 or earlier, which made clusters at admission) the same bursts for that build,
//!   side by side.
//! - A multi-host slice: 256 worker pods of one `numOfHosts: 4` group (64 replicas)
//!   created at once, alternating between two rayshare replicas; the time until every pod is
//!   admitted with its indices, duplicate slots (must be 0), API calls on Leases per pod.
//! - 1,000 Volcano pods at once, under the real Volcano (its scheduler, controller-manager
//!   and webhook-manager with its chart's webhooks, tests/volcano/cluster.rs): each create's
//!   latency (sent to answered) and the burst's wall time, floor first (a namespace rayshare
//!   does not serve: Volcano's webhooks only), then served (rayshare makes each pod's
//!   PodGroup during its admission); pods grouped, API calls on PodGroups per pod, and the
//!   served/floor ratios (rayshare's counters and warnings for the served burst on stderr).
//!   Always the last row: Volcano's webhooks serve every namespace.
//!
//! Run:
//!
//!     cargo bench --bench bursts              # tests/bench/run.sh runs it too
//!     RAYSHARE_OLD_BIN=path/to/old/rayshare cargo bench --bench bursts
//!
//! A benchmark, never a test: under `cargo test` it only says it was skipped. The tables
//! go to stdout and to $RAYSHARE_BENCH_OUT/bursts.md (default target/bench).

#[path = "load/cluster.rs"]
#[allow(dead_code)]
mod cluster;
#[path = "../tests/e2e/harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "../tests/volcano/cluster.rs"]
#[allow(dead_code)]
mod volcano;
#[path = "../tests/kuberay/world.rs"]
#[allow(dead_code)]
mod world;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::runtime::watcher;
use serde_json::{Value, json};

use harness::*;

const CONFIGS: usize = 5;
/// Creates in flight at once (the API server's default limit is 400 mutating requests).
const CONCURRENCY: usize = 100;

/// Latencies, sorted.
struct Latencies(Vec<Duration>);

impl Latencies {
    fn new(mut v: Vec<Duration>) -> Self {
        v.sort();
        Self(v)
    }
    fn at(&self, q: f64) -> Option<Duration> {
        let last = self.0.len().checked_sub(1)?;
        Some(self.0[(last as f64 * q).round() as usize])
    }
    fn q(&self, q: f64) -> String {
        self.at(q).map_or_else(|| "-".into(), ms)
    }
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

/// API calls on `resource` (any verb but WATCH, any client) made while `run` ran.
async fn counting<T>(
    client: &kube::Client,
    resource: &str,
    run: impl Future<Output = T>,
) -> (T, u64) {
    let (out, calls) = counting_by_verb(client, resource, run).await;
    (out, calls.values().sum())
}

/// [`counting`], by verb.
async fn counting_by_verb<T>(
    client: &kube::Client,
    resource: &str,
    run: impl Future<Output = T>,
) -> (T, BTreeMap<String, u64>) {
    let before = cluster::api_requests(client).await;
    let out = run.await;
    let after = cluster::api_requests(client).await;
    let calls = cluster::delta(&before, &after)
        .into_iter()
        .filter_map(|(k, v)| {
            let verb = k.strip_suffix(&format!(" {resource}"))?;
            Some((verb.to_string(), v))
        })
        .collect();
    (out, calls)
}

/// Watches `api` from now on: when each object was first seen. A watch, not polling: its
/// calls are not counted among rayshare's.
struct Seen {
    seen: std::sync::Arc<std::sync::Mutex<BTreeMap<String, Instant>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Seen {
    async fn watch(api: Api<DynamicObject>) -> Self {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::new()));
        let (ready_tx, ready) = tokio::sync::oneshot::channel();
        let task = tokio::spawn({
            let seen = seen.clone();
            async move {
                let mut ready_tx = Some(ready_tx);
                let events = watcher(api, watcher::Config::default());
                futures::pin_mut!(events);
                while let Some(event) = events.next().await {
                    let now = Instant::now();
                    match event {
                        Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                            let name = o.metadata.name.unwrap_or_default();
                            seen.lock().unwrap().entry(name).or_insert(now);
                        }
                        Ok(watcher::Event::InitDone) => {
                            if let Some(tx) = ready_tx.take() {
                                let _ = tx.send(());
                            }
                        }
                        _ => {}
                    }
                }
            }
        });
        let _ = ready.await;
        Self { seen, task }
    }

    /// Waits (at most a minute) until every name in `wanted` was seen.
    async fn all(self, wanted: &BTreeSet<String>) -> BTreeMap<String, Instant> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if wanted
                .iter()
                .all(|w| self.seen.lock().unwrap().contains_key(w))
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.task.abort();
        self.seen.lock().unwrap().clone()
    }
}

/// Creates `objects` in `namespace`, CONCURRENCY at a time: each stored object and when
/// its create was answered.
async fn create_all(env: &TestEnv, objects: Vec<Value>) -> Vec<(Instant, Value)> {
    stream::iter(objects)
        .map(|o| async move {
            let stored = create_in(&env.admin, &env.ns, o, false).await;
            (Instant::now(), stored)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await
}

fn job(i: usize) -> Value {
    let mut job = sample("rayjob-run-a.yaml");
    job["metadata"]["name"] = json!(format!("burst-{i}"));
    let head =
        &mut job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0];
    // The config: one of CONFIGS images; the run: its own RUN_NAME.
    head["image"] = json!(format!("rayproject/ray:2.{}.0", 40 + i % CONFIGS));
    head["env"][0]["value"] = json!(format!("run-{i}"));
    job
}

async fn ray_jobs(label: &str, jobs: usize) -> String {
    // Logging as in production (the tests' instances log at debug).
    let info = ["--log-level".to_string(), "info".to_string()];
    let env = TestEnv::with_args(&format!("burst-{label}-{jobs}"), DEFAULT_CONFIG, 1, &info).await;
    let watch = Seen::watch(env.api(&ray_cluster_resource(), &env.ns)).await;
    let cpu = || (env.instances[0].cpu(), CONTROL_PLANE.cpu());
    let cpu_before = cpu();
    let ((created, seen), calls) = counting(&env.admin, "rayclusters", async {
        let created = create_all(&env, (0..jobs).map(job).collect()).await;
        let wanted: BTreeSet<String> = created
            .iter()
            .filter_map(|(_, j)| j["spec"]["clusterSelector"]["ray.io/cluster"].as_str())
            .map(String::from)
            .collect();
        (created, watch.all(&wanted).await)
    })
    .await;
    let mut per_config: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut latencies = Vec::new();
    for (at, stored) in &created {
        let Some(name) = stored["spec"]["clusterSelector"]["ray.io/cluster"].as_str() else {
            continue;
        };
        let image = &stored["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]
            [0]["image"];
        let config = image.as_str().unwrap_or(name).to_string();
        per_config.entry(config).or_default().insert(name.into());
        let at_seen = seen.get(name).copied().unwrap_or_else(Instant::now);
        latencies.push(at_seen.saturating_duration_since(*at));
    }
    let cpu_after = cpu();
    // What each side spent on the burst: rayshare admitting and provisioning, the control
    // plane storing the jobs and clusters (and calling the webhook).
    let per_job = |before: Duration, after: Duration| {
        after.saturating_sub(before).as_secs_f64() * 1e6 / jobs as f64
    };
    let rayshare_cpu = per_job(cpu_before.0, cpu_after.0);
    let control_plane_cpu = per_job(cpu_before.1, cpu_after.1);
    let rewritten = latencies.len();
    let l = Latencies::new(latencies);
    let counts: Vec<usize> = per_config.values().map(BTreeSet::len).collect();
    format!(
        "| {label} | {jobs} | {rewritten} | {} | {} | {} | {counts:?} | {:.2} | {rayshare_cpu:.0} µs | {control_plane_cpu:.0} µs | {:.3} |",
        l.q(0.5),
        l.q(0.99),
        l.q(1.0),
        calls as f64 / jobs as f64,
        rayshare_cpu / control_plane_cpu.max(1.0),
    )
}

/// 256 worker pods of a `numOfHosts: 4` group with 64 replicas, on a shared cluster that
/// exists (made here as KubeRay would see it), alternating between two replicas.
async fn multi_host() -> String {
    const REPLICAS: usize = 64;
    const HOSTS: usize = 4;
    let env = TestEnv::new("burst-slice", DEFAULT_CONFIG, 2).await;
    let mut job = sample("rayjob-run-a.yaml");
    let group = &mut job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0];
    group["numOfHosts"] = json!(HOSTS);
    group["replicas"] = json!(REPLICAS);
    group["maxReplicas"] = json!(REPLICAS);
    job["metadata"]["labels"] = json!({SHARD_LABEL: "0"});
    let stored = create_in(&env.admin, &env.ns, job, false).await;
    let cluster = stored["spec"]["clusterSelector"]["ray.io/cluster"]
        .as_str()
        .expect("rewritten")
        .to_string();
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    let shared = wait_for("the shared cluster", || async {
        clusters.get_opt(&cluster).await.ok().flatten()
    })
    .await;
    let group_name = shared.data["spec"]["workerGroupSpecs"][0]["groupName"]
        .as_str()
        .unwrap()
        .to_string();
    // Both replicas must know the cluster's hosts before the burst: a probe per replica.
    let pods: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);
    let worker = |i: usize| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": format!("{cluster}-worker-"), "labels": {
                "ray.io/cluster": cluster, "ray.io/group": group_name,
                "ray.io/node-type": "worker", SHARD_LABEL: (i % 2).to_string()}},
            "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}]}})
    };
    for i in 0..2 {
        let probe: Pod = serde_json::from_value(worker(i)).unwrap();
        let dry = PostParams {
            dry_run: true,
            ..Default::default()
        };
        wait_for("each replica to know the cluster's hosts", || async {
            let p = pods.create(&dry, &probe).await.ok()?;
            p.metadata
                .labels?
                .contains_key("ray.io/replica-host-index")
                .then_some(())
        })
        .await;
    }
    let started = Instant::now();
    let (created, calls) = counting(&env.admin, "leases", async {
        create_all(&env, (0..REPLICAS * HOSTS).map(worker).collect()).await
    })
    .await;
    let all_admitted = started.elapsed();
    let mut slots = BTreeSet::new();
    let mut indexed = 0;
    let mut latencies = Vec::new();
    for (at, pod) in &created {
        let labels = &pod["metadata"]["labels"];
        let replica = labels["ray.io/worker-group-replica-index"].as_str();
        let host = labels["ray.io/replica-host-index"].as_str();
        if let (Some(r), Some(h)) = (replica, host) {
            indexed += 1;
            slots.insert((r.to_string(), h.to_string()));
        }
        latencies.push(at.saturating_duration_since(started));
    }
    let l = Latencies::new(latencies);
    format!(
        "| {} pods, {REPLICAS} x {HOSTS} hosts, 2 replicas | {indexed} | {} | {} | {:.0} ms | {} | {:.2} |",
        created.len(),
        l.q(0.5),
        l.q(0.99),
        all_admitted.as_secs_f64() * 1000.0,
        indexed - slots.len(),
        calls as f64 / created.len() as f64
    )
}

/// The group a Volcano pod names (rayshare sets it during admission, Volcano's controller
/// after the pod is stored).
const GROUP_NAME: &str = "scheduling.k8s.io/group-name";
/// On a group rayshare's provisioner took up from the stored pod: the pod's uid.
const POD_UID: &str = "rayshare.io/pod-uid";
/// Where the floor's pods go: a namespace no rayshare registration selects (they select
/// their test's label), so only Volcano's webhooks are in the path.
const FLOOR_NAMESPACE: &str = "burst-volcano-floor";

/// deploy/samples/volcano-pod.yaml (queue `research`), named `task-<i>`.
fn volcano_pod(i: usize) -> Pod {
    let mut p = sample("volcano-pod.yaml");
    p["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("generateName");
    p["metadata"]["name"] = json!(format!("task-{i}"));
    serde_json::from_value(p).unwrap()
}

/// `n` Volcano pods created at once in one namespace, CONCURRENCY in flight.
struct Burst {
    /// Each create's, from its request sent to its answer (refusals included).
    latencies: Latencies,
    /// From the first create sent to the last answered.
    wall: Duration,
    stored: Vec<Pod>,
    /// Each refusal's message.
    refused: Vec<String>,
}

impl Burst {
    async fn run(client: &kube::Client, namespace: &str, n: usize) -> Self {
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let pods: Vec<Pod> = (0..n).map(volcano_pod).collect();
        let started = Instant::now();
        let answers: Vec<(Duration, Result<Pod, kube::Error>)> = stream::iter(pods)
            .map(|pod| {
                let api = &api;
                async move {
                    let sent = Instant::now();
                    let created = api.create(&PostParams::default(), &pod).await;
                    (sent.elapsed(), created)
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        let wall = started.elapsed();
        let latencies = Latencies::new(answers.iter().map(|(l, _)| *l).collect());
        let mut stored = Vec::new();
        let mut refused = Vec::new();
        for (_, answer) in answers {
            match answer {
                Ok(pod) => stored.push(pod),
                Err(e) => refused.push(e.to_string()),
            }
        }
        if !refused.is_empty() {
            eprintln!(
                "[bursts] {namespace}: {} of {n} creates refused, e.g. {:?}",
                refused.len(),
                &refused[..refused.len().min(3)]
            );
        }
        Self {
            latencies,
            wall,
            stored,
            refused,
        }
    }

    fn row(&self, label: &str, grouped: &str, calls: &BTreeMap<String, u64>) -> String {
        let n = self.stored.len() + self.refused.len();
        format!(
            "| {label} | {} | {grouped} | {} | {} | {} | {} | {} |",
            self.stored.len(),
            self.latencies.q(0.5),
            self.latencies.q(0.99),
            self.latencies.q(1.0),
            ms(self.wall),
            per_pod(calls, n),
        )
    }
}

/// Calls per pod: the total, then by verb (most first).
fn per_pod(calls: &BTreeMap<String, u64>, n: usize) -> String {
    let per = |c: u64| c as f64 / n.max(1) as f64;
    let mut by_verb: Vec<(&String, &u64)> = calls.iter().filter(|(_, c)| **c > 0).collect();
    by_verb.sort_by(|a, b| b.1.cmp(a.1));
    let parts: Vec<String> = by_verb
        .iter()
        .map(|(verb, c)| format!("{verb} {:.2}", per(**c)))
        .collect();
    format!("{:.2} ({})", per(calls.values().sum()), parts.join(", "))
}

/// Polls `check` every 250 ms for at most SLOW; says on stderr when it never held.
async fn settle<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        if started.elapsed() > world::SLOW {
            eprintln!(
                "[bursts] gave up waiting for {what} after {:?}",
                world::SLOW
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!(
        "[bursts] {what}: {:.1}s after the burst",
        started.elapsed().as_secs_f64()
    );
}

/// Deletes the namespace's pods and PodGroups, and waits until both are gone.
async fn clear(client: &kube::Client, namespace: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let groups: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &pod_group_resource());
    let all = ListParams::default();
    pods.delete_collection(&DeleteParams::default(), &all)
        .await
        .unwrap();
    groups
        .delete_collection(&DeleteParams::default(), &all)
        .await
        .unwrap();
    settle(&format!("{namespace}'s pods and groups gone"), || async {
        let pods = pods.list(&all).await.map(|l| l.items.len());
        let groups = groups.list(&all).await.map(|l| l.items.len());
        matches!((pods, groups), (Ok(0), Ok(0)))
    })
    .await;
}

/// What rayshare says it did (its metrics) and its warnings by message, on stderr.
async fn report_rayshare(instance: &Rayshare) {
    let metrics = instance.metrics().await;
    let wanted = [
        "rayshare_objects_created_total",
        "rayshare_objects_reused_total",
        "rayshare_errors_total",
        "rayshare_admission_duration_seconds_sum{kind=\"Pod\"",
        "rayshare_admission_duration_seconds_count{kind=\"Pod\"",
    ];
    for line in metrics
        .lines()
        .filter(|l| wanted.iter().any(|m| l.starts_with(m)))
    {
        eprintln!("[bursts] rayshare: {line}");
    }
    let mut warnings: BTreeMap<String, usize> = BTreeMap::new();
    for line in instance.log_text().lines() {
        if let Some((_, rest)) = line.split_once(" WARN ") {
            let what: Vec<&str> = rest
                .split_whitespace()
                .take_while(|w| !w.contains('='))
                .collect();
            *warnings.entry(what.join(" ")).or_default() += 1;
        }
    }
    eprintln!("[bursts] rayshare's warnings: {warnings:?}");
}

/// `n` Volcano pods at once, under the real Volcano (tests/volcano/cluster.rs): floor (a
/// namespace rayshare does not serve) first, its pods then deleted, then served.
async fn volcano_pods(n: usize) -> [String; 3] {
    let _volcano = &*volcano::VOLCANO;
    // Logging as in production (the tests' instances log at debug).
    let info = ["--log-level".to_string(), "info".to_string()];
    let env = TestEnv::with_args(&format!("burst-volcano-{n}"), DEFAULT_CONFIG, 1, &info).await;
    // The sample's queue, Open (Volcano's pods/validate refuses a pod in a queue that is
    // not), with room for none of its pods (2 CPUs each): nothing is bound, so the
    // scheduler and kwok do not run a thousand pods on these cores.
    volcano::open_queue(&env.admin, "research", Some(json!({"cpu": "1"}))).await;
    create_namespace(&env.admin, FLOOR_NAMESPACE, &[]).await;

    // Floor: Volcano's webhooks only; its pg-controller groups each pod once stored.
    let floor_pods: Api<Pod> = Api::namespaced(env.admin.clone(), FLOOR_NAMESPACE);
    let (floor, floor_calls) = counting_by_verb(&env.admin, "podgroups", async {
        let burst = Burst::run(&env.admin, FLOOR_NAMESPACE, n).await;
        settle("Volcano's controller to group every floor pod", || async {
            let Ok(list) = floor_pods.list(&ListParams::default()).await else {
                return false;
            };
            list.items
                .iter()
                .all(|p| p.annotations().contains_key(GROUP_NAME))
        })
        .await;
        burst
    })
    .await;
    clear(&env.admin, FLOOR_NAMESPACE).await;

    // Served: rayshare makes each pod's group during its admission, then Volcano's
    // webhooks see it; the provisioner takes each group up from the stored pod.
    let groups = env.api(&pod_group_resource(), &env.ns);
    let lists = std::sync::atomic::AtomicU64::new(0);
    let (served, mut served_calls) = counting_by_verb(&env.admin, "podgroups", async {
        let burst = Burst::run(&env.admin, &env.ns, n).await;
        settle("rayshare to take every group up", || async {
            lists.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Ok(list) = groups.list(&ListParams::default()).await else {
                return false;
            };
            let taken_up: BTreeMap<String, String> = list
                .items
                .iter()
                .filter_map(|g| Some((g.name_any(), g.annotations().get(POD_UID)?.clone())))
                .collect();
            burst.stored.iter().all(|p| {
                p.annotations()
                    .get(GROUP_NAME)
                    .is_none_or(|g| taken_up.get(g) == p.metadata.uid.as_ref())
            })
        })
        .await;
        burst
    })
    .await;
    // Not the workload's: this benchmark's own polls.
    if let Some(list) = served_calls.get_mut("LIST") {
        *list = list.saturating_sub(lists.into_inner());
    }
    let existing: BTreeSet<String> = groups
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|g| g.name_any())
        .collect();
    let grouped = served
        .stored
        .iter()
        .filter(|p| {
            p.annotations()
                .get(GROUP_NAME)
                .is_some_and(|g| existing.contains(g))
        })
        .count();

    report_rayshare(&env.instances[0]).await;

    let ratio = |s: Option<Duration>, f: Option<Duration>| match (s, f) {
        (Some(s), Some(f)) if !f.is_zero() => format!("{:.2}", s.as_secs_f64() / f.as_secs_f64()),
        _ => "-".into(),
    };
    let (s, f) = (&served.latencies, &floor.latencies);
    [
        served.row(
            &format!("served: {n} Volcano pods, rayshare + Volcano's webhooks"),
            &grouped.to_string(),
            &served_calls,
        ),
        floor.row(
            &format!("floor: {n} Volcano pods, Volcano's webhooks only"),
            "-",
            &floor_calls,
        ),
        format!(
            "| served / floor | | | {} | {} | | {} | |",
            ratio(s.at(0.5), f.at(0.5)),
            ratio(s.at(0.99), f.at(0.99)),
            ratio(Some(served.wall), Some(floor.wall)),
        ),
    ]
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("bursts benchmark: skipped outside `cargo bench`");
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut out = vec![
        format!("RayJobs of {CONFIGS} configs created at once ({CONCURRENCY} creates in flight); time from each create's answer to its shared cluster seen by a watch."),
        String::new(),
        "CPU per job: what the rayshare process and the control plane process (kube-apiserver, etcd, scheduler, controller-manager) used during the burst (/proc/<pid>/stat, 10 ms ticks), divided by the jobs.".into(),
        String::new(),
        "| build | jobs | rewritten | p50 | p99 | max | clusters per config | RayCluster calls / job | rayshare CPU / job | control plane CPU / job | rayshare / control plane |".into(),
        "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|".into(),
    ];
    let old = std::env::var("RAYSHARE_OLD_BIN").ok();
    for jobs in [50, 500] {
        if let Some(path) = &old {
            *OTHER_BUILD.lock().unwrap() = Some(Build {
                path: path.into(),
                predates_instance: true,
            });
            out.push(rt.block_on(ray_jobs("old", jobs)));
            *OTHER_BUILD.lock().unwrap() = None;
        }
        out.push(rt.block_on(ray_jobs("new", jobs)));
    }
    out.extend([
        String::new(),
        "A multi-host slice: worker pods created at once, alternating between two rayshare replicas; time from the burst's start to each pod's create being answered with its indices.".into(),
        String::new(),
        "| burst | indexed | p50 | p99 | all admitted | duplicate slots | Lease calls / pod |".into(),
        "|---|---:|---:|---:|---:|---:|---:|".into(),
        rt.block_on(multi_host()),
        String::new(),
        format!("Volcano pods (deploy/samples/volcano-pod.yaml, each named; its queue `research` Open, room for none of them) created at once ({CONCURRENCY} creates in flight) under Volcano v1.10.0's scheduler, controller-manager and webhook-manager with its chart's webhooks, which serve every namespace. Floor first: a namespace rayshare does not serve, so only Volcano's webhooks are in the path (its controller groups each pod after it is stored); its pods and groups are then deleted. Then served: a namespace rayshare serves, which makes each pod's PodGroup during its admission, before Volcano's pods/validate looks for it."),
        String::new(),
        "Latency: each create, from its request sent to its answer (the pod stored, past every webhook in the path); wall: from the first create sent to the last answered. Grouped: the stored pod names a PodGroup that exists (a pod rayshare passes unchanged, overloaded say, is left to Volcano's controller). PodGroup calls: every client's (rayshare, Volcano's webhook, controller and scheduler; not WATCH) from the first create until every pod's group is settled (served: taken up by rayshare's provisioner; floor: made by Volcano's controller), per pod, by verb.".into(),
        String::new(),
        "| burst | accepted | grouped | p50 | p99 | max | wall | PodGroup calls / pod |".into(),
        "|---|---:|---:|---:|---:|---:|---:|---|".into(),
    ]);
    // Last: Volcano's webhooks, once started, are in the path of every namespace.
    out.extend(rt.block_on(volcano_pods(1000)));
    let text = out.join("\n");
    println!("{text}");
    let dir = std::env::var("RAYSHARE_BENCH_OUT").unwrap_or_else(|_| "target/bench".into());
    let _ = std::fs::create_dir_all(&dir);
    std::fs::write(format!("{dir}/bursts.md"), text + "\n").expect("writing bursts.md");
}
