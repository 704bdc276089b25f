//! Raw creates through the API server, and rayshare's metrics and readiness.

use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::harness::*;

/// What the API server answered to one create.
pub(super) struct Answer {
    pub(super) status: u16,
    /// The `Warning` headers (admission webhook warnings come back as these).
    pub(super) warnings: Vec<String>,
    pub(super) body: Value,
    pub(super) latency: Duration,
}

impl Answer {
    pub(super) fn rayshare_warnings(&self) -> Vec<&String> {
        self.warnings
            .iter()
            .filter(|w| w.contains("rayshare"))
            .collect()
    }

    pub(super) fn short(&self) -> String {
        let text = self.body.to_string();
        let cut: String = text.chars().take(600).collect();
        format!(
            "HTTP {} after {:?}, warnings {:?}, body {cut}",
            self.status, self.latency, self.warnings
        )
    }
}

/// POSTs `object` to `path` as it is (no discovery, no retries), timing the round trip
/// and keeping the warnings kube's typed API would drop.
pub(super) async fn post(env: &TestEnv, path: &str, object: &Value, dry_run: bool) -> Answer {
    let params = PostParams {
        dry_run,
        ..Default::default()
    };
    let request = kube::core::Request::new(path)
        .create(&params, serde_json::to_vec(object).unwrap())
        .unwrap();
    let started = Instant::now();
    let call = async {
        let response = env
            .admin
            .send(request.map(kube::client::Body::from))
            .await
            .expect("the API server answers");
        let status = response.status().as_u16();
        let warnings = response
            .headers()
            .get_all("warning")
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, warnings, bytes)
    };
    // The API server gives up on the webhook after its timeoutSeconds (5 s).
    let Ok((status, warnings, bytes)) = tokio::time::timeout(Duration::from_secs(60), call).await
    else {
        return Answer {
            status: 0,
            warnings: vec![],
            body: json!("no answer from the API server in 60 s"),
            latency: started.elapsed(),
        };
    };
    let latency = started.elapsed();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| json!(String::from_utf8_lossy(&bytes).into_owned()));
    Answer {
        status,
        warnings,
        body,
        latency,
    }
}

pub(super) fn jobs_path(ns: &str) -> String {
    format!("/apis/ray.io/v1/namespaces/{ns}/rayjobs")
}

/// rayshare's metrics, or `None` when it does not answer within 10 s (it died, or no
/// worker is left to serve them).
pub(super) async fn scrape(r: &Rayshare) -> Option<String> {
    let get = async {
        let response = reqwest::get(format!("{}/metrics", r.admin_url))
            .await
            .ok()?;
        response.text().await.ok()
    };
    tokio::time::timeout(Duration::from_secs(10), get)
        .await
        .ok()
        .flatten()
}

/// Whether rayshare answers `/readyz` within 10 s. When it does not, it is killed
/// (`SIGKILL`): a process whose workers are all busy does not stop on `SIGTERM` either,
/// and the harness would wait for it forever.
pub(super) async fn ready_or_killed(r: &Rayshare) -> bool {
    let get = reqwest::get(format!("{}/readyz", r.admin_url));
    let ready = tokio::time::timeout(Duration::from_secs(10), get)
        .await
        .is_ok_and(|r| r.is_ok_and(|r| r.status().is_success()));
    if !ready && let Some(pid) = r.pid() {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    ready
}

/// A counter's value (0 when the series does not exist yet).
pub(super) fn counter(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .parse::<f64>()
                .ok()
        })
        .map_or(0, |v| v as u64)
}

/// CREATE admissions of `kind` rayshare finished, as (left unchanged or failed open,
/// mutated).
pub(super) fn answered(metrics: &str, kind: &str) -> (u64, u64) {
    let series = |outcome: &str| {
        let s = format!(
            "rayshare_admission_requests_total{{kind=\"{kind}\",operation=\"CREATE\",outcome=\"{outcome}\"}}"
        );
        counter(metrics, &s)
    };
    (
        series("unchanged") + series("failed_open"),
        series("mutated"),
    )
}
