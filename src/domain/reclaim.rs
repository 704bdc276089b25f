//! When a shared cluster may be deleted (pure). The reconciler in `reconcile/clusters.rs`
//! carries the decisions out.
//!
//! The hand-off with admission: the webhook stamps a cluster's `last-admitted` annotation
//! whenever the stamp is older than a quarter of the TTL, and the reconciler deletes only
//! with a `resourceVersion` precondition from the read that found it idle. A job admitted
//! onto a cluster while it is judged idle either changes the resourceVersion (the delete
//! fails) or finds the cluster gone or terminating (the webhook recreates it, or passes the
//! job unchanged). No job ends up selecting a deleted cluster.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

pub const LAST_ADMITTED: &str = "rayshare.io/last-admitted";

/// KubeRay job deployment states after which a job no longer needs its cluster.
const TERMINAL: [&str; 3] = ["Complete", "Failed", "ValidationFailed"];

pub fn is_terminal(job: &Value) -> bool {
    let state = job["status"]["jobDeploymentStatus"].as_str().unwrap_or("");
    TERMINAL.contains(&state) || job["metadata"]["deletionTimestamp"].is_string()
}

pub fn parse_time(v: &Value) -> Option<Timestamp> {
    v.as_str()?.parse().ok()
}

/// The effective TTL of a cluster: its annotation (the longest a job asked for) or the default.
pub fn ttl(annotation: Option<&str>, default_seconds: u64) -> Duration {
    let seconds = annotation.and_then(|v| v.parse::<u64>().ok());
    Duration::from_secs(seconds.unwrap_or(default_seconds).max(1))
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Busy { active_jobs: usize },
    Idle { remaining: Duration },
    Reclaim { idle_for: Duration },
}

impl Decision {
    pub fn state(&self) -> &'static str {
        match self {
            Self::Busy { .. } => "busy",
            Self::Idle { .. } => "idle",
            Self::Reclaim { .. } => "expired",
        }
    }
}

fn since(now: Timestamp, then: Timestamp) -> Duration {
    now.duration_since(then).try_into().unwrap_or_default()
}

/// `idle_since` is the latest of: creation, last admission stamp, last job end.
pub fn decide(
    active_jobs: usize,
    idle_since: Timestamp,
    ttl: Duration,
    now: Timestamp,
) -> Decision {
    if active_jobs > 0 {
        return Decision::Busy { active_jobs };
    }
    let idle_for = since(now, idle_since);
    if idle_for > ttl {
        Decision::Reclaim { idle_for }
    } else {
        Decision::Idle {
            remaining: ttl - idle_for,
        }
    }
}

/// Whether admission should refresh a cluster's `last-admitted` stamp: when it is older
/// than a quarter of the TTL, so a cluster judged idle (older than the whole TTL) always
/// gets a fresh stamp, and a changed resourceVersion, from any job admitted onto it.
pub fn stamp_due(reference: Option<Timestamp>, ttl: Duration, now: Timestamp) -> bool {
    reference.is_none_or(|r| since(now, r) > ttl / 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[rstest]
    #[case::busy(2, "2026-01-01T00:00:00Z", 60, "2026-01-01T10:00:00Z", "busy")]
    #[case::fresh(0, "2026-01-01T00:00:00Z", 60, "2026-01-01T00:00:30Z", "idle")]
    #[case::expired(0, "2026-01-01T00:00:00Z", 60, "2026-01-01T00:01:01Z", "expired")]
    #[case::clock_behind(0, "2026-01-01T00:05:00Z", 60, "2026-01-01T00:00:00Z", "idle")]
    fn decisions(
        #[case] jobs: usize,
        #[case] since: &str,
        #[case] ttl: u64,
        #[case] now: &str,
        #[case] state: &str,
    ) {
        assert_eq!(
            decide(jobs, t(since), Duration::from_secs(ttl), t(now)).state(),
            state
        );
    }

    #[rstest]
    #[case(json!({"status": {"jobDeploymentStatus": "Complete"}}), true)]
    #[case(json!({"status": {"jobDeploymentStatus": "Failed"}}), true)]
    #[case(json!({"status": {"jobDeploymentStatus": "Running"}}), false)]
    #[case(json!({"status": {}}), false)]
    #[case(json!({}), false)]
    #[case(json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}), true)]
    fn terminal_jobs(#[case] job: Value, #[case] terminal: bool) {
        assert_eq!(is_terminal(&job), terminal);
    }

    #[test]
    fn ttl_annotation_overrides_default() {
        assert_eq!(ttl(Some("7200"), 60), Duration::from_secs(7200));
        assert_eq!(ttl(Some("junk"), 60), Duration::from_secs(60));
        assert_eq!(ttl(None, 60), Duration::from_secs(60));
    }

    #[test]
    fn stamps_refresh_after_a_quarter_of_the_ttl() {
        let ttl = Duration::from_secs(400);
        let now = t("2026-01-01T00:10:00Z");
        assert!(stamp_due(None, ttl, now));
        assert!(!stamp_due(Some(t("2026-01-01T00:09:00Z")), ttl, now));
        assert!(stamp_due(Some(t("2026-01-01T00:08:00Z")), ttl, now));
    }
}
