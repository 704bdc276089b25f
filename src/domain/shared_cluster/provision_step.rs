//! What the provisioner does for one shared cluster, from what its caches know (pure: the
//! reconciler carries it out). Unit-tested by feeding it jobs and clusters.

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::provision::{Refusal, cluster_for_job};
use crate::config::Config;
use crate::domain::cluster::ClusterInfo;
use crate::domain::labels;
use crate::domain::labels::Meta;
use crate::domain::reclaim;
use crate::domain::time::parse_time;

/// What the cluster's stored jobs and its cached state ask for.
#[derive(Debug, PartialEq)]
pub enum Step {
    Nothing,
    /// Merge these annotations into the cluster (idle clock, TTL, mark lifted).
    Stamp(Value),
    /// Create it, as the first job whose spec matches its selector has it made.
    Make {
        cluster: Value,
        first_job: String,
        /// Jobs passed over on the way, and why (each is told).
        refused: Vec<(Value, Refusal)>,
    },
    /// No job may have it made.
    Refused(Vec<(Value, Refusal)>),
}

/// The provisioner's inputs for one cluster.
pub struct Seen<'a> {
    /// Its stored, active jobs, oldest first.
    pub jobs: &'a [Value],
    /// The cluster as cached, if it is.
    pub cluster: Option<&'a ClusterInfo>,
    /// When its last active job ended or went, as the RayJob watch saw it.
    pub went_idle: Option<Timestamp>,
    /// This replica made it a moment ago (the cache does not show it yet).
    pub made_recently: bool,
}

pub fn step(seen: &Seen, config: &Config, now: Timestamp) -> Step {
    let Some(newest) = seen.jobs.iter().filter_map(created).max().or(
        // Jobs with no creation time still keep their cluster.
        (!seen.jobs.is_empty()).then_some(now),
    ) else {
        // No job left: the idle clock starts when the last one went.
        let stamp = seen
            .cluster
            .zip(seen.went_idle)
            .and_then(|(info, went)| reclaim::went_idle(info, went));
        return stamp.map_or(Step::Nothing, Step::Stamp);
    };
    let reclaim_cfg = &config.reclaim;
    let wanted_ttl = seen
        .jobs
        .iter()
        .filter_map(|j| {
            reclaim::job_ttl(
                j,
                &reclaim_cfg.ttl_annotation,
                reclaim_cfg.max_idle_ttl_seconds,
            )
        })
        .max();
    match seen.cluster {
        // Being deleted: its Delete event brings the provisioner back to make it again.
        Some(info) if info.deleting || !info.managed_by_rayshare => Step::Nothing,
        Some(info) => {
            let patch = reclaim::refresh(info, newest, wanted_ttl, reclaim_cfg.idle_ttl_seconds);
            patch.map_or(Step::Nothing, Step::Stamp)
        }
        None if seen.made_recently => Step::Nothing,
        None => make(seen.jobs, config, wanted_ttl),
    }
}

fn make(jobs: &[Value], config: &Config, wanted_ttl: Option<u64>) -> Step {
    let mut refused = Vec::new();
    for job in jobs {
        match cluster_for_job(job, &config.shared_clusters) {
            Ok(mut cluster) => {
                let ttl = wanted_ttl.unwrap_or(config.reclaim.idle_ttl_seconds);
                labels::set(
                    &mut cluster,
                    Meta::Annotations,
                    labels::IDLE_TTL,
                    &ttl.to_string(),
                );
                let first_job = job["metadata"]["name"].as_str().unwrap_or_default();
                return Step::Make {
                    cluster,
                    first_job: first_job.to_string(),
                    refused,
                };
            }
            Err(why) => refused.push((job.clone(), why)),
        }
    }
    Step::Refused(refused)
}

