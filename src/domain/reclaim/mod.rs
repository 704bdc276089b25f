//! When a shared cluster may be deleted (pure; a whole pass in [`sweep`], the labels a
//! kept cluster shows in [`pool`]). The reclaimer (`reconcile/reclaim.rs`) carries the
//! decisions out; the cluster maker (`reconcile/make_clusters.rs`) writes the stamps.
//!
//! The hand-off: the reclaimer first marks an idle cluster ([`MARKED`], conditioned on the
//! resourceVersion it judged), waits the quiet period, and deletes it only if it is still
//! idle, conditioned on the resourceVersion of that second look. Admission never sends a
//! job to a marked cluster, so the only jobs that can still arrive are those admitted
//! before the mark reached its cache: they are stored within the quiet period, and the
//! provisioner lifts the mark for them (changing the resourceVersion, so the deletion
//! fails). Should a job still end up selecting a deleted cluster, the provisioner makes the
//! cluster again from the spec the job carries: no job is stranded.

pub mod pool;

use std::time::Duration;

use crate::domain::labels::Meta;
use crate::domain::time::elapsed;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::domain::labels::{LAST_ACTIVE, LAST_ADMITTED, RECLAIM_MARKED as MARKED};

/// KubeRay job deployment states after which a job no longer needs its cluster.
const TERMINAL: [&str; 3] = ["Complete", "Failed", "ValidationFailed"];

pub fn is_terminal(job: &Value) -> bool {
    let state = job["status"]["jobDeploymentStatus"].as_str().unwrap_or("");
    TERMINAL.contains(&state) || job["metadata"]["deletionTimestamp"].is_string()
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
    let idle_for = elapsed(now, idle_since);
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
    reference.is_none_or(|r| elapsed(now, r) > ttl / 4)
}

/// What the reclaimer does with a cluster next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Keep,
    /// Idle past its TTL: mark it, so admission and the provisioner can still save it.
    Mark,
    /// Marked, but no longer idle: take the mark off.
    Unmark,
    /// Marked for the whole quiet period and still idle: delete it.
    Delete,
}

/// The reclaim hand-off: a cluster is deleted only after it has carried the mark for
/// `quiet` (longer than an admission takes to be stored), so a job admitted onto it
/// in the meantime is seen stored first (the provisioner then lifts the mark, which also
/// changes the resourceVersion the deletion is conditioned on).
pub fn step(
    decision: &Decision,
    marked: Option<Timestamp>,
    quiet: Duration,
    now: Timestamp,
) -> Step {
    match (decision, marked) {
        (Decision::Reclaim { .. }, None) => Step::Mark,
        (Decision::Reclaim { .. }, Some(at)) if elapsed(now, at) >= quiet => Step::Delete,
        (Decision::Reclaim { .. }, Some(_)) => Step::Keep,
        (_, Some(_)) => Step::Unmark,
        (_, None) => Step::Keep,
    }
}

/// The TTL a job asks for with `annotation`, capped at `max`.
pub fn job_ttl(job: &Value, annotation: &str, max: u64) -> Option<u64> {
    let asked = crate::domain::labels::get(job, Meta::Annotations, annotation)?;
    asked.parse::<u64>().ok().map(|t| t.min(max))
}

/// The annotations the provisioner writes on a live shared cluster that stored, active
/// jobs use: a fresher last-admitted stamp (the newest job's creation), a longer TTL a
/// job asks for, and no reclaim mark. `None`: nothing to write.
pub fn refresh(
    cluster: &crate::domain::cluster::ClusterInfo,
    newest_job: Timestamp,
    wanted_ttl: Option<u64>,
    default_ttl: u64,
) -> Option<Value> {
    let ttl = ttl(cluster.idle_ttl.as_deref(), default_ttl);
    let reference = cluster.last_admitted.max(cluster.created);
    let marked = cluster.marked.is_some();
    let longer = wanted_ttl.filter(|t| Duration::from_secs(*t) > ttl);
    let stamp = marked || stamp_due(reference, ttl, newest_job);
    if !stamp && longer.is_none() {
        return None;
    }
    let mut annotations = serde_json::Map::new();
    if stamp {
        annotations.insert(LAST_ADMITTED.into(), newest_job.to_string().into());
    }
    if let Some(t) = longer {
        annotations.insert(crate::domain::labels::IDLE_TTL.into(), t.to_string().into());
    }
    if marked {
        annotations.insert(MARKED.into(), Value::Null);
    }
    Some(serde_json::json!({ "metadata": { "annotations": annotations } }))
}

