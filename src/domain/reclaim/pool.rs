//! The pool at a glance: labels on each shared cluster, so that
//! `kubectl get rayclusters -l rayshare.io/shared-cluster -L rayshare.io/config-digest,rayshare.io/active-jobs,rayshare.io/last-admission,rayshare.io/reclaimable-at,rayshare.io/kept-warm`
//! shows what rayshare knows of it (pure; the reclaimer writes them on each pass).

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use crate::domain::reclaim::Decision;

use crate::domain::labels::{
    POOL_ACTIVE_JOBS as ACTIVE_JOBS, POOL_DIGEST as DIGEST, POOL_LAST_ADMISSION as LAST_ADMISSION,
    POOL_RECLAIMABLE_AT as RECLAIMABLE_AT,
};

/// The `kubectl get -L` flag that shows them.
pub const COLUMNS: &str = "rayshare.io/config-digest,rayshare.io/active-jobs,rayshare.io/last-admission,rayshare.io/reclaimable-at,rayshare.io/kept-warm";

/// Characters of the config digest shown (a label value holds 63; 16 hex identify a config).
pub const DIGEST_CHARS: usize = 16;

/// A time as a label value: `2026-11-24T18.57.25Z` (labels allow no `:`).
pub fn label_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H.%M.%SZ").to_string()
}

/// The labels a shared cluster should carry (`None`: absent), from its config digest,
/// its active jobs, its last admission and the reclaimer's decision.
pub fn labels(
    digest: Option<&str>,
    active: usize,
    last_admitted: Option<Timestamp>,
    decision: &Decision,
    now: Timestamp,
) -> BTreeMap<&'static str, Option<String>> {
    let reclaimable = match decision {
        Decision::Busy { .. } => None,
        Decision::Idle { remaining } => now.checked_add(*remaining).ok().map(label_time),
        Decision::Reclaim { .. } => Some(label_time(now)),
    };
    BTreeMap::from([
        (
            DIGEST,
            digest.map(|d| d.chars().take(DIGEST_CHARS).collect()),
        ),
        (ACTIVE_JOBS, Some(active.to_string())),
        (LAST_ADMISSION, last_admitted.map(label_time)),
        (RECLAIMABLE_AT, reclaimable),
    ])
}

/// The labels of `desired` that `current` does not already have (a merge patch's
/// `metadata.labels`; `null` removes), or `None` when they agree.
pub fn label_patch(
    current: &BTreeMap<String, String>,
    desired: &BTreeMap<&'static str, Option<String>>,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    let patch: serde_json::Map<_, _> = desired
        .iter()
        .filter(|(k, v)| current.get(**k) != v.as_ref())
        .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
        .collect();
    (!patch.is_empty()).then_some(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_columns_are_the_pool_labels() {
        let keys = [DIGEST, ACTIVE_JOBS, LAST_ADMISSION, RECLAIMABLE_AT];
        // And warm-ahead's word for why a member is kept (`reconcile::warm_ahead`).
        let warm = crate::domain::labels::KEPT_WARM;
        assert_eq!(COLUMNS, format!("{},{warm}", keys.join(",")));
    }

    #[test]
    fn idle_clusters_say_when_they_go() {
        let now = t("2026-11-24T18:00:00Z");
        let idle = Decision::Idle {
            remaining: Duration::from_secs(90),
        };
        let l = labels(
            Some(&"ab".repeat(32)),
            0,
            Some(t("2026-11-24T17:59:00Z")),
            &idle,
            now,
        );
        assert_eq!(l[DIGEST].as_deref(), Some("abababababababab"));
        assert_eq!(l[ACTIVE_JOBS].as_deref(), Some("0"));
        assert_eq!(l[LAST_ADMISSION].as_deref(), Some("2026-11-24T17.59.00Z"));
        assert_eq!(l[RECLAIMABLE_AT].as_deref(), Some("2026-11-24T18.01.30Z"));
        for v in l.values().flatten() {
            assert!(crate::domain::labels::is_label_value(v), "{v}");
        }
    }

    #[test]
    fn busy_clusters_are_not_reclaimable_and_patches_are_minimal() {
        let now = t("2026-11-24T18:00:00Z");
        let busy = labels(None, 3, None, &Decision::Busy { active_jobs: 3 }, now);
        assert_eq!(busy[RECLAIMABLE_AT], None);
        let mut current = BTreeMap::from([
            (ACTIVE_JOBS.to_string(), "3".to_string()),
            (
                RECLAIMABLE_AT.to_string(),
                "2026-11-24T18.01.30Z".to_string(),
            ),
        ]);
        let patch = label_patch(&current, &busy).unwrap();
        assert_eq!(patch.len(), 1);
        assert_eq!(patch[RECLAIMABLE_AT], serde_json::Value::Null);
        current.remove(RECLAIMABLE_AT);
        assert_eq!(label_patch(&current, &busy), None);
    }
}
