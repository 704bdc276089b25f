//! Kubernetes timestamps in objects (pure).

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

/// An RFC 3339 timestamp field (`metadata.creationTimestamp`, `status.endTime`).
pub fn parse_time(v: &Value) -> Option<Timestamp> {
    v.as_str()?.parse().ok()
}
