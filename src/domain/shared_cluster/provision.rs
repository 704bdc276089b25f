//! Which shared cluster a persisted RayJob may have made for it (pure).
//!
//! Admission makes no API writes: it leaves the stripped cluster spec on the rewritten
//! job ([`SPEC`]) and the provisioner creates the cluster once it sees the job *stored*,
//! so a forged admission review creates nothing. The spec on a stored job is only as
//! trustworthy as whoever may write RayJobs there, so the cluster is made only under the
//! name the spec hashes to: a job whose selector and spec disagree (edited after
//! admission, or made by hand) can never point rayshare at a cluster of another config.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::copied::Copied;
use super::identity;
use crate::config::SharedClusters;
use crate::domain::labels;
use crate::domain::labels::Meta;
use crate::domain::time::parse_time;

/// Most clusters one config may spread over (`maxJobsPerCluster`).
pub const MAX_POOL: u32 = 100;

/// Why a stored job does not get a cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("it carries no {} annotation", labels::CLUSTER_SPEC)]
    NoSpec,
    #[error("its {key} annotation is not a JSON object: {0}", key = labels::CLUSTER_SPEC)]
    BadSpec(String),
    #[error("it selects no cluster")]
    NoSelector,
    #[error("it selects {selector}, but its spec hashes to {expected} (edited after admission?)")]
    Mismatch { selector: String, expected: String },
}

/// The shared RayCluster `name` of the config `digest`.
pub fn cluster_object(
    name: &str,
    namespace: &str,
    spec: Value,
    copied: &Copied,
    digest: &str,
) -> Value {
    let mut cluster_labels = copied.labels.clone();
    let mut annotations = copied.annotations.clone();
    annotations.insert(labels::CONFIG_DIGEST.into(), json!(digest));
    cluster_labels.insert(labels::MANAGED_BY.into(), json!(labels::MANAGER));
    cluster_labels.insert(labels::SHARED_CLUSTER.into(), json!("true"));
    let mut cluster = json!({
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": cluster_labels,
            "annotations": annotations,
        },
    });
    // Moved in: `json!` would copy the whole spec through its serializer.
    cluster["spec"] = spec;
    // Kueue starts it once its queue admits it (its webhook would suspend it too; made
    // suspended, the cluster never starts outside the quota whatever order webhooks run in).
    if copied.queued() {
        cluster["spec"]["suspend"] = json!(true);
    }
    cluster
}

/// Member `index` of the pool of clusters named `base`.
pub fn member_name(base: &str, index: u32) -> String {
    match index {
        0 => base.to_string(),
        i => format!("{base}-{i}"),
    }
}

/// The pool a member named `name` belongs to and its place in it (`ray-x` is place 0 of
/// pool `ray-x`, `ray-x-2` place 2), if it is a member name at all.
pub fn pool_place(name: &str) -> Option<(&str, u32)> {
    let rest = name.strip_prefix(super::identity::NAME_PREFIX)?;
    let (hash, index) = match rest.split_once('-') {
        None => (rest, 0),
        Some((hash, i)) => (hash, i.parse().ok().filter(|i| (1..MAX_POOL).contains(i))?),
    };
    let base = &name[..super::identity::NAME_PREFIX.len() + hash.len()];
    (!hash.is_empty() && member_name(base, index) == name).then_some((base, index))
}

/// Whether `selector` names a member of the pool `base`.
fn is_member(selector: &str, base: &str) -> bool {
    match selector.strip_prefix(base) {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix('-')
            .and_then(|i| i.parse::<u32>().ok())
            .is_some_and(|i| (1..MAX_POOL).contains(&i) && member_name(base, i) == selector),
        None => false,
    }
}

/// The cluster a stored, rewritten job needs, rebuilt from what the job carries.
pub fn cluster_for_job(job: &Value, cfg: &SharedClusters) -> Result<Value, Refusal> {
    let text = labels::get(job, Meta::Annotations, labels::CLUSTER_SPEC).ok_or(Refusal::NoSpec)?;
    let spec: Value = serde_json::from_str(text).map_err(|e| Refusal::BadSpec(e.to_string()))?;
    if !spec.is_object() {
        return Err(Refusal::BadSpec("not an object".into()));
    }
    let selector = labels::selected_cluster(job).ok_or(Refusal::NoSelector)?;
    let copied = Copied::of(job, cfg);
    let digest = identity::digest(&spec, &copied);
    let base = identity::cluster_name(&digest);
    if !is_member(selector, &base) {
        return Err(Refusal::Mismatch {
            selector: selector.into(),
            expected: base,
        });
    }
    let namespace = job["metadata"]["namespace"].as_str().unwrap_or_default();
    let mut cluster = cluster_object(selector, namespace, spec, &copied, &digest);
    if let Some(instance) = labels::get(job, Meta::Labels, labels::INSTANCE) {
        labels::set(&mut cluster, Meta::Labels, labels::INSTANCE, instance);
    }
    Ok(cluster)
}

