//! Overload (issue 27): rayshare with its default bounds (--max-buffered-bytes 48 MiB,
//! --max-in-flight 64) under a flood of ~3 MiB RayJob reviews, while pod reviews that
//! need nothing keep coming at a modest rate on their own connection (as from another
//! API server). Writes `flood.md`; the targets are reported, not asserted.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

use super::*;

/// Pod reviews per second, unloaded and during the floods.
const POD_RATE: f64 = 200.0;
/// Just under the default --max-body-bytes (3 MiB), so every body is read whole; in its
/// last KiB, so each holds 3,072 KiB of the budget and 16 of them spend all 48 MiB.
const FLOOD_BYTES: usize = 3 * 1024 * 1024 - 256;
/// Flood bodies in flight while measuring their saturation rate: 24 MiB, half the
/// default buffered-bytes budget, so that measurement is not itself refused.
const SAT_CONCURRENCY: usize = 8;
/// Distinct flood bodies, sent in turn: rendering 3 MiB per request would load the client.
const FLOOD_BODIES: u64 = 16;
const MULTIPLES: [f64; 2] = [1.0, 2.0];
/// The targets.
const RSS_ANY_MIB: f64 = 256.0;
const RSS_2X_MIB: f64 = 128.0;
const P99_RATIO: f64 = 2.0;

/// One measured phase of one rayshare process.
struct Phase {
    cores: usize,
    name: String,
    /// Flood requests per second: offered (open loop) or achieved (closed loop).
    flood_rate: Option<f64>,
    flood: Option<Run>,
    pods: Option<Run>,
    rss_peak_kib: u64,
    /// rayshare's own count of requests refused (503) or passed unchanged as overloaded.
    overloaded: Option<u64>,
}