/// A job's creation time (the provisioner looks at a cluster's jobs oldest first).
pub fn created(job: &Value) -> Option<Timestamp> {
    parse_time(&job["metadata"]["creationTimestamp"])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::shared_cluster::{Admitter, Plan, plan};

    fn config() -> Config {
        Config::default()
    }

    /// A stored job as admission rewrote it, created at `created`.
    fn job(name: &str, created: &str) -> Value {
        let sample: Value =
            serde_norway::from_str(include_str!("../../../deploy/samples/rayjob-run-a.yaml"))
                .unwrap();
        let by = Admitter {
            instance: "rayshare",
            request_uid: "00000000-0000-0000-0000-000000000001",
        };
        let Ok(Plan::Rewrite(r)) = plan(&sample, "ns", &config().shared_clusters, "x", by) else {
            panic!("not rewritten");
        };
        let mut job = r.job;
        job["metadata"]["name"] = json!(name);
        job["metadata"]["namespace"] = json!("ns");
        job["metadata"]["creationTimestamp"] = json!(created);
        job
    }

    fn info(overlay: Value) -> ClusterInfo {
        let mut cluster = json!({"metadata": {"name": "c", "uid": "u",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app.kubernetes.io/managed-by": "rayshare"},
            "annotations": {"rayshare.io/last-admitted": "2026-01-01T00:10:00Z"}}});
        json_patch::merge(&mut cluster, &overlay);
        ClusterInfo::from_value(&cluster)
    }

    fn at(t: &str) -> Timestamp {
        t.parse().unwrap()
    }

    fn run(
        jobs: &[Value],
        cluster: Option<&ClusterInfo>,
        went_idle: Option<&str>,
        made: bool,
    ) -> Step {
        let seen = Seen {
            jobs,
            cluster,
            went_idle: went_idle.map(at),
            made_recently: made,
        };
        step(&seen, &config(), at("2026-01-01T01:00:00Z"))
    }

    #[test]
    fn a_missing_cluster_is_made_from_its_first_job_with_the_ttl() {
        let jobs = [job("a", "2026-01-01T00:00:00Z")];
        let Step::Make {
            cluster,
            first_job,
            refused,
        } = run(&jobs, None, None, false)
        else {
            panic!("not made");
        };
        assert_eq!(first_job, "a");
        assert!(refused.is_empty());
        let ttl = config().reclaim.idle_ttl_seconds.to_string();
        assert_eq!(
            cluster["metadata"]["annotations"]["rayshare.io/idle-ttl-seconds"],
            json!(ttl)
        );
        assert_eq!(
            cluster["metadata"]["name"],
            jobs[0]["spec"]["clusterSelector"]["ray.io/cluster"]
        );
    }

    #[test]
    fn a_cluster_made_a_moment_ago_is_not_made_again() {
        let jobs = [job("a", "2026-01-01T00:00:00Z")];
        assert_eq!(run(&jobs, None, None, true), Step::Nothing);
    }

    #[test]
    fn an_edited_job_is_passed_over_and_told() {
        let mut edited = job("edited", "2026-01-01T00:00:00Z");
        edited["metadata"]["annotations"]["rayshare.io/cluster-spec"] = json!("[]");
        let good = job("good", "2026-01-01T00:01:00Z");
        let Step::Make {
            first_job, refused, ..
        } = run(&[edited.clone(), good], None, None, false)
        else {
            panic!("not made");
        };
        assert_eq!(first_job, "good");
        assert_eq!(refused.len(), 1);
        assert!(matches!(refused[0].1, Refusal::BadSpec(_)));
        assert!(matches!(
            run(&[edited], None, None, false),
            Step::Refused(r) if r.len() == 1
        ));
    }

    #[test]
    fn a_cluster_being_deleted_or_not_ours_is_left() {
        let jobs = [job("a", "2026-01-01T00:30:00Z")];
        let deleting = info(json!({"metadata": {"deletionTimestamp": "2026-01-01T00:59:00Z"}}));
        assert_eq!(run(&jobs, Some(&deleting), None, false), Step::Nothing);
        let theirs = info(json!({"metadata": {"labels": {"app.kubernetes.io/managed-by": "x"}}}));
        assert_eq!(run(&jobs, Some(&theirs), None, false), Step::Nothing);
    }

    #[test]
    fn a_marked_cluster_with_jobs_is_unmarked() {
        let jobs = [job("a", "2026-01-01T00:30:00Z")];
        let marked = info(json!({"metadata": {"annotations": {
            "rayshare.io/reclaim-marked-at": "2026-01-01T00:50:00Z"}}}));
        let Step::Stamp(patch) = run(&jobs, Some(&marked), None, false) else {
            panic!("not stamped");
        };
        let annotations = patch["metadata"]["annotations"].as_object().unwrap();
        // Merge-patch null: the mark is removed.
        assert_eq!(
            annotations.get("rayshare.io/reclaim-marked-at"),
            Some(&Value::Null),
            "{patch}"
        );
    }

    #[test]
    fn no_job_left_starts_the_idle_clock_once() {
        let cluster = info(json!({}));
        let Step::Stamp(patch) = run(&[], Some(&cluster), Some("2026-01-01T00:40:00Z"), false)
        else {
            panic!("not stamped");
        };
        assert_eq!(
            patch["metadata"]["annotations"]["rayshare.io/last-active"],
            "2026-01-01T00:40:00Z"
        );
        let stamped = info(json!({"metadata": {"annotations": {
            "rayshare.io/last-active": "2026-01-01T00:40:00Z"}}}));
        let again = run(&[], Some(&stamped), Some("2026-01-01T00:40:00Z"), false);
        assert_eq!(again, Step::Nothing);
        assert_eq!(
            run(&[], None, Some("2026-01-01T00:40:00Z"), false),
            Step::Nothing
        );
    }
}
