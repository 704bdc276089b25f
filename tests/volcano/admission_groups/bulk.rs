//! (e): a thousand pods created at once, each accepted in its own group; times printed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use super::{bare_pod, one_group_each};
use crate::cluster::*;
use crate::harness::*;
use crate::scheduling::group_name;

/// (e) A thousand pods at once (50 creates in flight), alternating between two rayshare
/// replicas as a Deployment of two would take them: every one accepted by Volcano's
/// webhook, each in its own rayshare group, none failed open (neither counted by rayshare
/// nor by the API server for this test's webhooks). Times are measured and printed, not
/// asserted.
#[tokio::test]
async fn a_thousand_pods_at_once_each_get_their_group() {
    const PODS: usize = 1000;
    const IN_FLIGHT: usize = 50;
    const REPLICAS: usize = 2;
    let _volcano = &*VOLCANO;
    let env = TestEnv::new("ag-bulk", DEFAULT_CONFIG, REPLICAS).await;
    // Room for one pod: the rest wait, so the scheduler and kwok do not bind and run a
    // thousand pods on these 2 cores (admission is what is measured).
    open_queue(&env.admin, "ag-bulk", Some(json!({"cpu": "1"}))).await;
    let pods: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);

    let calls_before = pod_group_calls(&env).await;
    let started = Instant::now();
    let results: Vec<(usize, Duration, Result<Pod, kube::Error>)> = stream::iter(0..PODS)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let mut pod = bare_pod(&format!("bulk-{i:04}"), "ag-bulk", "1");
                let shard = (i % REPLICAS).to_string();
                pod.labels_mut().insert(SHARD_LABEL.into(), shard);
                let sent = Instant::now();
                let created = pods.create(&PostParams::default(), &pod).await;
                (i, sent.elapsed(), created)
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let all_created = started.elapsed();
    let mut latencies: Vec<Duration> = results.iter().map(|(_, l, _)| *l).collect();
    latencies.sort();
    let refused: Vec<String> = results
        .iter()
        .filter_map(|(i, _, r)| r.as_ref().err().map(|e| format!("bulk-{i:04}: {e}")))
        .collect();
    let created: Vec<Pod> = results.into_iter().filter_map(|(_, _, r)| r.ok()).collect();
    let ungrouped: Vec<String> = created
        .iter()
        .filter(|p| group_name(p).as_deref() != Some(p.name_any().as_str()))
        .map(|p| p.name_any())
        .collect();
    let pct = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    eprintln!(
        "[admission-groups] {PODS} pods, {IN_FLIGHT} in flight: all answered in {:.1}s \
         ({:.0} pods/s); create latency p50 {:?}, p90 {:?}, p99 {:?}, max {:?}; {} refused, {} \
         without their own group",
        all_created.as_secs_f64(),
        PODS as f64 / all_created.as_secs_f64(),
        pct(0.5),
        pct(0.9),
        pct(0.99),
        latencies[latencies.len() - 1],
        refused.len(),
        ungrouped.len()
    );
    assert!(
        refused.is_empty(),
        "{} refused: {:?}",
        refused.len(),
        &refused[..refused.len().min(5)]
    );
    // Every pod its own group: a fail-open would leave the pod to Volcano's group per
    // owner, which is what rayshare replaces. Counted here only to say why if one happened
    // (the API server's count is by webhook name, and each test's webhook has its own).
    let failed_open = metric_sum(
        &env.metrics().await,
        "rayshare_admission_requests_total{",
        &["kind=\"Pod\"", "outcome=\"failed_open\""],
    ) as u64;
    let api_server_failed_open = env.api_server_fail_opens().await as u64;
    let log = env.log_text();
    let sent_again = log.matches("create not answered yet: sent again").count();
    eprintln!(
        "[admission-groups] rayshare's admission time per pod: {}; creates sent again: \
         {sent_again}; fail-opens: {failed_open} by rayshare, {api_server_failed_open} by the \
         API server",
        admission_times(&log)
    );
    for line in log
        .lines()
        .filter(|l| l.contains("outcome=\"failed_open\""))
        .take(5)
    {
        eprintln!("[admission-groups] failed open: {line}");
    }
    assert!(
        ungrouped.is_empty() && failed_open == 0 && api_server_failed_open == 0,
        "{} without their group ({failed_open} fail-opens counted by rayshare, \
         {api_server_failed_open} by the API server): {:?}",
        ungrouped.len(),
        &ungrouped[..ungrouped.len().min(5)]
    );
    let groups = one_group_each(&env, &created).await;
    let calls: BTreeMap<String, i64> = pod_group_calls(&env)
        .await
        .into_iter()
        .map(|(verb, n)| {
            let before = calls_before[&verb];
            (verb, n - before)
        })
        .collect();
    eprintln!(
        "[admission-groups] every one of the {PODS} groups taken up {:.1}s after the first create; \
         PodGroup calls to the API server meanwhile (every client's, other tests' too): {calls:?}",
        started.elapsed().as_secs_f64(),
    );
    let mut phases: BTreeMap<String, usize> = BTreeMap::new();
    for g in &groups {
        let phase = g.data["status"]["phase"].as_str().unwrap_or("(none)");
        *phases.entry(phase.to_string()).or_default() += 1;
    }
    eprintln!("[admission-groups] the groups' phases (queue room for one pod): {phases:?}");
    let metrics = env.metrics().await;
    for line in metrics.lines().filter(|l| {
        [
            "rayshare_objects_created_total",
            "rayshare_objects_reused_total",
            "rayshare_errors_total",
            "rayshare_admission_duration_seconds_sum{kind=\"Pod\"",
            "rayshare_admission_duration_seconds_count{kind=\"Pod\"",
        ]
        .iter()
        .any(|m| l.starts_with(m))
    }) {
        eprintln!("[admission-groups] {line}");
    }
    // rayshare's warnings, by message (what the errors above were).
    let mut warnings: BTreeMap<String, usize> = BTreeMap::new();
    for line in env.log_text().lines() {
        if let Some((_, rest)) = line.split_once(" WARN ") {
            let what: Vec<&str> = rest
                .split_whitespace()
                .take_while(|w| !w.contains('='))
                .collect();
            let what = what.join(" ");
            *warnings.entry(what).or_default() += 1;
        }
    }
    eprintln!("[admission-groups] rayshare's warnings: {warnings:#?}");
    // Not left for the scheduler to look at in every session of the remaining tests.
    pods.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
}