impl Bench {
    pub(super) fn flood(&mut self, pods: &Kind, job: &Value) {
        let load_before = loadavg();
        let body = flood_body(job, self.seed);
        let flood_bytes = body(0).len();
        let secs = Duration::from_secs(if self.quick { 2 } else { 4 });
        let mut phases: Vec<Phase> = Vec::new();
        let mut notes = Vec::new();
        let all_cores: &[usize] = if self.cpus.len() > 1 { &[1, 2] } else { &[1] };
        for &cores in all_cores {
            let background = sys::wait_for_quiet(0.15, Duration::from_secs(60));
            let ray = self.start_rayshare(cores, None);
            std::thread::sleep(Duration::from_secs(2));
            let pid = ray.proc.pid();
            let (idle_kib, _) = sys::rss_kib(pid);
            let answer = self.probe(&ray, body(0));
            let load = self.load_runtime(cores);
            // Each its own connection, as two API servers would have.
            let pod_pool = self.connect(&load, &ray, Proto::H2);
            let flood_pool = self.connect(&load, &ray, Proto::H2);
            let s = &self.settings;
            let phase = |name: String, flood_rate, run: &dyn Fn() -> (Option<Run>, Option<Run>)| {
                let before = overloaded(&ray);
                let ((pods, flood), rss_peak_kib) = sampled(pid, run);
                let overloaded = before.zip(overloaded(&ray)).map(|(b, a)| a - b);
                let phase = Phase {
                    cores,
                    name,
                    flood_rate,
                    flood,
                    pods,
                    rss_peak_kib,
                    overloaded,
                };
                eprintln!("  flood: {}", row(&phase, f64::NAN));
                phase
            };

            phases.push(phase("unloaded".into(), None, &|| {
                let run = load.block_on(client::open_loop(
                    pod_pool.clone(),
                    pods.body(),
                    POD_RATE,
                    s.lat_warmup,
                    secs,
                    pid,
                ));
                (Some(run), None)
            }));
            // What one connection of such bodies gets through, closed loop, pods idle.
            let mut sat = phase(
                format!("saturation ({SAT_CONCURRENCY} in flight)"),
                None,
                &|| {
                    let run = load.block_on(client::closed_loop(
                        flood_pool.clone(),
                        body.clone(),
                        SAT_CONCURRENCY,
                        s.sat_warmup,
                        s.sat_measure,
                        pid,
                    ));
                    (None, Some(run))
                },
            );
            let saturation = sat.flood.as_ref().map_or(0.0, |r| r.throughput).max(1.0);
            sat.flood_rate = Some(saturation);
            phases.push(sat);
            let mut lag = Vec::new();
            for multiple in MULTIPLES {
                let rate = saturation * multiple;
                let flood = phase(format!("flood {multiple}x saturation"), Some(rate), &|| {
                    let (p, f) = load.block_on(async {
                        tokio::join!(
                            client::open_loop(
                                pod_pool.clone(),
                                pods.body(),
                                POD_RATE,
                                Duration::ZERO,
                                secs,
                                pid
                            ),
                            client::open_loop(
                                flood_pool.clone(),
                                body.clone(),
                                rate,
                                Duration::ZERO,
                                secs,
                                pid
                            ),
                        )
                    });
                    (Some(p), Some(f))
                });
                if let Some(f) = &flood.flood {
                    let p99 = client::percentile(&f.send_lag, 0.99) / 1e6;
                    lag.push(format!("{multiple}x {p99:.1} ms"));
                }
                phases.push(flood);
            }
            // Does the memory go back once the flood is over?
            std::thread::sleep(Duration::from_secs(3));
            let (after_kib, _) = sys::rss_kib(pid);
            std::thread::sleep(Duration::from_secs(7));
            let (later_kib, hwm_kib) = sys::rss_kib(pid);
            drop(load);
            ray.proc.stop();
            notes.push(format!(
                "{cores} core(s): RSS idle {:.1} MiB, 3 s after the floods {:.1} MiB, 10 s after {:.1} MiB, VmHWM (lifetime) {:.1} MiB; flood send lag p99 {}; other work before the runs {background:.2} cores; a flood review's answer: {}",
                mib(idle_kib),
                mib(after_kib),
                mib(later_kib),
                mib(hwm_kib),
                lag.join(", "),
                answer_summary(&answer)["warnings"]
            ));
        }

        let mut out = String::new();
        let _ = writeln!(
            out,
            "### rayshare under a flood of ~3 MiB RayJob reviews (issue 27)\n\n\
             Machine: {} ({} CPUs). rayshare serve with default flags (--max-body-bytes 3 MiB, \
             --max-buffered-bytes 48 MiB, --max-in-flight 64). Flood: {flood_bytes} B RayJob \
             reviews (deploy/samples/rayjob-run-a.yaml with one big env value on the head), \
             HTTP/2, one connection, open loop for {secs:?} per rate. Pods: {} at {POD_RATE}/s, \
             HTTP/2, their own connection. RSS sampled every 50 ms. 1 core: rayshare on CPU 0, \
             load generator on CPU 1; 2 cores: both on both. Load average before {load_before}, \
             after {}.\n",
            self.machine["cpu"].as_str().unwrap_or("?"),
            self.machine["cpus"],
            pods.name,
            loadavg(),
        );
        let _ = writeln!(
            out,
            "| cores | phase | flood req/s | flood 200 / 503 / other | rayshare `overloaded` | RSS peak MiB | pod p50 ms | pod p99 ms | pod p99 / unloaded | pod 503 / other | server cores | client cores | other cores |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|---|"
        );
        let unloaded = |cores| {
            phases
                .iter()
                .find(|p| p.cores == cores && p.flood.is_none())
                .and_then(|p| p.pods.as_ref())
                .map_or(f64::NAN, |r| r.pct_us(0.99))
        };
        for p in &phases {
            let _ = writeln!(out, "{}", row(p, unloaded(p.cores)));
        }
        let _ = writeln!(
            out,
            "\nrayshare `overloaded`: its rayshare_errors_total{{cause=\"overloaded\"}} over the phase \
             (503s, plus admissions passed unchanged past --max-in-flight). Pod p50/p99: answered \
             pods only. Cores: CPU over the flood's window (else the pods'); other: the rest of \
             the machine (control plane, other builds)."
        );
        let _ = writeln!(out, "\nTargets (reported, not asserted):\n");
        let met = |ok: bool| if ok { "met" } else { "NOT met" };
        for &cores in all_cores {
            let mine: Vec<&Phase> = phases.iter().filter(|p| p.cores == cores).collect();
            let peak = mine.iter().map(|p| p.rss_peak_kib).max().unwrap_or(0);
            let _ = writeln!(
                out,
                "- {cores} core(s): RSS peak <= {RSS_ANY_MIB} MiB at any rate: {:.1} MiB, {}",
                mib(peak),
                met(mib(peak) <= RSS_ANY_MIB)
            );
            for (multiple, p) in MULTIPLES.iter().zip(
                mine.iter()
                    .filter(|p| p.flood_rate.is_some() && p.pods.is_some()),
            ) {
                if *multiple == 2.0 {
                    let _ = writeln!(
                        out,
                        "- {cores} core(s): RSS peak <= {RSS_2X_MIB} MiB at 2x saturation: {:.1} MiB, {}",
                        mib(p.rss_peak_kib),
                        met(mib(p.rss_peak_kib) <= RSS_2X_MIB)
                    );
                }
                let pods = p.pods.as_ref().expect("filtered");
                let ratio = pods.pct_us(0.99) / unloaded(cores);
                let _ = writeln!(
                    out,
                    "- {cores} core(s): pod p99 within {P99_RATIO}x of unloaded at {multiple}x saturation: {ratio:.2}x, {} ({} of {} pod reviews failed: not in the p99)",
                    met(ratio <= P99_RATIO),
                    pods.errors,
                    pods.errors + pods.completed()
                );
            }
        }
        let _ = writeln!(out, "\nNotes:\n");
        for n in &notes {
            let _ = writeln!(out, "- {n}");
        }
        let path = self.out.join("flood.md");
        std::fs::write(&path, &out).expect("writing flood.md");
        println!("{out}");
        eprintln!("load: wrote {}", path.display());
    }
}

