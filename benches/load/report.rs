//! The summary: rayshare as ratios to the floor, and the targets.

use std::fmt::Write;

use serde_json::{Value, json};

const POD_KINDS: [&str; 3] = ["pod-unchanged", "pod-podgroup", "worker-pod"];
const KINDS: [&str; 4] = [
    "pod-unchanged",
    "pod-podgroup",
    "worker-pod",
    "rayjob-cached",
];
const PROTOS: [&str; 2] = ["h2", "http/1.1"];

fn find(runs: &Value, f: impl Fn(&Value) -> bool) -> Option<&Value> {
    runs.as_array()?.iter().find(|r| f(r))
}

fn num(v: Option<&Value>, field: &str) -> f64 {
    v.and_then(|r| r[field].as_f64()).unwrap_or(f64::NAN)
}

fn sat<'a>(r: &'a Value, server: &str, kind: &str, proto: &str, cores: u64) -> Option<&'a Value> {
    find(&r["saturation"], |x| {
        x["server"] == server && x["kind"] == kind && x["protocol"] == proto && x["cores"] == cores
    })
}

fn lat<'a>(r: &'a Value, server: &str, kind: &str, proto: &str, rate: f64) -> Option<&'a Value> {
    find(&r["latency"], |x| {
        x["server"] == server
            && x["kind"] == kind
            && x["protocol"] == proto
            && x["offered_rps"].as_f64() == Some(rate)
    })
}

