//! Results: the JSON and summary written at the end, and helpers to read answers.

use super::*;

impl Bench {
    pub(super) fn finish(mut self, started: Instant) {
        let s = &self.settings;
        let results = json!({
            "benchmark": "rayshare load benchmark (issue 9): bash tests/bench/run.sh",
            "quick": self.quick,
            "machine": self.machine,
            "settings": {
                "saturation": format!("closed loop, {} requests in flight, {:?} warm-up, {:?} measured", s.concurrency, s.sat_warmup, s.sat_measure),
                "latency": format!("open loop at fixed rates (latency from each request's due time), {:?} warm-up, >= {:?} measured", s.lat_warmup, (s.lat_measure)(1e9)),
                "h2": format!("{} connection(s), multiplexed", s.h2_conns),
                "http1": format!("{} kept-alive connections", s.h1_conns),
                "one_core": "server pinned to CPU 0, load generator to CPU 1",
                "two_cores": "server and load generator both on CPUs 0-1 (they compete)",
                "rayshare": "rayshare serve, default feature config (first instance: podGroups orphanGraceSeconds/reconcileIntervalSeconds 5, see orphan_pass), --log-format json --log-level info (as the Helm chart), admin kubeconfig of the local control plane",
                "floor": "axum + rustls (ring, TLS 1.2/1.3, ALPN h2/http1.1, same certificate), reads the body, answers a fixed AdmissionReview",
            },
            "kinds": self.results.remove("kinds"),
            "saturation": self.saturation,
            "latency": self.latency,
            "api_paths": self.api_paths,
            "rss_kib": self.results.remove("rss_kib"),
            "background_cores_before_runs": self.results.remove("background_cores_before_runs"),
            "orphan_pass": self.results.remove("orphan_pass"),
            "micro": micro_results(&self.repo),
        });
        let mut results = results;
        let (summary, targets) = report::summarize(&results);
        results["targets"] = targets;
        let path = self.out.join("results.json");
        std::fs::write(&path, serde_json::to_string_pretty(&results).expect("JSON"))
            .expect("writing results.json");
        std::fs::write(self.out.join("summary.md"), &summary).expect("writing summary.md");
        println!("{summary}");
        eprintln!(
            "load: [{}] wrote {} and summary.md",
            elapsed(started),
            path.display()
        );
    }
}

pub(super) fn rereport(file: &std::path::Path) -> ExitCode {
    let text = std::fs::read_to_string(file).expect("reading results.json");
    let mut results: Value = serde_json::from_str(&text).expect("results.json is JSON");
    let (summary, targets) = report::summarize(&results);
    results["targets"] = targets;
    std::fs::write(file, serde_json::to_string_pretty(&results).expect("JSON"))
        .expect("writing results.json");
    let dir = file.parent().unwrap_or(std::path::Path::new("."));
    std::fs::write(dir.join("summary.md"), &summary).expect("writing summary.md");
    println!("{summary}");
    ExitCode::SUCCESS
}

/// The criterion results of `cargo bench --bench mutate`, when it ran before.
pub(super) fn micro_results(repo: &std::path::Path) -> Value {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("target"))
        .join("criterion");
    let read = |p: PathBuf| -> Option<Value> {
        serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let new = entry.path().join("new");
        let (Some(b), Some(e)) = (
            read(new.join("benchmark.json")),
            read(new.join("estimates.json")),
        ) else {
            continue;
        };
        out.push(json!({
            "name": b["full_id"],
            "mean_ns": e["mean"]["point_estimate"].as_f64().map(|v| v.round()),
            "median_ns": e["median"]["point_estimate"].as_f64().map(|v| v.round()),
        }));
    }
    out.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Value::Array(out)
}

pub(super) fn errors_note(run: &Run) -> String {
    match &run.first_error {
        Some(e) => format!("  ERRORS {} (first: {e})", run.errors),
        None => String::new(),
    }
}

pub(super) fn round1(v: f64) -> f64 {
    if v.is_finite() {
        (v * 10.0).round() / 10.0
    } else {
        -1.0
    }
}

pub(super) fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

pub(super) fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

pub(super) fn run_json(run: &Run, server: &str, kind: &str, proto: Proto, cores: usize) -> Value {
    json!({
        "server": server,
        "kind": kind,
        "protocol": proto.name(),
        "cores": cores,
        "throughput_rps": run.throughput.round(),
        "completed": run.completed(),
        "errors": run.errors,
        "first_error": run.first_error,
        "p50_us": round1(run.pct_us(0.5)),
        "p99_us": round1(run.pct_us(0.99)),
        "p999_us": round1(run.pct_us(0.999)),
        "max_us": round1(run.pct_us(1.0)),
        "server_cpu_us_per_req": round1(run.server_cpu_us_per_req()),
        "server_cores_busy": round3(run.server_cores()),
        "client_cores_busy": round3(run.client_cores()),
        "other_cores_busy": round3(run.other_cores()),
        "window_s": round3(run.window.as_secs_f64()),
    })
}

pub(super) fn patch_ops(answer: &Value) -> Vec<Value> {
    answer["response"]["patch"]
        .as_str()
        .and_then(|p| BASE64.decode(p.as_bytes()).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

pub(super) fn has_patch(answer: &Value) -> bool {
    !patch_ops(answer).is_empty()
}

pub(super) fn warnings(answer: &Value) -> Vec<String> {
    answer["response"]["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(String::from))
        .collect()
}

pub(super) fn answer_summary(answer: &Value) -> Value {
    let ops = patch_ops(answer);
    json!({
        "allowed": answer["response"]["allowed"],
        "patch_ops": ops.len(),
        "patch_paths": ops.iter().map(|o| o["path"].clone()).collect::<Vec<_>>(),
        "warnings": warnings(answer),
    })
}

pub(super) fn shared_cluster_name(answer: &Value) -> Option<String> {
    patch_ops(answer).iter().find_map(|op| {
        let path = op["path"].as_str()?;
        if path == "/spec/clusterSelector" {
            op["value"]["ray.io/cluster"].as_str().map(String::from)
        } else if path == "/spec/clusterSelector/ray.io~1cluster" {
            op["value"].as_str().map(String::from)
        } else {
            None
        }
    })
}

/// A stored RayCluster as a new object named `name` in `namespace`.
pub(super) fn clean_cluster(stored: &Value, name: &str, namespace: &str) -> Value {
    let mut c = stored.clone();
    let meta = c["metadata"].as_object_mut().expect("metadata");
    for key in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
        "ownerReferences",
    ] {
        meta.remove(key);
    }
    meta.insert("name".into(), json!(name));
    meta.insert("namespace".into(), json!(namespace));
    c.as_object_mut().expect("object").remove("status");
    c
}
