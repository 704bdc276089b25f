//! What it costs that admission makes nothing (issue 16): the time from a RayJob's create
//! (through the API server) to its shared cluster existing, over a burst of jobs, for this
//! build and, with RAYSHARE_OLD_BIN, a build that still made clusters at admission.
//!
//!     cargo bench --bench provision                       # this build
//!     RAYSHARE_OLD_BIN=path/to/old/rayshare RAYSHARE_NEW_BIN=target/debug/rayshare \
//!         cargo bench --bench provision                   # both, like for like
//!
//! (old: a build of commit a8d52f7 or earlier.)
//!
//! A benchmark, never a test: under `cargo test` it only says it was skipped.

#[path = "../tests/e2e/harness.rs"]
#[allow(dead_code)]
mod harness;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use harness::*;

/// Jobs per burst, over this many configs.
const JOBS: usize = 50;
const CONFIGS: usize = 5;

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

struct Burst {
    latencies: Vec<Duration>,
    clusters_per_config: BTreeMap<String, usize>,
    rewritten: usize,
}

async fn burst(label: &str) -> Burst {
    let env = TestEnv::new(&format!("provision-{label}"), DEFAULT_CONFIG, 1).await;
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    // When each cluster was first seen, polled from before the first create (a watch
    // would add its own lag) until every selected cluster was seen.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::<String, Instant>::new()));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = tokio::spawn({
        let (clusters, seen, stop) = (clusters.clone(), seen.clone(), stop.clone());
        async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(list) = clusters.list(&Default::default()).await {
                    let now = Instant::now();
                    let mut seen = seen.lock().unwrap();
                    for c in list.items {
                        seen.entry(c.metadata.name.unwrap_or_default())
                            .or_insert(now);
                    }
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    });
    let created: Vec<(Instant, Value)> = futures::future::join_all((0..JOBS).map(|i| {
        let env = &env;
        async move {
            let stored = create_in(&env.admin, &env.ns, job(i), false).await;
            (Instant::now(), stored)
        }
    }))
    .await;
    let wanted: BTreeSet<String> = created
        .iter()
        .filter_map(|(_, j)| j["spec"]["clusterSelector"]["ray.io/cluster"].as_str())
        .map(String::from)
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let all = wanted.iter().all(|c| seen.lock().unwrap().contains_key(c));
        if all {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = poller.await;
    let seen = seen.lock().unwrap().clone();
    let mut latencies = Vec::new();
    let mut clusters_per_config: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (i, (at, stored)) in created.iter().enumerate() {
        let Some(name) = stored["spec"]["clusterSelector"]["ray.io/cluster"].as_str() else {
            continue;
        };
        let config = format!("2.{}.0", 40 + i % CONFIGS);
        clusters_per_config
            .entry(config)
            .or_default()
            .insert(name.into());
        let when = seen.get(name).copied().unwrap_or(deadline);
        latencies.push(when.saturating_duration_since(*at));
    }
    latencies.sort();
    Burst {
        rewritten: latencies.len(),
        latencies,
        clusters_per_config: clusters_per_config
            .into_iter()
            .map(|(k, v)| (k, v.len()))
            .collect(),
    }
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn report(label: &str, b: &Burst) -> String {
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
    format!(
        "| {label} | {}/{JOBS} | {} | {} | {} | {:?} |",
        b.rewritten,
        ms(quantile(&b.latencies, 0.5)),
        ms(quantile(&b.latencies, 0.99)),
        ms(b.latencies.last().copied().unwrap_or_default()),
        b.clusters_per_config.values().collect::<Vec<_>>(),
    )
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("provision benchmark: skipped outside `cargo bench`");
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut rows = vec![
        format!(
            "{JOBS} RayJobs of {CONFIGS} configs created at once through the API server; time from each create's answer to its shared cluster existing."
        ),
        String::new(),
        "| build | rewritten | p50 | p99 | max | clusters per config |".into(),
        "|---|---|---|---|---|---|".into(),
    ];
    let builds = [
        (
            "old (created at admission)",
            std::env::var("RAYSHARE_OLD_BIN").ok(),
        ),
        (
            "new (created by the provisioner)",
            std::env::var("RAYSHARE_NEW_BIN").ok(),
        ),
    ];
    for (label, bin) in builds {
        let old = label.starts_with("old");
        if old && bin.is_none() {
            continue;
        }
        *OTHER_BUILD.lock().unwrap() = bin.map(|path| Build {
            path: path.into(),
            predates_instance: old,
        });
        let b = rt.block_on(burst(if old { "old" } else { "new" }));
        rows.push(report(label, &b));
    }
    println!("{}", rows.join("\n"));
}
