//! What rayshare is for, measured (issue 48): a compressed day of Flyte-like Ray tasks
//! through the real KubeRay operator (v1.6.1), kube-scheduler and kwok nodes, once with
//! KubeRay alone (a namespace rayshare does not serve: a cluster per task) and once with
//! rayshare (shared clusters, its defaults but an idle TTL scaled to the compressed day),
//! then optionally with a pool cap (`sharedClusters.maxJobsPerCluster`); the same trace,
//! the same machine, one command:
//!
//!     cargo bench --bench workload
//!
//! Every Ray pod (head and workers) is held Pending for a cold start after it is scheduled
//! (kwok stage `tests/kit/src/world/stages.yaml`), then Running and Ready. KubeRay's calls
//! to a head's dashboard get a running head's answers (`world::Dashboard`): kwok runs no
//! Ray, and failing calls would slow KubeRay's one worker for every job alike. A task's wait is
//! from its RayJob's create answered until KubeRay moves it past Initializing (its cluster
//! is ready and its submitter made). Its driver then "runs" for its drawn time (kwok keeps
//! the submitter pod Running), and the harness deletes the RayJob, as Flyte cleans up a
//! finished task; KubeRay's own cluster goes with it (garbage collector), a shared one
//! stays until rayshare's reclaimer finds it idle for the TTL. Cluster-seconds: every Ray
//! pod's time from Running (and, second figure, from created) until deleted, in wall
//! seconds, the run ending when every Ray pod is gone.
//!
//! Parameters (environment; trace seconds are wall seconds times the speed-up):
//!   RAYSHARE_WORKLOAD_SPEEDUP     trace seconds per wall second (10)
//!   RAYSHARE_WORKLOAD_COLD_START  a pod's cold start, trace seconds (60)
//!   RAYSHARE_WORKLOAD_IDLE_TTL    rayshare's idle TTL, trace seconds (300)
//!   RAYSHARE_WORKLOAD_DAY         the day's length, trace seconds (2400)
//!   RAYSHARE_WORKLOAD_DAYS        days played one after another (2): warm-ahead's
//!                                 time-of-day memory needs a day seen
//!   RAYSHARE_WORKLOAD_SEED        the trace's seed (48; day d draws from seed + d)
//!   RAYSHARE_WORKLOAD_RUNS        which runs, comma-separated: kuberay,rayshare,warm,capped
//!                                 (default kuberay,rayshare,warm)
//!   RAYSHARE_WORKLOAD_CAP         the pool cap of the `capped` run (4)
//!
//! `warm` is rayshare with warm-ahead on for the namespace, its clocks scaled to the
//! compressed day as the reclaimer's are: the time-of-day period is the day, the rate's
//! half-life 600 trace seconds, a burst the arrivals within 20 trace seconds.
//!
//! A benchmark, never a test: under `cargo test` it only says it was skipped. The table
//! goes to stdout and to $RAYSHARE_BENCH_OUT/workload.md (default target/bench).

use rayshare_testkit::{harness, world};

mod run;
mod trace;

use std::time::Duration;

use harness::*;
use run::Outcome;
use world::{KubeRay, KubeRayOptions};

/// The run's parameters (see the module's doc).
pub struct Params {
    pub speedup: f64,
    pub cold_start: f64,
    pub idle_ttl: f64,
    pub day: f64,
    pub days: u32,
    pub seed: u64,
    pub cap: u32,
    /// How long a task may wait before it counts as not started.
    pub start_deadline: Duration,
    /// How long, after the last task, the Ray pods get to go.
    pub drain_deadline: Duration,
}

fn var<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