/// Percentiles of the pod admissions' `duration_us` in rayshare's log.
fn admission_times(log: &str) -> String {
    let mut times: Vec<u64> = log
        .lines()
        .filter(|l| l.contains("kind=Pod") && l.contains(" admitted"))
        .filter_map(|l| {
            l.split("duration_us=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect();
    times.sort_unstable();
    let Some(max) = times.last() else {
        return "no admission logged".to_string();
    };
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize] / 1000;
    format!(
        "p50 {} ms, p90 {} ms, p99 {} ms, max {} ms",
        at(0.5),
        at(0.9),
        at(0.99),
        max / 1000
    )
}

/// PodGroup calls the API server answered so far, by verb (every client's).
async fn pod_group_calls(env: &TestEnv) -> BTreeMap<String, i64> {
    let request = axum::http::Request::get("/metrics")
        .body(Vec::new())
        .unwrap();
    let metrics = env.admin.request_text(request).await.unwrap();
    let mut calls = BTreeMap::new();
    for verb in ["POST", "GET", "PATCH"] {
        let with = [
            "resource=\"podgroups\"",
            &format!("verb=\"{verb}\""),
            "dry_run=\"\"",
        ];
        let n = metric_sum(&metrics, "apiserver_request_total{", &with) as i64;
        calls.insert(verb.to_string(), n);
    }
    calls
}