/// The stamp for a live shared cluster whose last active job ended or went at `at`.
/// `None`: not rayshare's, going anyway, or stamped as late already.
pub fn went_idle(cluster: &crate::domain::cluster::ClusterInfo, at: Timestamp) -> Option<Value> {
    if !cluster.managed_by_rayshare || cluster.deleting || cluster.last_active >= Some(at) {
        return None;
    }
    let annotations = serde_json::json!({ LAST_ACTIVE: at.to_string() });
    Some(serde_json::json!({ "metadata": { "annotations": annotations } }))
}

/// When a cluster's idle time starts: the latest of its creation, the last admission onto
/// it, the end of its last active job (stamped, for jobs deleted since) and the latest end
/// among its stored jobs.
pub fn idle_since(
    cluster: &crate::domain::cluster::ClusterInfo,
    last_job_end: Option<Timestamp>,
) -> Option<Timestamp> {
    [
        cluster.created,
        cluster.last_admitted,
        cluster.last_active,
        last_job_end,
    ]
    .into_iter()
    .flatten()
    .max()
}

pub mod head;
pub mod sweep;

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

    fn shared(last_active: Option<&str>) -> crate::domain::cluster::ClusterInfo {
        crate::domain::cluster::ClusterInfo {
            managed_by_rayshare: true,
            created: Some(t("2026-01-01T00:00:00Z")),
            last_admitted: Some(t("2026-01-01T00:10:00Z")),
            last_active: last_active.map(t),
            ..Default::default()
        }
    }

    #[test]
    fn the_idle_clock_starts_when_the_last_job_went() {
        // A 45-minute job, cancelled (deleted: no end time left) with a 30-minute TTL.
        let went = t("2026-01-01T00:55:00Z");
        let patch = went_idle(&shared(None), went).expect("stamped");
        assert_eq!(
            patch["metadata"]["annotations"][LAST_ACTIVE],
            "2026-01-01T00:55:00Z"
        );
        let stamped = shared(Some("2026-01-01T00:55:00Z"));
        let since = idle_since(&stamped, None).unwrap();
        let ttl = Duration::from_secs(1800);
        assert_eq!(
            decide(0, since, ttl, t("2026-01-01T01:00:00Z")).state(),
            "idle"
        );
        assert_eq!(
            decide(0, since, ttl, t("2026-01-01T01:25:01Z")).state(),
            "expired"
        );
        // Without the stamp the cluster would have counted as idle since the admission.
        let unstamped = idle_since(&shared(None), None).unwrap();
        assert_eq!(
            decide(0, unstamped, ttl, t("2026-01-01T01:00:00Z")).state(),
            "expired"
        );
        // A later stored job end still counts.
        let end = t("2026-01-01T01:00:00Z");
        assert_eq!(idle_since(&stamped, Some(end)), Some(end));
    }

    #[rstest]
    #[case::not_ours(false, false, None, false)]
    #[case::deleting(true, true, None, false)]
    #[case::stamped_later(true, false, Some("2026-01-01T01:00:00Z"), false)]
    #[case::stamped_earlier(true, false, Some("2026-01-01T00:20:00Z"), true)]
    fn who_gets_the_last_active_stamp(
        #[case] ours: bool,
        #[case] deleting: bool,
        #[case] last_active: Option<&str>,
        #[case] stamped: bool,
    ) {
        let cluster = crate::domain::cluster::ClusterInfo {
            managed_by_rayshare: ours,
            deleting,
            ..shared(last_active)
        };
        let at = t("2026-01-01T00:55:00Z");
        assert_eq!(went_idle(&cluster, at).is_some(), stamped);
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

    #[rstest]
    #[case::busy_unmarked(Decision::Busy { active_jobs: 1 }, None, Step::Keep)]
    #[case::idle_unmarked(Decision::Idle { remaining: Duration::from_secs(5) }, None, Step::Keep)]
    #[case::expired_unmarked(Decision::Reclaim { idle_for: Duration::ZERO }, None, Step::Mark)]
    #[case::expired_marked_just_now(Decision::Reclaim { idle_for: Duration::ZERO }, Some("2026-01-01T00:00:20Z"), Step::Keep)]
    #[case::expired_marked_long_ago(Decision::Reclaim { idle_for: Duration::ZERO }, Some("2026-01-01T00:00:00Z"), Step::Delete)]
    #[case::busy_marked(Decision::Busy { active_jobs: 1 }, Some("2026-01-01T00:00:00Z"), Step::Unmark)]
    #[case::idle_again_marked(Decision::Idle { remaining: Duration::from_secs(5) }, Some("2026-01-01T00:00:00Z"), Step::Unmark)]
    fn reclaim_steps(#[case] decision: Decision, #[case] marked: Option<&str>, #[case] want: Step) {
        let now = t("2026-01-01T00:00:30Z");
        let quiet = Duration::from_secs(30);
        assert_eq!(step(&decision, marked.map(t), quiet, now), want);
    }

    fn info(
        created: &str,
        stamp: Option<&str>,
        ttl: Option<&str>,
        marked: bool,
    ) -> crate::domain::cluster::ClusterInfo {
        crate::domain::cluster::ClusterInfo {
            created: Some(t(created)),
            last_admitted: stamp.map(t),
            idle_ttl: ttl.map(Into::into),
            marked: marked.then(|| t(created)),
            ..Default::default()
        }
    }

    #[rstest]
    // TTL 400 s: a stamp is due once the newest job is 100 s newer than the reference.
    #[case::fresh_cluster(
        info("2026-01-01T00:00:00Z", None, Some("400"), false),
        "2026-01-01T00:01:00Z",
        None,
        None
    )]
    #[case::stamp_due(info("2026-01-01T00:00:00Z", None, Some("400"), false), "2026-01-01T00:02:00Z", None, Some(json!({"rayshare.io/last-admitted": "2026-01-01T00:02:00Z"})))]
    #[case::recent_stamp(
        info(
            "2026-01-01T00:00:00Z",
            Some("2026-01-01T00:01:30Z"),
            Some("400"),
            false
        ),
        "2026-01-01T00:02:00Z",
        None,
        None
    )]
    #[case::longer_ttl(info("2026-01-01T00:00:00Z", None, Some("400"), false), "2026-01-01T00:01:00Z", Some(900), Some(json!({"rayshare.io/idle-ttl-seconds": "900"})))]
    #[case::shorter_ttl(
        info("2026-01-01T00:00:00Z", None, Some("400"), false),
        "2026-01-01T00:01:00Z",
        Some(100),
        None
    )]
    #[case::marked(info("2026-01-01T00:00:00Z", None, Some("400"), true), "2026-01-01T00:00:10Z", None, Some(json!({"rayshare.io/last-admitted": "2026-01-01T00:00:10Z", "rayshare.io/reclaim-marked-at": null})))]
    fn refreshes(
        #[case] cluster: crate::domain::cluster::ClusterInfo,
        #[case] newest: &str,
        #[case] wanted: Option<u64>,
        #[case] want: Option<Value>,
    ) {
        let got = refresh(&cluster, t(newest), wanted, 60);
        assert_eq!(
            got,
            want.map(|a| json!({ "metadata": { "annotations": a } }))
        );
    }

    #[rstest]
    #[case::none(json!({}), None)]
    #[case::asked(json!({"metadata": {"annotations": {"ttl": "120"}}}), Some(120))]
    #[case::capped(json!({"metadata": {"annotations": {"ttl": "99999"}}}), Some(3600))]
    #[case::junk(json!({"metadata": {"annotations": {"ttl": "soon"}}}), None)]
    fn job_ttls(#[case] job: Value, #[case] want: Option<u64>) {
        assert_eq!(job_ttl(&job, "ttl", 3600), want);
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
