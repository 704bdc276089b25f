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
//! - 1,000 Volcano pods at once: the time from each create's answer to its PodGroup being
//!   seen, API calls on PodGroups per pod.
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

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, PostParams};
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
    fn q(&self, q: f64) -> String {
        let Some(last) = self.0.len().checked_sub(1) else {
            return "-".into();
        };
        let d = self.0[(last as f64 * q).round() as usize];
        format!("{:.0} ms", d.as_secs_f64() * 1000.0)
    }
}

/// API calls on `resource` (any verb but WATCH) made while `run` ran.
async fn counting<T>(
    client: &kube::Client,
    resource: &str,
    run: impl Future<Output = T>,
) -> (T, u64) {
    let before = cluster::api_requests(client).await;
    let out = run.await;
    let after = cluster::api_requests(client).await;
    let calls = cluster::delta(&before, &after)
        .iter()
        .filter(|(k, _)| k.ends_with(&format!(" {resource}")))
        .map(|(_, v)| v)
        .sum();
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

async fn volcano_pods(n: usize) -> String {
    let env = TestEnv::new(&format!("burst-volcano-{n}"), DEFAULT_CONFIG, 1).await;
    let watch = Seen::watch(env.api(&pod_group_resource(), &env.ns)).await;
    let pod = |i: usize| {
        let mut p = sample("volcano-pod.yaml");
        p["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("generateName");
        p["metadata"]["name"] = json!(format!("task-{i}"));
        p
    };
    let ((created, seen), calls) = counting(&env.admin, "podgroups", async {
        let created = create_all(&env, (0..n).map(pod).collect()).await;
        let wanted: BTreeSet<String> = created
            .iter()
            .filter_map(|(_, p)| {
                p["metadata"]["annotations"]["scheduling.k8s.io/group-name"].as_str()
            })
            .map(String::from)
            .collect();
        (created, watch.all(&wanted).await)
    })
    .await;
    let mut latencies = Vec::new();
    for (at, pod) in &created {
        if let Some(g) = pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"].as_str() {
            let at_seen = seen.get(g).copied().unwrap_or_else(Instant::now);
            latencies.push(at_seen.saturating_duration_since(*at));
        }
    }
    let grouped = latencies.len();
    let l = Latencies::new(latencies);
    format!(
        "| {n} Volcano pods | {grouped} | {} | {} | {} | {:.2} |",
        l.q(0.5),
        l.q(0.99),
        l.q(1.0),
        calls as f64 / n as f64
    )
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
        "Volcano pods created at once; time from each create's answer to its PodGroup seen by a watch.".into(),
        String::new(),
        "| burst | grouped | p50 | p99 | max | PodGroup calls / pod |".into(),
        "|---|---:|---:|---:|---:|---:|".into(),
        rt.block_on(volcano_pods(1000)),
    ]);
    let text = out.join("\n");
    println!("{text}");
    let dir = std::env::var("RAYSHARE_BENCH_OUT").unwrap_or_else(|_| "target/bench".into());
    let _ = std::fs::create_dir_all(&dir);
    std::fs::write(format!("{dir}/bursts.md"), text + "\n").expect("writing bursts.md");
}
