//! RayJobs to a ready cluster, through the real KubeRay: the time from each create's answer
//! until KubeRay moves the job past Initializing (it does once the job's cluster is
//! ready), with rayshare (shared clusters, five configs) and without (a namespace rayshare
//! does not serve: each job's own embedded cluster, KubeRay's own floor), in one run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;

use crate::harness::*;
use crate::ray_jobs::job;
use crate::world::{KubeRay, KubeRayOptions, list_json};
use crate::{CONCURRENCY, CONFIGS, Latencies};

const JOBS: usize = 50;

/// When each job of `api` was first seen past Initializing (a watch, started now).
async fn past_initializing(
    api: Api<DynamicObject>,
) -> (
    Arc<Mutex<BTreeMap<String, Instant>>>,
    tokio::task::JoinHandle<()>,
) {
    let seen = Arc::new(Mutex::new(BTreeMap::new()));
    let task = tokio::spawn({
        let seen = seen.clone();
        async move {
            let events = watcher(api, watcher::Config::default());
            futures::pin_mut!(events);
            while let Some(event) = events.next().await {
                let now = Instant::now();
                if let Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = event {
                    let state = o.data["status"]["jobDeploymentStatus"]
                        .as_str()
                        .unwrap_or("");
                    if !["", "New", "Initializing"].contains(&state) {
                        let name = o.metadata.name.unwrap_or_default();
                        seen.lock().unwrap().entry(name).or_insert(now);
                    }
                }
            }
        }
    });
    (seen, task)
}

/// Creates the jobs in `namespace` and waits (at most 3 minutes) until each is past
/// Initializing: each job's time, and how many clusters KubeRay ran them on.
async fn burst(env: &TestEnv, namespace: &str) -> (Latencies, usize) {
    let jobs_api = env.api(&ray_job_resource(), namespace);
    let (seen, task) = past_initializing(jobs_api).await;
    let created: Vec<(String, Instant)> = stream::iter((0..JOBS).map(job))
        .map(|j| async move {
            let stored = create_in(&env.admin, namespace, j, false).await;
            let name = stored["metadata"]["name"].as_str().unwrap().to_string();
            (name, Instant::now())
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let deadline = Instant::now() + Duration::from_secs(180);
    while seen.lock().unwrap().len() < JOBS && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    task.abort();
    let seen = seen.lock().unwrap().clone();
    let times = created
        .iter()
        .filter_map(|(name, at)| Some(seen.get(name)?.saturating_duration_since(*at)))
        .collect();
    let clusters = list_json(&env.admin, &ray_cluster_resource(), namespace, "")
        .await
        .len();
    (Latencies::new(times), clusters)
}

fn row(label: &str, (l, clusters): &(Latencies, usize), floor: Option<&Latencies>) -> String {
    let ratio = |q: f64| match (l.at(q), floor.and_then(|f| f.at(q))) {
        (Some(a), Some(f)) => format!("{:.2}", a.as_secs_f64() / f.as_secs_f64().max(1e-3)),
        _ => "1".into(),
    };
    format!(
        "| {label} | {JOBS} | {} | {clusters} | {} | {} | {} | {} / {} |",
        l.0.len(),
        l.q(0.5),
        l.q(0.99),
        l.q(1.0),
        ratio(0.5),
        ratio(0.99),
    )
}

pub async fn table() -> Vec<String> {
    let env = TestEnv::new("burst-ready", DEFAULT_CONFIG, 1).await;
    let floor_ns = format!("{}-floor", env.ns);
    create_namespace(&env.admin, &floor_ns, &[]).await;
    let _kuberay =
        KubeRay::start(&env.name, &[&env.ns, &floor_ns], &KubeRayOptions::default()).await;
    let floor = burst(&env, &floor_ns).await;
    let served = burst(&env, &env.ns).await;
    vec![
        String::new(),
        format!(
            "{JOBS} RayJobs of {CONFIGS} configs created at once ({CONCURRENCY} creates in flight) with the KubeRay operator running; time from each create's answer until KubeRay moves the job past Initializing (its cluster is ready). Floor: the same jobs in a namespace rayshare does not serve, each on the cluster KubeRay makes for it (pods on kwok nodes: no containers run, so a cold start here is KubeRay's and the scheduler's part only)."
        ),
        String::new(),
        "| burst | jobs | started | clusters | p50 | p99 | max | p50 / p99 against the floor |"
            .into(),
        "|---|---:|---:|---:|---:|---:|---:|---:|".into(),
        row("floor: KubeRay alone, a cluster per job", &floor, None),
        row("rayshare: shared clusters", &served, Some(&floor.0)),
    ]
}
