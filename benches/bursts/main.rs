//! Bursts, the way workloads arrive (issues 16 and 20), through the local API server:
//!
//! - RayJobs: 50 and 500 jobs of 5 configs created at once; the time from each create's
//!   answer to its shared cluster being seen (a watch), clusters made per config (must be
//!   1), API calls on RayClusters per job. With RAYSHARE_OLD_BIN (a build of commit
//!   a8d52f7 or earlier, which made clusters at admission) the same bursts for that build,
//!   side by side.
//! - RayJobs to a ready cluster through the real KubeRay operator (issue 31): 50 jobs,
//!   the time until KubeRay moves each past Initializing, with rayshare's shared clusters
//!   and without (KubeRay's own cluster per job, in a namespace rayshare does not serve).
//! - A multi-host slice: 256 worker pods of one `numOfHosts: 4` group (64 replicas)
//!   created at once, alternating between two rayshare replicas; the time until every pod is
//!   admitted with its indices, duplicate slots (must be 0), API calls on Leases per pod.
//!   One and two replicas (and the old build's) take their rounds in turn.
//! - 1,000 Volcano pods at once, under the real Volcano (its scheduler, controller-manager
//!   and webhook-manager with its chart's webhooks, tests/kit/src/volcano.rs): each create's
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
//!     RAYSHARE_BURSTS=slice RAYSHARE_OLD_SLICE_BIN=path/to/rayshare cargo bench --bench bursts
//!
//! A benchmark, never a test: under `cargo test` it only says it was skipped. The tables
//! go to stdout and to $RAYSHARE_BENCH_OUT/bursts.md (default target/bench).

use rayshare_testkit::load::{cluster, sys};
use rayshare_testkit::{harness, volcano, world};

mod cluster_ready;
mod ray_jobs;
mod slice;
mod volcano_pods;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use serde_json::Value;

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
/// Runs `run` with the test instances started from the build at `path`.
async fn as_build<T>(path: &str, predates_instance: bool, run: impl Future<Output = T>) -> T {
    *OTHER_BUILD.lock().unwrap() = Some(Build {
        path: path.into(),
        predates_instance,
    });
    let out = run.await;
    *OTHER_BUILD.lock().unwrap() = None;
    out
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("bursts benchmark: skipped outside `cargo bench`");
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    // RAYSHARE_BURSTS=slice (or rayjobs, ready, volcano; comma-separated) runs only those.
    let only = std::env::var("RAYSHARE_BURSTS").ok();
    let wanted = |part: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|p| p == part))
    };
    let mut out = Vec::new();
    if wanted("rayjobs") {
        out.extend(rt.block_on(ray_jobs::table()));
    }
    if wanted("ready") {
        out.extend(rt.block_on(cluster_ready::table()));
    }
    if wanted("slice") {
        out.extend([
            String::new(),
            format!("A multi-host slice: {} worker pods of one `numOfHosts: 4` group (64 replicas) created at once ({CONCURRENCY} creates in flight), alternating between the rayshare replicas; time from the burst's start to each create answered. Each round: the floor (the same burst into a namespace no webhook serves, just before and just after; wall / floor is against their mean), the webhook call alone, then indexed, on a new cluster. Lease calls: every client's, during the burst (`409`: a create that lost a race).", 64 * 4),
            String::new(),
            "| burst | pods | indexed | p50 | p99 | wall | wall / floor | machine CPU / floor | duplicate slots | Lease calls / pod |".into(),
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|".into(),
        ]);
        // RAYSHARE_OLD_SLICE_BIN: a build to compare with, in the same run.
        let old = std::env::var("RAYSHARE_OLD_SLICE_BIN").ok();
        let mut series = Vec::new();
        for replicas in [1, 2] {
            if let Some(path) = &old {
                series.push(rt.block_on(as_build(
                    path,
                    false,
                    slice::Series::new("old", replicas),
                )));
            }
            series.push(rt.block_on(slice::Series::new("new", replicas)));
        }
        // Round by round, each series in turn, starting one further on each round: the
        // control plane slows as a run goes on (stored objects, Events, its heap), and a
        // series run after another would pay for that (measured: two replicas 0.3 of the
        // floor dearer than one when run second, no dearer when run first).
        let n = series.len();
        for round in 0..slice::rounds() {
            for k in 0..n {
                rt.block_on(series[(k + round) % n].round(round));
            }
        }
        let find = |build: &str, replicas| {
            series
                .iter()
                .find(|s| s.build_and_replicas() == (build, replicas))
        };
        let paired: Vec<String> = ["old", "new"]
            .into_iter()
            .filter_map(|b| Some(slice::Series::paired(find(b, 2)?, find(b, 1)?)))
            .collect();
        out.extend(series.into_iter().flat_map(slice::Series::rows));
        out.extend(paired);
    }
    // Last: Volcano's webhooks, once started, are in the path of every namespace.
    if wanted("volcano") {
        out.extend(rt.block_on(volcano_pods::table()));
    }
    let text = out.join("\n");
    println!("{text}");
    let dir = std::env::var("RAYSHARE_BENCH_OUT").unwrap_or_else(|_| "target/bench".into());
    let _ = std::fs::create_dir_all(&dir);
    std::fs::write(format!("{dir}/bursts.md"), text + "\n").expect("writing bursts.md");
}