fn ms(us: f64) -> String {
    if us.is_nan() {
        "-".into()
    } else if us >= 10_000.0 {
        format!("{:.0}", us / 1000.0)
    } else {
        format!("{:.2}", us / 1000.0)
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    a / b
}

fn target(name: String, value: f64, unit: &str, limit: f64, at_most: bool, note: String) -> Value {
    let met = if at_most {
        value <= limit
    } else {
        value >= limit
    };
    json!({
        "target": name,
        "value": (value * 1000.0).round() / 1000.0,
        "unit": unit,
        "limit": limit,
        "met": met && value.is_finite(),
        "note": note,
    })
}

/// Markdown summary and the targets, from results.json's content.
pub fn summarize(r: &Value) -> (String, Value) {
    let mut out = String::new();
    let m = &r["machine"];
    let _ = writeln!(
        out,
        "### rayshare load benchmark\n\nMachine: {} ({} CPUs), {} GiB, Linux {}, {}.{}\n",
        m["cpu"].as_str().unwrap_or("?"),
        m["cpus"],
        m["memory_gib"],
        m["kernel"].as_str().unwrap_or("?"),
        m["rustc"].as_str().unwrap_or("?"),
        if r["quick"] == true {
            " QUICK RUN (short windows, small caches): not for publication."
        } else {
            ""
        }
    );

    let _ = writeln!(
        out,
        "Saturation throughput (req/s, closed loop) and server CPU per request; ratio = rayshare / floor.\n"
    );
    let _ = writeln!(
        out,
        "| kind | protocol | 1 core: rayshare | floor | ratio | 2 cores: rayshare | floor | ratio | CPU µs/req rayshare | floor |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for kind in KINDS {
        for proto in PROTOS {
            let (r1, f1) = (
                sat(r, "rayshare", kind, proto, 1),
                sat(r, "floor", kind, proto, 1),
            );
            let (r2, f2) = (
                sat(r, "rayshare", kind, proto, 2),
                sat(r, "floor", kind, proto, 2),
            );
            let t = |v| num(v, "throughput_rps");
            let c = |v| num(v, "server_cpu_us_per_req");
            let _ = writeln!(
                out,
                "| {kind} | {proto} | {:.0} | {:.0} | {:.2} | {:.0} | {:.0} | {:.2} | {:.1} | {:.1} |",
                t(r1),
                t(f1),
                ratio(t(r1), t(f1)),
                t(r2),
                t(f2),
                ratio(t(r2), t(f2)),
                c(r1),
                c(f1)
            );
        }
    }

    let rates: Vec<f64> = {
        let mut v: Vec<f64> = r["latency"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x["offered_rps"].as_f64())
            .collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    };
    let _ = writeln!(
        out,
        "\nLatency at fixed offered load, one core (ms, p50 / p99 / p99.9; floor p99 and rayshare/floor p99 ratio in brackets).\n"
    );
    let mut header = "| kind | protocol |".to_string();
    let mut rule = "|---|---|".to_string();
    for rate in &rates {
        let _ = write!(header, " {rate:.0} req/s |");
        rule.push_str("---|");
    }
    let _ = writeln!(out, "{header}\n{rule}");
    for kind in KINDS {
        for proto in PROTOS {
            let mut line = format!("| {kind} | {proto} |");
            for &rate in &rates {
                let x = lat(r, "rayshare", kind, proto, rate);
                let f = lat(r, "floor", kind, proto, rate);
                let errors = x.and_then(|x| x["errors"].as_u64()).unwrap_or(0);
                let _ = write!(
                    line,
                    " {} / {} / {} [{}; {:.1}x]{} |",
                    ms(num(x, "p50_us")),
                    ms(num(x, "p99_us")),
                    ms(num(x, "p999_us")),
                    ms(num(f, "p99_us")),
                    ratio(num(x, "p99_us"), num(f, "p99_us")),
                    if errors > 0 {
                        format!(" ({errors} errors)")
                    } else {
                        String::new()
                    }
                );
            }
            let _ = writeln!(out, "{line}");
        }
    }

    let _ = writeln!(
        out,
        "\nPaths with an API call per request (h2, one core; latency in ms).\n\n| kind | offered req/s | p50 | p99 | p99.9 | API calls / request | errors |\n|---|---:|---:|---:|---:|---:|---:|"
    );
    for x in r["api_paths"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            x["kind"].as_str().unwrap_or(""),
            x["offered_rps"],
            ms(num(Some(x), "p50_us")),
            ms(num(Some(x), "p99_us")),
            ms(num(Some(x), "p999_us")),
            x["api_calls_per_request"],
            x["errors"]
        );
    }

    let rss = &r["rss_kib"];
    let kib = |v: &Value| v.as_f64().unwrap_or(f64::NAN) / 1024.0;
    let ray = &rss["rayshare"];
    let _ = writeln!(
        out,
        "\nRSS (MiB): rayshare idle {:.1} (floor {:.1}); with {} RayClusters + {} namespaces cached ({} pods in the API server): {:.1} after watching them arrive, {:.1} when started with them (peak {:.1}); after the one-core runs {:.1} (peak {:.1}; the orphan-PodGroup pass read {} pages of pods meanwhile).",
        kib(&ray["idle_fresh"]),
        kib(&rss["floor"]["idle_fresh"]),
        rss["large_caches"]["ray_clusters"],
        rss["large_caches"]["namespaces"],
        rss["large_caches"]["pods"],
        kib(&ray["large_caches_incremental"]),
        kib(&ray["large_caches_fresh_start"]),
        kib(&ray["large_caches_fresh_start_peak"]),
        kib(&ray["after_one_core_runs"]),
        kib(&ray["peak_after_one_core_runs"]),
        ray["pod_list_pages_during_one_core_runs"],
    );

    let o = &r["orphan_pass"];
    if o.is_object() {
        let a = &o["admission_meanwhile"];
        let _ = writeln!(
            out,
            "\nOrphan-PodGroup pass with {} pods in the cluster: {} list pages read; rayshare RSS {:.1} -> {:.1} MiB; pod-unchanged at 1,000 req/s meanwhile: p50 {} / p99 {} / max {} ms.",
            rss["large_caches"]["pods"],
            o["pod_list_pages"],
            kib(&o["rss_kib_before"]),
            kib(&o["rss_kib_after"]),
            ms(num(Some(a), "p50_us")),
            ms(num(Some(a), "p99_us")),
            ms(num(Some(a), "max_us")),
        );
    }

    if let Some(micro) = r["micro"].as_array().filter(|m| !m.is_empty()) {
        let _ = writeln!(
            out,
            "\nMicro-benchmarks (criterion, `cargo bench --bench mutate`), mean per call:\n\n| case | µs |\n|---|---:|"
        );
        for x in micro {
            let _ = writeln!(
                out,
                "| {} | {:.2} |",
                x["name"].as_str().unwrap_or(""),
                x["mean_ns"].as_f64().unwrap_or(f64::NAN) / 1000.0
            );
        }
    }

    // The targets.
    let mut targets = Vec::new();
    for proto in PROTOS {
        let (worst, kind) = POD_KINDS
            .iter()
            .map(|k| (num(lat(r, "rayshare", k, proto, 2000.0), "p99_us"), *k))
            .fold((f64::NAN, ""), |a, b| {
                if a.0.is_nan() || b.0 > a.0 { b } else { a }
            });
        targets.push(target(
            format!("Pod paths p99 <= 1 ms at 2,000 req/s, one core, {proto}"),
            worst / 1000.0,
            "ms",
            1.0,
            true,
            format!("worst pod kind: {kind}"),
        ));
    }
    // Saturation: the worst pod kind decides; the others are named with their ratios.
    // (RayJobs have no saturation target: their ratio is in the table above.)
    for cores in [1u64, 2] {
        for proto in PROTOS {
            let ratios: Vec<(f64, &str)> = POD_KINDS
                .iter()
                .map(|k| {
                    let t = |s| num(sat(r, s, k, proto, cores), "throughput_rps");
                    (t("rayshare") / t("floor"), *k)
                })
                .collect();
            let (worst, kind) = ratios.iter().copied().fold((f64::NAN, ""), |a, b| {
                if a.0.is_nan() || b.0 < a.0 { b } else { a }
            });
            let others: Vec<String> = ratios
                .iter()
                .filter(|(_, k)| *k != kind)
                .map(|(x, k)| format!("{k} {x:.2}"))
                .collect();
            targets.push(target(
                format!("Pod paths saturation >= 70% of the floor's, {cores} core(s), {proto}"),
                worst,
                "ratio",
                0.7,
                false,
                format!("worst kind: {kind}; {}", others.join(", ")),
            ));
        }
    }
    for proto in PROTOS {
        targets.push(target(
            format!("RayJob with cached cluster p99 <= 2 ms at 500 req/s, one core, {proto}"),
            num(lat(r, "rayshare", "rayjob-cached", proto, 500.0), "p99_us") / 1000.0,
            "ms",
            2.0,
            true,
            String::new(),
        ));
    }
    targets.push(target(
        "Idle RSS <= 30 MiB".into(),
        kib(&ray["idle_fresh"]),
        "MiB",
        30.0,
        true,
        "fresh process, caches synced, fixture only".into(),
    ));
    let large = kib(&ray["large_caches_incremental"]).max(kib(&ray["large_caches_fresh_start"]));
    targets.push(target(
        "RSS with large caches <= 150 MiB (cached objects)".into(),
        large,
        "MiB",
        150.0,
        true,
        "larger of: watched them arrive, started with them".into(),
    ));
    targets.push(target(
        "RSS with large caches <= 150 MiB (after minutes of load and reconciler passes)".into(),
        kib(&ray["after_one_core_runs"]),
        "MiB",
        150.0,
        true,
        format!(
            "pod list pages read by the orphan-PodGroup pass: {}",
            ray["pod_list_pages_during_one_core_runs"]
        ),
    ));

    let _ = writeln!(
        out,
        "\nTargets:\n\n| target | value | met |\n|---|---:|---|"
    );
    for t in &targets {
        let _ = writeln!(
            out,
            "| {} | {} {} {} | {} |",
            t["target"].as_str().unwrap_or(""),
            t["value"],
            t["unit"].as_str().unwrap_or(""),
            t["note"]
                .as_str()
                .map(|n| if n.is_empty() {
                    String::new()
                } else {
                    format!("({n})")
                })
                .unwrap_or_default(),
            if t["met"] == true { "yes" } else { "**no**" }
        );
    }
    (out, Value::Array(targets))
}