impl Params {
    fn from_env() -> Self {
        let speedup: f64 = var("RAYSHARE_WORKLOAD_SPEEDUP", 10.0);
        let idle_ttl: f64 = var("RAYSHARE_WORKLOAD_IDLE_TTL", 300.0);
        Self {
            speedup,
            cold_start: var("RAYSHARE_WORKLOAD_COLD_START", 60.0),
            idle_ttl,
            day: var("RAYSHARE_WORKLOAD_DAY", 2400.0),
            days: var("RAYSHARE_WORKLOAD_DAYS", 2u32).max(1),
            seed: var("RAYSHARE_WORKLOAD_SEED", 48),
            cap: var("RAYSHARE_WORKLOAD_CAP", 4),
            start_deadline: Duration::from_secs(180),
            drain_deadline: Duration::from_secs_f64(idle_ttl / speedup + 90.0),
        }
    }
    /// `trace_seconds` of the trace, in wall time.
    pub fn wall(&self, trace_seconds: f64) -> Duration {
        Duration::from_secs_f64(trace_seconds / self.speedup)
    }
    pub fn cold_start_wall(&self) -> Duration {
        self.wall(self.cold_start)
    }
    /// rayshare's config: the defaults, with the reclaim clock scaled to the day (the
    /// default TTL is 1,800 s, the pass every 30 s, the quiet period 40 s).
    fn config(&self, ns: &str, cap: Option<u32>, warm: bool) -> String {
        let secs = |trace: f64| (trace / self.speedup).round().max(1.0) as u64;
        let mut config = format!(
            "reclaim:\n  idleTtlSeconds: {}\n  intervalSeconds: {}\n  quietSeconds: {}\n  headSilenceSeconds: 0\n  namespaces: [{ns}]\n",
            secs(self.idle_ttl),
            secs(30.0).min(2),
            secs(40.0),
        );
        if let Some(cap) = cap {
            config.push_str(&format!("sharedClusters:\n  maxJobsPerCluster: {cap}\n"));
        }
        if warm {
            config.push_str(&format!(
                "warmAhead:\n  enabled: true\n  namespaces: [{ns}]\n  halfLifeSeconds: {}\n  burstWindowSeconds: {}\n  periodSeconds: {}\n",
                secs(600.0),
                secs(20.0),
                secs(self.day),
            ));
        }
        config
    }
}

/// Sorted durations.
struct Latencies(Vec<Duration>);

impl Latencies {
    fn at(&self, q: f64) -> Option<Duration> {
        let last = self.0.len().checked_sub(1)?;
        Some(self.0[(last as f64 * q).round() as usize])
    }
    fn secs(&self, q: f64) -> String {
        self.at(q)
            .map_or_else(|| "-".into(), |d| format!("{:.1} s", d.as_secs_f64()))
    }
}

/// One row of the table, with its ratios to the first run (KubeRay alone).
fn row(label: &str, o: &Outcome, base: Option<&Outcome>) -> String {
    let mut waits = o.waits.clone();
    waits.sort();
    let l = Latencies(waits);
    let ratio = |a: f64, b: f64| format!("{:.2}", a / b.max(1e-9));
    let ratios = base.map_or_else(
        || "1 / 1 / 1".to_string(),
        |b| {
            let mut bw = b.waits.clone();
            bw.sort();
            let bl = Latencies(bw);
            let q = |x: &Latencies, q: f64| x.at(q).map_or(0.0, |d| d.as_secs_f64());
            format!(
                "{} / {} / {}",
                ratio(q(&l, 0.5), q(&bl, 0.5)),
                ratio(q(&l, 0.99), q(&bl, 0.99)),
                ratio(o.pod_seconds_running, b.pod_seconds_running),
            )
        },
    );
    format!(
        "| {label} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.0} | {} | {} | {ratios} |",
        o.waits.len(),
        o.not_started,
        l.secs(0.5),
        l.secs(0.95),
        l.secs(0.99),
        l.secs(1.0),
        o.clusters,
        o.pod_seconds_running,
        o.pod_seconds_held,
        o.pods,
        format_args!("{:.0} s", o.wall.as_secs_f64()),
    )
}

