//! What the policy is fed, read from the objects the caches hold (pure), so the controller
//! that will carry warm-ahead out only lists and writes: a task's arrival from its
//! rewritten RayJob, and a pool member's state from its RayCluster and its active jobs.

use serde_json::Value;

use super::{ConfigKey, Member, State};
use crate::domain::labels;
use crate::domain::shared_cluster::pool_place;
use crate::domain::time::parse_time;

/// A rewritten RayJob as an arrival: its config (namespace, the pool's base name: the
/// config's hash) and its creation (ms since the epoch). `None`: not a job rayshare sent
/// to a shared cluster.
pub fn arrival(job: &Value) -> Option<(ConfigKey, i64)> {
    let namespace = job["metadata"]["namespace"].as_str()?;
    let (base, _) = pool_place(labels::selected_cluster(job)?)?;
    let created = parse_time(&job["metadata"]["creationTimestamp"])?;
    Some(((namespace.into(), base.into()), created.as_millisecond()))
}

/// A shared cluster as a member of its pool, given its active jobs. `None`: not a pool
/// member's name.
pub fn member(cluster: &Value, active_jobs: u32) -> Option<Member> {
    let meta = &cluster["metadata"];
    let name = meta["name"].as_str()?;
    let (_, index) = pool_place(name)?;
    let going = meta["deletionTimestamp"].is_string()
        || labels::get(cluster, labels::Meta::Annotations, labels::RECLAIM_MARKED).is_some();
    let state = match (going, active_jobs, cluster["status"]["state"] == "ready") {
        (true, _, _) => State::Going,
        (_, 0, true) => State::Idle,
        (_, 0, false) => State::Warming,
        (_, jobs, _) => State::Busy { jobs },
    };
    Some(Member {
        index,
        name: name.into(),
        state,
    })
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_rewritten_job_is_an_arrival_of_its_pools_config() {
        let job = json!({
            "metadata": {"namespace": "team", "creationTimestamp": "2026-11-28T12:00:00Z"},
            "spec": {"clusterSelector": {labels::RAY_CLUSTER: "ray-abc-3"}},
        });
        let ((ns, config), at) = arrival(&job).unwrap();
        assert_eq!((ns.as_str(), config.as_str()), ("team", "ray-abc"));
        assert_eq!(at, 1_795_867_200_000);
        let embedded = json!({"metadata": job["metadata"], "spec": {"rayClusterSpec": {}}});
        assert_eq!(arrival(&embedded), None);
    }

    #[rstest]
    #[case::busy(json!({"state": "ready"}), json!({}), 2, State::Busy { jobs: 2 })]
    #[case::idle(json!({"state": "ready"}), json!({}), 0, State::Idle)]
    #[case::warming(json!({}), json!({}), 0, State::Warming)]
    #[case::marked(json!({"state": "ready"}), json!({labels::RECLAIM_MARKED: "2026-11-28T12:00:00Z"}), 0, State::Going)]
    fn a_cluster_is_a_member(
        #[case] status: Value,
        #[case] annotations: Value,
        #[case] jobs: u32,
        #[case] want: State,
    ) {
        let cluster = json!({
            "metadata": {"name": "ray-abc-1", "annotations": annotations},
            "status": status,
        });
        let m = member(&cluster, jobs).unwrap();
        assert_eq!((m.index, m.name.as_str(), m.state), (1, "ray-abc-1", want));
        let deleting =
            json!({"metadata": {"name": "ray-abc", "deletionTimestamp": "2026-11-28T12:00:00Z"}});
        assert_eq!(member(&deleting, 0).unwrap().state, State::Going);
        assert_eq!(member(&json!({"metadata": {"name": "mine"}}), 0), None);
    }
}
