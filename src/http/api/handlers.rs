use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Version, header};
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use http_body_util::BodyExt;
use std::panic::AssertUnwindSafe;
use tokio::sync::OwnedSemaphorePermit;

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

/// The body, and its share of the buffered-bytes budget (held until the answer is sent).
async fn read_body<W>(
    state: &AppState<W>,
    headers: &HeaderMap,
    body: Body,
) -> Result<(bytes::Bytes, OwnedSemaphorePermit), ApiError> {
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
    let budget = state.limits.budget_for(declared);
    let kib = |bytes: usize| u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX);
    // The declared length up front, what arrives beyond it as it comes; never waiting, so
    // a flood is refused at once instead of queueing memory.
    let mut held = budget
        .clone()
        .try_acquire_many_owned(kib(declared.unwrap_or(0).min(limit)))
        .map_err(|_| ApiError::Overloaded)?;
    let read = async move {
        let mut body = body;
        let mut buf = Vec::with_capacity(declared.unwrap_or(0).min(limit));
        let mut total = 0usize;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| ApiError::Body(e.to_string()))?;
            let Some(data) = frame.data_ref() else {
                continue;
            };
            total += data.len();
            let needed = kib(total.min(limit)).saturating_sub(held.num_permits() as u32);
            if needed > 0 {
                let more = budget.clone().try_acquire_many_owned(needed);
                held.merge(more.map_err(|_| ApiError::Overloaded)?);
            }
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
        Ok((bytes::Bytes::from(buf), held))
    };
    if declared.is_some_and(|n| n > 2 * limit) {
        return Err(ApiError::TooLarge(limit));
    }
    tokio::time::timeout(state.body_timeout, read)
        .await
        .map_err(|_| ApiError::BodyTimeout)?
}

/// The review, its tree's memory held from the trees' budget first (never waiting: a
/// flood of costly bodies is refused at once). A review too costly to build at all takes
/// nothing: it is read without its object and answered unchanged.
fn parse_within<W>(
    state: &AppState<W>,
    bytes: bytes::Bytes,
) -> Result<(review::AdmissionRequest, Option<OwnedSemaphorePermit>), ApiError> {
    let cost = review::tree_cost(&bytes);
    let tree = if cost > review::MAX_TREE_BYTES {
        None
    } else {
        let kib = u32::try_from(cost.div_ceil(1024)).unwrap_or(u32::MAX);
        let trees = state.limits.trees_kib.clone();
        Some(
            trees
                .try_acquire_many_owned(kib)
                .map_err(|_| ApiError::Overloaded)?,
        )
    };
    let request = review::parse_review_costing(bytes, cost)?;
    Ok((request, tree))
}

/// The object passes unchanged: rayshare panicked, or had too much to do already.
fn passed_unchanged(
    req: &review::AdmissionRequest,
    metrics: &crate::metrics::Metrics,
    cause: Cause,
) -> admission::Admission {
    let why = if cause == Cause::Panic {
        tracing::error!(uid = %req.uid, "rayshare panicked; the object passes unchanged");
        "internal error"
    } else {
        tracing::warn!(uid = %req.uid, "too many admissions at once; the object passes unchanged");
        "overloaded"
    };
    let warning = format!("rayshare: {why}; left unchanged");
    admission::Admission::failed_open(cause, warning, Some(metrics))
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
        Ok((bytes, held)) => parse_within(&state, bytes).map(|(r, tree)| (r, (held, tree))),
        Err(e) => Err(e),
    };
    let (request, _held) = match request {
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
        // Only work takes a slot: a request settled by triage costs next to nothing. A
        // burst waits for one (its body is already counted against the buffer bound);
        // only a request that would wait past half its admission budget passes unchanged.
        Ok(None) => match tokio::time::timeout(
            Duration::from_millis(config.admission_timeout_ms / 2),
            state.limits.admissions.acquire(),
        )
        .await
        {
            Err(_) | Ok(Err(_)) => passed_unchanged(&request, metrics, Cause::Overloaded),
            Ok(Ok(_slot)) => {
                let deadline = started + Duration::from_millis(config.admission_timeout_ms);
                let work = admission::work_until(&request, config, world, Some(metrics), deadline);
                match AssertUnwindSafe(work).catch_unwind().await {
                    Ok(admission) => admission,
                    Err(_) => passed_unchanged(&request, metrics, Cause::Panic),
                }
            }
        },
        Err(_) => passed_unchanged(&request, metrics, Cause::Panic),
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
/// A forged review's fields can be any size: each is clipped, so one line stays small.
fn log(req: &review::AdmissionRequest, admission: &admission::Admission, elapsed: Duration) {
    let (outcome, duration_us) = (admission.outcome.as_str(), elapsed.as_micros() as u64);
    let warnings = || clip(&admission.verdict.warnings.join("; "), MAX_LOGGED_WARNINGS).to_string();
    macro_rules! line {
        ($level:ident, $($field:tt)*) => {
            tracing::$level!(
                uid = %clip(&req.uid, MAX_LOGGED_FIELD),
                kind = %clip(&req.kind.kind, MAX_LOGGED_FIELD),
                namespace = %clip(&req.namespace, MAX_LOGGED_FIELD),
                name = %clip(&req.name, MAX_LOGGED_FIELD),
                operation = %clip(&req.operation, MAX_LOGGED_FIELD),
                dry_run = req.dry_run,
                outcome,
                duration_us,
                $($field)*
            )
        };
    }
    match admission.outcome {
        Outcome::Failed(cause) | Outcome::Denied(cause) => {
            line!(warn, cause = cause.as_str(), warnings = %warnings(), "admitted")
        }
        Outcome::Mutated => line!(info, warnings = %warnings(), "admitted"),
        Outcome::Ignored | Outcome::Unchanged => line!(debug, "admitted"),
    }
}

/// Longest request field (uid, kind, name, ...) and warnings text on a log line.
const MAX_LOGGED_FIELD: usize = 256;
const MAX_LOGGED_WARNINGS: usize = 2048;

/// `text` cut to at most `max` characters.
fn clip(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}