async fn table(p: &Params) -> Vec<String> {
    let tasks = trace::days(&trace::Shape::new(p.day, p.seed), p.days);
    let runs = std::env::var("RAYSHARE_WORKLOAD_RUNS").unwrap_or("kuberay,rayshare,warm".into());
    let mut rows: Vec<(String, Outcome)> = Vec::new();
    // One TestEnv per name (its namespaces and rayshare): KubeRay alone runs in the
    // namespace the default one does not serve.
    let mut envs = std::collections::BTreeMap::new();
    // kwok's heads run no Ray; KubeRay's dashboard calls get a running head's answers
    // (see `world::Dashboard`), in every run alike.
    let dashboard = world::Dashboard::start().await;
    let options = KubeRayOptions {
        dashboard_proxy: Some(dashboard.proxy()),
        ..KubeRayOptions::default()
    };
    for which in runs.split(',') {
        let (name, cap, warm) = match which {
            "kuberay" | "rayshare" => ("workload", None, false),
            "capped" => ("workload-cap", Some(p.cap), false),
            "warm" => ("workload-warm", None, true),
            other => panic!("RAYSHARE_WORKLOAD_RUNS: unknown run {other}"),
        };
        if !envs.contains_key(name) {
            let config = p.config(&format!("e2e-{name}"), cap, warm);
            let env = TestEnv::new(name, &config, 1).await;
            envs.insert(name, env);
        }
        let env = &envs[name];
        let (ns, label) = match which {
            "kuberay" => (env.ns_off.clone(), "KubeRay alone".to_string()),
            "rayshare" => (env.ns.clone(), "rayshare, defaults".to_string()),
            "warm" => (env.ns.clone(), "rayshare, warm-ahead".to_string()),
            _ => (env.ns.clone(), format!("rayshare, pool cap {}", p.cap)),
        };
        let kuberay = KubeRay::start(&format!("{name}-{which}"), &[&ns], &options).await;
        eprintln!("[workload] {label}: {} tasks in {ns}", tasks.len());
        let outcome = run::run(env, &ns, &tasks, p).await;
        drop(kuberay);
        rows.push((label, outcome));
    }
    let mut out = vec![
        format!(
            "{} compressed day(s) of {} Flyte-like Ray tasks (seed {}), each day {:.0} trace seconds played at {}x ({:.0} s wall): every Ray pod cold-starts for {:.0} trace seconds ({:.1} s wall) once scheduled; rayshare's idle TTL {:.0} trace seconds ({:.0} s wall). Waits and pod-seconds in wall seconds; ratios against KubeRay alone.",
            p.days,
            tasks.len(),
            p.seed,
            p.day,
            p.speedup,
            p.day / p.speedup,
            p.cold_start,
            p.cold_start_wall().as_secs_f64(),
            p.idle_ttl,
            p.idle_ttl / p.speedup,
        ),
        String::new(),
    ];
    out.extend(
        trace::describe(&tasks, p.idle_ttl)
            .into_iter()
            .map(|l| format!("- {l}")),
    );
    out.extend([
        String::new(),
        "Every day:".into(),
        String::new(),
        "| run | started | not started | wait p50 | p95 | p99 | max | clusters | pod-s Running | pod-s held | pods | wall | ratio p50 / p99 / pod-s Running |".into(),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|".into(),
    ]);
    let base = rows.iter().position(|(l, _)| l == "KubeRay alone");
    for (i, (label, o)) in rows.iter().enumerate() {
        let b = base.filter(|b| *b != i).map(|b| &rows[b].1);
        out.push(row(label, o, b));
    }
    if p.days > 1 {
        // The days after the first: what a config's users see once a day has been seen.
        let later = |o: &Outcome| -> Vec<Duration> {
            let mut w: Vec<Duration> = tasks
                .iter()
                .zip(&o.per_task)
                .filter(|(t, _)| t.at >= p.day)
                .filter_map(|(_, w)| *w)
                .collect();
            w.sort();
            w
        };
        out.extend([
            String::new(),
            format!(
                "From day 2 ({} tasks):",
                tasks.iter().filter(|t| t.at >= p.day).count()
            ),
            String::new(),
            "| run | wait p50 | p95 | p99 | max | ratio p50 / p99 |".into(),
            "|---|---:|---:|---:|---:|---:|".into(),
        ]);
        let base = base.map(|b| Latencies(later(&rows[b].1)));
        for (label, o) in &rows {
            let l = Latencies(later(o));
            let q = |x: &Latencies, q: f64| x.at(q).map_or(0.0, |d| d.as_secs_f64());
            let ratios = base.as_ref().map_or("-".to_string(), |b| {
                format!(
                    "{:.2} / {:.2}",
                    q(&l, 0.5) / q(b, 0.5).max(1e-9),
                    q(&l, 0.99) / q(b, 0.99).max(1e-9)
                )
            });
            out.push(format!(
                "| {label} | {} | {} | {} | {} | {ratios} |",
                l.secs(0.5),
                l.secs(0.95),
                l.secs(0.99),
                l.secs(1.0)
            ));
        }
    }
    let names: Vec<&str> = trace::CONFIGS.iter().map(|c| c.name).collect();
    out.extend([
        String::new(),
        "Waits by config, p50 / max:".into(),
        String::new(),
        format!("| run | {} |", names.join(" | ")),
        format!("|---|{}", "---:|".repeat(names.len())),
    ]);
    for (label, o) in &rows {
        let cells: Vec<String> = o
            .by_config
            .iter()
            .map(|w| {
                let mut w = w.clone();
                w.sort();
                let l = Latencies(w);
                format!("{} / {}", l.secs(0.5), l.secs(1.0))
            })
            .collect();
        out.push(format!("| {label} | {} |", cells.join(" | ")));
    }
    out
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("workload benchmark: skipped outside `cargo bench`");
        return;
    }
    let p = Params::from_env();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let text = rt.block_on(table(&p)).join("\n");
    println!("{text}");
    let dir = std::env::var("RAYSHARE_BENCH_OUT").unwrap_or_else(|_| "target/bench".into());
    let _ = std::fs::create_dir_all(&dir);
    std::fs::write(format!("{dir}/workload.md"), text + "\n").expect("writing workload.md");
}