/// A job that waited this long for its cluster is woken once the cluster is made. KubeRay
/// retries a job whose selected cluster is missing after a delay that doubles from 5 ms
/// (controller-runtime's default, up to 1,000 s), so a job that waited `w` may sit about
/// `w` longer before KubeRay looks again; below a couple of seconds that is noise.
pub const WAKE_AFTER: Duration = Duration::from_secs(2);

/// The jobs to wake now that their cluster was made at `made`: KubeRay holds them in
/// Initializing (retrying the missing cluster), and they waited at least [`WAKE_AFTER`].
pub fn jobs_to_wake(jobs: &[Value], made: Timestamp) -> impl Iterator<Item = &Value> {
    jobs.iter().filter(move |job| {
        let waiting = job["status"]["jobDeploymentStatus"] == "Initializing";
        let waited = parse_time(&job["metadata"]["creationTimestamp"])
            .and_then(|created| made.duration_since(created).try_into().ok())
            .is_some_and(|w: Duration| w >= WAKE_AFTER);
        waiting && waited
    })
}

/// The merge patch that wakes a job: KubeRay's RayJob controller watches RayJobs with no
/// filter, so any update is looked at at once (the retry delay is cut short).
pub fn wake_patch(made: Timestamp) -> Value {
    json!({"metadata": {"annotations": {labels::CLUSTER_MADE: made.to_string()}}})
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case("ray-abc", Some(("ray-abc", 0)))]
    #[case("ray-abc-2", Some(("ray-abc", 2)))]
    #[case("ray-abc-02", None)]
    #[case("ray-abc-0", None)]
    #[case("ray-abc-100", None)]
    #[case("ray-abc-x", None)]
    #[case("ray-", None)]
    #[case("other-abc", None)]
    fn pool_places(#[case] name: &str, #[case] want: Option<(&str, u32)>) {
        assert_eq!(pool_place(name), want);
    }
    use crate::domain::shared_cluster::{Plan, plan};

    fn job() -> Value {
        job_with(json!({}))
    }

    fn job_with(annotations: Value) -> Value {
        json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": { "name": "j", "namespace": "ns", "labels": { "ray.io/priority-class-name": "high" },
                "annotations": annotations },
            "spec": { "entrypoint": "python x.py", "rayClusterSpec": {
                "headGroupSpec": { "rayStartParams": {}, "template": { "spec": { "containers": [
                    { "name": "ray-head", "image": "rayproject/ray:2.40.0",
                      "env": [{ "name": "RUN_NAME", "value": "r1" }] }]}}},
            }},
        })
    }

    fn rewritten(index: u32) -> (Value, Value) {
        rewritten_job(&job(), index)
    }

    fn rewritten_job(job: &Value, index: u32) -> (Value, Value) {
        let cfg = SharedClusters::default();
        let Ok(Plan::Rewrite(r)) = plan(
            job,
            "ns",
            &cfg,
            "rayshare.io/opt-out",
            super::super::tests_by(),
        ) else {
            panic!("rewritten");
        };
        let r = r.into_member(index);
        let mut stored = r.job.clone();
        stored["metadata"]["namespace"] = json!("ns");
        (stored, r.cluster)
    }

    #[rstest]
    #[case::first_member(0)]
    #[case::later_member(7)]
    fn a_stored_job_rebuilds_exactly_the_cluster_admission_planned(#[case] index: u32) {
        let (stored, planned) = rewritten(index);
        let rebuilt = cluster_for_job(&stored, &SharedClusters::default()).unwrap();
        assert_eq!(rebuilt, planned);
        assert!(
            rebuilt["spec"]
                .to_string()
                .contains("rayproject/ray:2.40.0")
        );
        assert!(!rebuilt["spec"].to_string().contains("RUN_NAME"));
    }

    /// KubeRay copies a RayJob's annotations onto the cluster it builds and acts on some
    /// of them: the shared cluster carries those, and jobs that differ in them never share.
    #[test]
    fn kuberay_cluster_annotations_travel_and_set_the_cluster_apart() {
        let ft = job_with(json!({"ray.io/ft-enabled": "true", "note.example/x": "y"}));
        let (stored, planned) = rewritten_job(&ft, 0);
        let annotations = &planned["metadata"]["annotations"];
        assert_eq!(annotations["ray.io/ft-enabled"], "true");
        assert!(
            annotations.get("note.example/x").is_none(),
            "only what KubeRay acts on"
        );
        assert_eq!(
            cluster_for_job(&stored, &SharedClusters::default()).unwrap(),
            planned
        );
        let (_, plain) = rewritten(0);
        assert_ne!(planned["metadata"]["name"], plain["metadata"]["name"]);
        // Annotations KubeRay ignores change nothing.
        let (_, noted) = rewritten_job(&job_with(json!({"note.example/x": "y"})), 0);
        assert_eq!(noted["metadata"]["name"], plain["metadata"]["name"]);
    }

    #[test]
    fn a_tampered_spec_cannot_reach_the_selected_cluster() {
        let (mut stored, _) = rewritten(0);
        let text = labels::get(&stored, Meta::Annotations, labels::CLUSTER_SPEC).unwrap();
        let evil = text.replace("rayproject/ray:2.40.0", "attacker/miner:latest");
        labels::set(&mut stored, Meta::Annotations, labels::CLUSTER_SPEC, &evil);
        let err = cluster_for_job(&stored, &SharedClusters::default()).unwrap_err();
        assert!(matches!(err, Refusal::Mismatch { .. }), "{err}");
    }

    #[test]
    fn a_copied_label_changed_after_admission_is_a_mismatch() {
        let (mut stored, _) = rewritten(0);
        labels::set(
            &mut stored,
            Meta::Labels,
            "ray.io/priority-class-name",
            "low",
        );
        let err = cluster_for_job(&stored, &SharedClusters::default()).unwrap_err();
        assert!(matches!(err, Refusal::Mismatch { .. }));
    }

    #[rstest]
    #[case::no_annotation(None, Refusal::NoSpec)]
    #[case::not_json(Some("{"), Refusal::BadSpec("EOF while parsing an object at line 1 column 1".into()))]
    #[case::not_object(Some("[]"), Refusal::BadSpec("not an object".into()))]
    fn odd_annotations_are_refused(#[case] text: Option<&str>, #[case] want: Refusal) {
        let (mut stored, _) = rewritten(0);
        let annotations = stored["metadata"]["annotations"].as_object_mut().unwrap();
        annotations.remove(labels::CLUSTER_SPEC);
        if let Some(t) = text {
            annotations.insert(labels::CLUSTER_SPEC.into(), json!(t));
        }
        assert_eq!(
            cluster_for_job(&stored, &SharedClusters::default()),
            Err(want)
        );
    }

    #[rstest]
    #[case::base("ray-abc", true)]
    #[case::member("ray-abc-1", true)]
    #[case::last_member("ray-abc-99", true)]
    #[case::beyond_pool("ray-abc-100", false)]
    #[case::zero_suffix("ray-abc-0", false)]
    #[case::leading_zero("ray-abc-01", false)]
    #[case::plus_sign("ray-abc-+1", false)]
    #[case::other("ray-abd", false)]
    #[case::longer("ray-abcd", false)]
    fn pool_members(#[case] selector: &str, #[case] member: bool) {
        assert_eq!(is_member(selector, "ray-abc"), member);
    }

    #[rstest]
    #[case::waited_long("Initializing", "2026-01-01T00:00:00Z", true)]
    #[case::just_at_the_bound("Initializing", "2026-01-01T00:00:08Z", true)]
    #[case::just_admitted("Initializing", "2026-01-01T00:00:09Z", false)]
    #[case::not_seen_by_kuberay_yet("", "2026-01-01T00:00:00Z", false)]
    #[case::already_running("Running", "2026-01-01T00:00:00Z", false)]
    #[case::no_creation_time("Initializing", "", false)]
    fn waiting_jobs_are_woken_once_they_waited(
        #[case] state: &str,
        #[case] created: &str,
        #[case] woken: bool,
    ) {
        let made: Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        let job = json!({"metadata": {"name": "j", "creationTimestamp": created},
            "status": {"jobDeploymentStatus": state}});
        let jobs = [job];
        assert_eq!(jobs_to_wake(&jobs, made).count(), usize::from(woken));
    }

    #[test]
    fn the_wake_patch_touches_one_annotation_only() {
        let made: Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        assert_eq!(
            wake_patch(made),
            json!({"metadata": {"annotations": {"rayshare.io/cluster-made": "2026-01-01T00:00:10Z"}}})
        );
    }
}
