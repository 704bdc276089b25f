//! Kubernetes timestamps in objects (pure).

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

/// An RFC 3339 timestamp field (`metadata.creationTimestamp`, `status.endTime`).
pub fn parse_time(v: &Value) -> Option<Timestamp> {
    v.as_str()?.parse().ok()
}

/// Time from `then` to `now` (zero if `then` is later).
pub fn elapsed(now: Timestamp, then: Timestamp) -> std::time::Duration {
    now.duration_since(then).try_into().unwrap_or_default()
}

/// Age of an object at `now`, from its creationTimestamp (zero when unknown).
pub fn age(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    now: Timestamp,
) -> std::time::Duration {
    meta.creation_timestamp
        .as_ref()
        .map_or(std::time::Duration::ZERO, |t| elapsed(now, t.0))
}
