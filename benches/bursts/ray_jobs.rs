//! Bursts of RayJobs: time to their shared clusters, clusters per config, CPU per job.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;
use serde_json::{Value, json};

use crate::harness::*;
use crate::{CONCURRENCY, CONFIGS, Latencies, as_build, counting, create_all};

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
/// Job `i` of the bursts: one of CONFIGS images, its own run.
pub fn job(i: usize) -> Value {
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

/// The RayJob bursts' table (with RAYSHARE_OLD_BIN, the old build's rows beside).
pub async fn table() -> Vec<String> {
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
            out.push(as_build(path, true, ray_jobs("old", jobs)).await);
        }
        out.push(ray_jobs("new", jobs).await);
    }
    out
}
