use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Version, header};
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use http_body_util::BodyExt;
use std::panic::AssertUnwindSafe;

use super::{ApiError, AppState};

use crate::admission::{self, Outcome, review};
use crate::cause::Cause;
use crate::metrics::{LatencyLabels, RequestLabels};
use crate::world::World;

/// Metric label values come from a fixed set: request fields are caller-controlled.
fn known(value: &str, allowed: &[&'static str]) -> &'static str {
    allowed
        .iter()
        .find(|a| **a == value)
        .copied()
        .unwrap_or("other")
}

pub async fn not_found() -> ApiError {
    ApiError::NotFound
}

async fn read_body<W>(
    state: &AppState<W>,
    headers: &HeaderMap,
    body: Body,
) -> Result<bytes::Bytes, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !content_type.starts_with("application/json") {
        return Err(ApiError::ContentType(content_type.into()));
    }
    let limit = state.max_body_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    let read = async {
        let mut body = body;
        let mut buf = Vec::with_capacity(declared.unwrap_or(0).min(limit));
        let mut total = 0usize;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| ApiError::Body(e.to_string()))?;
            let Some(data) = frame.data_ref() else {
                continue;
            };
            total += data.len();
            if total <= limit {
                buf.extend_from_slice(data);
            } else if total > 2 * limit {
                // Beyond this, stop reading; the connection is closed anyway.
                break;
            }
        }
        // An oversized body is read (up to twice the limit) before answering, so an
        // HTTP/1.1 client sees the 413 rather than a reset connection.
        if total > limit {
            return Err(ApiError::TooLarge(limit));
        }
        Ok(bytes::Bytes::from(buf))
    };
    if declared.is_some_and(|n| n > 2 * limit) {
        return Err(ApiError::TooLarge(limit));
    }
    tokio::time::timeout(state.body_timeout, read)
        .await
        .map_err(|_| ApiError::BodyTimeout)?
}

fn panicked(
    req: &review::AdmissionRequest,
    metrics: &crate::metrics::Metrics,
) -> admission::Admission {
    tracing::error!(uid = %req.uid, "rayshare panicked; the object passes unchanged");
    let warning = "rayshare: internal error; left unchanged".into();
    admission::Admission::failed_open(Cause::Panic, warning, Some(metrics))
}

pub async fn mutate<W: World>(
    State(state): State<Arc<AppState<W>>>,
    version: Version,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let metrics = &state.metrics;
    let request = match read_body(&state, &headers, body).await {
        Ok(bytes) => review::parse_review(bytes).map_err(ApiError::from),
        Err(e) => Err(e),
    };
    let request = match request {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(cause = e.cause().as_str(), error = %e, "rejected a malformed admission request");
            metrics.error(e.cause());
            metrics
                .requests
                .get_or_create(&RequestLabels {
                    kind: "unknown",
                    operation: "unknown",
                    outcome: "bad_request",
                })
                .inc();
            let close = e.closes_connection() && version < Version::HTTP_2;
            let mut response = e.into_response();
            if close {
                let value = header::HeaderValue::from_static("close");
                response.headers_mut().insert(header::CONNECTION, value);
            }
            return response;
        }
    };
    metrics.in_flight.inc();
    let (config, world) = (&state.config, state.world.as_ref());
    // A bug must not turn into a failed admission (or, with failurePolicy Fail, a denial).
    let settled = std::panic::catch_unwind(AssertUnwindSafe(|| {
        admission::settled(&request, config, world, Some(metrics))
    }));
    let admission = match settled {
        Ok(Some(admission)) => admission,
        Ok(None) => {
            let work = admission::work(&request, config, world, Some(metrics));
            match AssertUnwindSafe(work).catch_unwind().await {
                Ok(admission) => admission,
                Err(_) => panicked(&request, metrics),
            }
        }
        Err(_) => panicked(&request, metrics),
    };
    metrics.in_flight.dec();
    let elapsed = started.elapsed();
    let (kind, outcome) = (
        known(&request.kind.kind, &["RayJob", "Pod"]),
        admission.outcome.as_str(),
    );
    metrics
        .duration
        .get_or_create(&LatencyLabels { kind, outcome })
        .observe(elapsed.as_secs_f64());
    metrics
        .requests
        .get_or_create(&RequestLabels {
            kind,
            operation: known(
                &request.operation,
                &["CREATE", "UPDATE", "DELETE", "CONNECT"],
            ),
            outcome,
        })
        .inc();
    log(&request, &admission, elapsed);
    (
        [(header::CONTENT_TYPE, "application/json")],
        admission.verdict.review_bytes(&request.uid),
    )
        .into_response()
}

/// One line per request that changed something or went wrong, the rest at debug, so a
/// busy webhook's log is about what it did. The request's fields go on the line itself:
/// a span per request cost a sixth of a mutated pod's CPU with JSON logs (its fields
/// formatted when made, then parsed and written again for the line).
fn log(req: &review::AdmissionRequest, admission: &admission::Admission, elapsed: Duration) {
    let (outcome, duration_us) = (admission.outcome.as_str(), elapsed.as_micros() as u64);
    let warnings = &admission.verdict.warnings;
    macro_rules! line {
        ($level:ident, $($field:tt)*) => {
            tracing::$level!(
                uid = %req.uid,
                kind = %req.kind.kind,
                namespace = %req.namespace,
                name = %req.name,
                operation = %req.operation,
                dry_run = req.dry_run,
                outcome,
                duration_us,
                $($field)*
            )
        };
    }
    match admission.outcome {
        Outcome::Failed(cause) | Outcome::Denied(cause) => {
            line!(warn, cause = cause.as_str(), ?warnings, "admitted")
        }
        Outcome::Mutated => line!(info, ?warnings, "admitted"),
        Outcome::Ignored | Outcome::Unchanged => line!(debug, "admitted"),
    }
}
