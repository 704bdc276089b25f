//! What the slice bench reads besides the burst itself: rayshare's counters and the
//! control plane's CPU profile.

use std::future::Future;
use std::path::PathBuf;

use http_body_util::BodyExt;

use super::Burst;
use crate::harness::*;

/// The sum over every instance of the metric lines `counted` picks.
async fn metric_sum(env: &TestEnv, counted: impl Fn(&str) -> bool) -> u64 {
    let n: f64 = env
        .metrics()
        .await
        .lines()
        .filter(|l| counted(l))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    n as u64
}

/// Events of indexed pods every instance has recorded or dropped so far.
pub(super) async fn events_settled(env: &TestEnv) -> u64 {
    metric_sum(env, |line| {
        line.starts_with("rayshare_events_recorded_total{reason=\"IndicesAssigned\"}")
            || line.starts_with("rayshare_events_dropped_total{")
    })
    .await
}

/// Pod admission reviews every instance has answered so far.
pub(super) async fn pods_reviewed(env: &TestEnv) -> u64 {
    metric_sum(env, |line| {
        line.starts_with("rayshare_admission_requests_total{kind=\"Pod\"")
    })
    .await
}

/// RAYSHARE_SLICE_PROFILE=DIR: each burst also writes the control plane's CPU profile
/// (kube-apiserver and etcd are one process; its `/debug/pprof`) over the burst and the
/// Events that follow it, `DIR/<round>-<replicas>-<burst>.pb.gz`, for `go tool pprof`.
pub(super) async fn profiled(
    client: &kube::Client,
    name: String,
    burst: impl Future<Output = Burst>,
) -> Burst {
    const SECONDS: u32 = 3;
    let Some(dir) = std::env::var_os("RAYSHARE_SLICE_PROFILE").map(PathBuf::from) else {
        return burst.await;
    };
    let profile = async {
        let request = axum::http::Request::get(format!("/debug/pprof/profile?seconds={SECONDS}"))
            .body(kube::client::Body::from(Vec::new()))
            .expect("request");
        let response = client.send(request).await.map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("{} (is --profiling on?)", response.status()));
        }
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(body.to_bytes())
    };
    let (burst, profile) = tokio::join!(burst, profile);
    let path = dir.join(format!("{name}.pb.gz"));
    match profile.and_then(|p| std::fs::write(&path, p).map_err(|e| e.to_string())) {
        Ok(()) => eprintln!("[slice] profile {}", path.display()),
        Err(e) => eprintln!("[slice] no profile {}: {e}", path.display()),
    }
    burst
}
