//! The cluster to make ahead of demand (pure): built from a stored job of the config
//! exactly as the provisioner builds one for a job ([`cluster_for_job`]), only for
//! another place of the pool. So a cluster made ahead is held to the same rule as any
//! other: made only under the name its spec hashes to, from a job the API server stored
//! (a finished RayJob will do: Flyte keeps them `ttlSecondsAfterFinished`, an hour by
//! default), or from the [`template`] cut from one, never from a review's word.

use serde_json::{Value, json};

use crate::config::SharedClusters;
use crate::domain::labels;
use crate::domain::shared_cluster::{Refusal, cluster_for_job, member_name, pool_place};

/// What of a stored job a member is built from (its namespace, labels, annotations, the
/// cluster spec among them, and its selector), so the tracker keeps no entrypoint, runtime
/// env, submitter or status of a job long gone. `cluster_ahead` of a template is
/// `cluster_ahead` of its job.
pub fn template(job: &Value) -> Value {
    let meta = &job["metadata"];
    json!({
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": meta["labels"],
            "annotations": meta["annotations"],
        },
        "spec": {"clusterSelector": job["spec"]["clusterSelector"]},
    })
}

/// The cluster for `place` of the pool `job` selects a member of.
pub fn cluster_ahead(job: &Value, place: u32, cfg: &SharedClusters) -> Result<Value, Refusal> {
    let selector = labels::selected_cluster(job).ok_or(Refusal::NoSelector)?;
    let (base, _) = pool_place(selector).ok_or(Refusal::NoSelector)?;
    let mut for_place = job.clone();
    for_place["spec"]["clusterSelector"] = json!({ labels::RAY_CLUSTER: member_name(base, place) });
    cluster_for_job(&for_place, cfg)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::shared_cluster::{Admitter, Plan, plan};

    /// A job as Flyte sends it, rewritten onto place 1 of its pool and stored.
    fn stored() -> Value {
        let job = json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "j", "namespace": "ns"},
            "spec": {"entrypoint": "python x.py", "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                    {"name": "ray-head", "image": "rayproject/ray:2.40.0"}]}}}}},
        });
        let by = Admitter {
            instance: "rayshare",
            request_uid: "uid-1",
        };
        let cfg = SharedClusters::default();
        let Ok(Plan::Rewrite(r)) = plan(&job, "ns", &cfg, "rayshare.io/skip", by) else {
            panic!("rewritten");
        };
        let mut stored = r.into_member(1).job;
        stored["metadata"]["namespace"] = json!("ns");
        stored
    }

    #[test]
    fn a_place_is_made_as_a_job_would_have_it_made() {
        let job = stored();
        let cfg = SharedClusters::default();
        let own = cluster_for_job(&job, &cfg).unwrap();
        let ahead = cluster_ahead(&job, 3, &cfg).unwrap();
        let base = pool_place(own["metadata"]["name"].as_str().unwrap())
            .unwrap()
            .0;
        assert_eq!(ahead["metadata"]["name"], member_name(base, 3));
        assert_eq!(ahead["spec"], own["spec"]);
        assert_eq!(ahead["metadata"]["labels"], own["metadata"]["labels"]);
    }

    #[test]
    fn a_template_makes_what_its_job_makes_and_keeps_no_more() {
        let mut job = stored();
        job["status"] = json!({"jobDeploymentStatus": "Complete"});
        let cfg = SharedClusters::default();
        let t = template(&job);
        for place in [0, 2] {
            assert_eq!(
                cluster_ahead(&t, place, &cfg).unwrap(),
                cluster_ahead(&job, place, &cfg).unwrap()
            );
        }
        assert_eq!(t["spec"].as_object().unwrap().len(), 1, "{t}");
        assert!(t.get("status").is_none());
    }

    #[test]
    fn a_job_whose_spec_does_not_hash_to_its_pool_makes_nothing() {
        let mut job = stored();
        let spec = labels::get(&job, labels::Meta::Annotations, labels::CLUSTER_SPEC).unwrap();
        let forged = spec.replace("2.40.0", "2.41.0");
        labels::set(
            &mut job,
            labels::Meta::Annotations,
            labels::CLUSTER_SPEC,
            &forged,
        );
        let cfg = SharedClusters::default();
        assert!(matches!(
            cluster_ahead(&job, 0, &cfg),
            Err(Refusal::Mismatch { .. })
        ));
        job["spec"]["clusterSelector"] = json!({});
        assert!(matches!(
            cluster_ahead(&job, 0, &cfg),
            Err(Refusal::NoSelector)
        ));
    }
}
