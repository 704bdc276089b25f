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

/// The least an object's age at `now` can be: `creationTimestamp` is whole seconds (the
/// API server truncates), so the object may be up to a second younger than it looks. A
/// window an object must still be inside while it may be (an index claim in flight) is
/// judged by this, or a claim made a moment ago could look a second old.
pub fn least_age(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    now: Timestamp,
) -> std::time::Duration {
    age(meta, now).saturating_sub(std::time::Duration::from_secs(1))
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