/// `job` (a RayJob as admitted) as reviews of about FLOOD_BYTES, by one env value on its
/// head: a forged review can carry what the API server would never store.
fn flood_body(job: &Value, seed: u64) -> BodyFn {
    let review = |pad: usize| {
        let mut job = job.clone();
        job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"]
            .as_array_mut()
            .expect("the sample's head has env")
            .push(json!({"name": "FLOOD", "value": "x".repeat(pad)}));
        Template::new(&bodies::review(&job, "rayjobs", "bench", false), seed)
    };
    let template = review(FLOOD_BYTES.saturating_sub(review(0).size()));
    let bodies: Vec<Bytes> = (0..FLOOD_BODIES).map(|n| template.render(n)).collect();
    Arc::new(move |n| bodies[(n % FLOOD_BODIES) as usize].clone())
}

/// Runs `f` while a thread samples `pid`'s RSS every 50 ms; its result and the highest
/// RSS seen (VmHWM is the process's lifetime peak, not this phase's).
fn sampled<T>(pid: u32, f: impl FnOnce() -> T) -> (T, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let sampler = std::thread::spawn(move || {
        let mut peak = 0;
        while !flag.load(Ordering::Relaxed) {
            peak = peak.max(sys::rss_kib(pid).0);
            std::thread::sleep(Duration::from_millis(50));
        }
        peak.max(sys::rss_kib(pid).0)
    });
    let result = f();
    stop.store(true, Ordering::Relaxed);
    (result, sampler.join().expect("RSS sampler"))
}

/// rayshare's count of requests refused (503) or passed unchanged as overloaded.
fn overloaded(server: &Server) -> Option<u64> {
    let (_, metrics) = sys::http_get(server.admin?, "/metrics")?;
    let line = metrics
        .lines()
        .find(|l| l.starts_with("rayshare_errors_total{") && l.contains("\"overloaded\""));
    match line {
        Some(l) => l.rsplit(' ').next()?.parse().ok(),
        None => Some(0),
    }
}

fn loadavg() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn ms(us: f64) -> String {
    if us.is_finite() {
        format!("{:.2}", us / 1000.0)
    } else {
        "-".into()
    }
}

/// One table row; `unloaded` is the pods' unloaded p99 (µs) of the same process.
fn row(p: &Phase, unloaded: f64) -> String {
    let flood = p.flood.as_ref();
    let pods = p.pods.as_ref();
    let cpu = flood.or(pods);
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let pod_p99 = pods.map_or(f64::NAN, |r| r.pct_us(0.99));
    format!(
        "| {} | {} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} |",
        p.cores,
        p.name,
        opt(p.flood_rate.map(|r| format!("{r:.0}"))),
        opt(flood.map(|r| format!(
            "{} / {} / {}",
            r.completed(),
            r.refused,
            r.errors - r.refused
        ))),
        opt(p.overloaded.map(|n| n.to_string())),
        mib(p.rss_peak_kib),
        ms(pods.map_or(f64::NAN, |r| r.pct_us(0.5))),
        ms(pod_p99),
        if flood.is_some() && pods.is_some() && unloaded.is_finite() {
            format!("{:.2}", pod_p99 / unloaded)
        } else {
            "-".into()
        },
        opt(pods.map(|r| format!("{} / {}", r.refused, r.errors - r.refused))),
        opt(cpu.map(|r| format!("{:.2}", r.server_cores()))),
        opt(cpu.map(|r| format!("{:.2}", r.client_cores()))),
        opt(cpu.map(|r| format!("{:.2}", r.other_cores()))),
    )
}
