//! The PodGroup of a *stored* pod (pure): what the group provisioner creates.
//!
//! Admission only names the group on the pod (and labels the pod so the provisioner's
//! watch sees it); the group is made from the pod the API server stored, so a forged
//! admission review holds no queue capacity. The pod is the evidence: the group is what
//! the same plan makes of it, under the name the pod carries, recording the pod's uid.

use std::time::Duration;

use serde_json::{Value, json};

use crate::config::PodGroups;
use crate::domain::labels;
use crate::domain::labels::Meta;
use crate::domain::pod_group::{self, Plan};

/// The group a stored pod needs, or `None` when it needs none from rayshare.
pub fn group_for(
    pod: &Value,
    namespace_queue: Option<&str>,
    cfg: &PodGroups,
    opt_out: &str,
) -> Option<Value> {
    let name = labels::get(pod, Meta::Annotations, labels::GROUP_NAME)?;
    let uid = pod["metadata"]["uid"].as_str().filter(|u| !u.is_empty())?;
    let namespace = pod["metadata"]["namespace"].as_str()?;
    let mut bare = pod.clone();
    bare["metadata"]["annotations"]
        .as_object_mut()?
        .remove(labels::GROUP_NAME);
    let Ok(Plan::Create { .. }) = pod_group::plan(&bare, uid, cfg, opt_out) else {
        return None;
    };
    let mut group = pod_group::group(&bare, namespace, uid, name, namespace_queue, cfg).ok()?;
    group["metadata"]["name"] = json!(name);
    // A bare pod owns its group, as Volcano's controller makes it: the garbage collector
    // deletes the group with the pod. (Admission could not: the pod had no uid yet.)
    if group["metadata"].get("ownerReferences").is_none() {
        group["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "v1", "kind": "Pod",
            "name": pod["metadata"]["name"], "uid": uid, "controller": true,
        }]);
    }
    labels::set(&mut group, Meta::Annotations, labels::POD_UID, uid);
    if let Some(instance) = labels::get(pod, Meta::Labels, labels::POD_GROUPED) {
        labels::set(&mut group, Meta::Labels, labels::INSTANCE, instance);
    }
    Some(group)
}

/// Whether the provisioner leaves a stored pod's group, for now, to the webhook replica
/// that admitted it: that replica made it and takes it up from memory, where another
/// would send a create to be refused and a read for each pod of a burst. A pod older
/// than `grace` (or of unknown age) is looked at by every replica: its admitter may be
/// gone, or its create may have failed. With `createAtAdmission: false` no replica made
/// it: every one makes it at once.
pub fn leave_to_admitter(cfg: &PodGroups, admitted_here: bool, age: Option<Duration>) -> bool {
    let grace = Duration::from_secs(cfg.unconfirmed_grace_seconds);
    made_elsewhere(cfg, admitted_here) && age.is_some_and(|age| age < grace)
}

/// Whether the pod's group was most likely made by another replica's admission: a
/// create would be refused, so a read comes first.
pub fn made_elsewhere(cfg: &PodGroups, admitted_here: bool) -> bool {
    cfg.create_at_admission && !admitted_here
}

/// Whether a stored pod is past needing a group: going, or over.
pub fn pod_done(pod: &Value) -> bool {
    let phase = pod["status"]["phase"].as_str();
    pod["metadata"]["deletionTimestamp"].is_string()
        || matches!(phase, Some("Succeeded" | "Failed"))
}

/// The merge patch that brings rayshare's group, made at admission or left by an earlier
/// pod of the same name, up to date for the stored pod's `group` (as [`group_for`] makes
/// it): owner, pod uid, a fresh admission stamp (the orphan sweep's grace starts again),
/// spec. The owner list replaces the old pod's (a merge patch replaces lists).
pub fn update_patch(group: &Value, now: k8s_openapi::jiff::Timestamp) -> Value {
    json!({
        "metadata": { "ownerReferences": group["metadata"]["ownerReferences"], "annotations": {
            labels::POD_UID: group["metadata"]["annotations"][labels::POD_UID],
            labels::ADMITTED_AT: now.to_string(),
        }},
        "spec": group["spec"],
    })
}

/// What the provisioner does when a group of that name exists already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Made for this pod: nothing to do.
    Ours,
    /// rayshare's, made at this pod's admission, not yet taken up by a stored pod: take
    /// it up (record the pod's uid, bring it up to date from the stored pod).
    TakeUp,
    /// rayshare's, made for a pod that no longer exists (a pod of the same name came
    /// back): bring it up to date for this one.
    Adopt,
    /// Not rayshare's, or another live pod's: leave it.
    Foreign,
}

pub fn existing(group: &Value, pod_uid: &str, pod_alive: impl Fn(&str) -> bool) -> Existing {
    if labels::get(group, Meta::Labels, labels::MANAGED_BY) != Some(labels::MANAGER) {
        return Existing::Foreign;
    }
    match labels::get(group, Meta::Annotations, labels::POD_UID) {
        Some(uid) if uid == pod_uid => Existing::Ours,
        Some(uid) if pod_alive(uid) => Existing::Foreign,
        Some(_) => Existing::Adopt,
        None => Existing::TakeUp,
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    // Admitted here: taken up at once, from memory.
    #[case::admitted_here(true, true, Some(1), false)]
    // Another replica admitted it a moment ago: its group is that replica's to take up.
    #[case::admitted_elsewhere(true, false, Some(1), true)]
    // Past the grace (30 s): its admitter may be gone, or its create failed.
    #[case::past_the_grace(true, false, Some(30), false)]
    #[case::age_unknown(true, false, None, false)]
    // No group is made at admission: nobody else will make it.
    #[case::made_only_from_the_stored_pod(false, false, Some(1), false)]
    fn a_young_pod_admitted_elsewhere_is_left_to_its_admitter(
        #[case] at_admission: bool,
        #[case] admitted_here: bool,
        #[case] age_s: Option<u64>,
        #[case] left: bool,
    ) {
        let mut cfg = crate::config::Config::default().pod_groups;
        cfg.create_at_admission = at_admission;
        assert_eq!(cfg.unconfirmed_grace_seconds, 30);
        let age = age_s.map(Duration::from_secs);
        assert_eq!(leave_to_admitter(&cfg, admitted_here, age), left);
    }

    fn stored_pod() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "task-abc12", "generateName": "task-", "namespace": "team",
                "uid": "pod-uid-1",
                "annotations": { "scheduling.k8s.io/group-name": "task-xyz",
                                 "scheduling.volcano.sh/queue-name": "gpu" },
                "labels": { labels::POD_GROUPED: "true" } },
            "spec": { "schedulerName": "volcano", "priorityClassName": "high",
                "containers": [{ "name": "c", "image": "i",
                    "resources": { "requests": { "cpu": "2", "memory": "1Gi" } } }] },
        })
    }

    #[test]
    fn a_stored_pod_gets_the_group_it_names_with_its_queue_and_uid() {
        let group = group_for(
            &stored_pod(),
            Some("ns-queue"),
            &PodGroups::default(),
            "opt-out",
        )
        .unwrap();
        assert_eq!(group["metadata"]["name"], "task-xyz");
        assert_eq!(group["metadata"]["namespace"], "team");
        assert_eq!(group["spec"]["queue"], "gpu");
        assert_eq!(group["spec"]["priorityClassName"], "high");
        assert_eq!(group["spec"]["minResources"]["cpu"], "2");
        assert_eq!(
            group["metadata"]["annotations"][labels::POD_UID],
            "pod-uid-1"
        );
        assert_eq!(
            group["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "Pod", "name": "task-abc12", "uid": "pod-uid-1", "controller": true}])
        );
    }

    #[test]
    fn an_owned_pod_leaves_its_group_to_its_owner() {
        let mut pod = stored_pod();
        let owner = json!({"apiVersion": "flyte.org/v1", "kind": "TaskAction", "name": "a", "uid": "ta-uid", "controller": true});
        pod["metadata"]["ownerReferences"] = json!([owner]);
        let group = group_for(&pod, None, &PodGroups::default(), "opt-out").unwrap();
        assert_eq!(group["metadata"]["ownerReferences"], json!([owner]));
        pod["metadata"]["ownerReferences"][0]["kind"] = json!("StatefulSet");
        pod["metadata"]["ownerReferences"][0]["apiVersion"] = json!("apps/v1");
        assert_eq!(
            group_for(&pod, None, &PodGroups::default(), "opt-out"),
            None,
            "Volcano's controller groups a StatefulSet's pods"
        );
    }

    #[rstest]
    #[case::no_group_annotation("/metadata/annotations/scheduling.k8s.io~1group-name")]
    #[case::no_uid("/metadata/uid")]
    fn pods_without_what_it_needs_get_none(#[case] pointer: &str) {
        let mut pod = stored_pod();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        let key = key.replace("~1", "/");
        pod.pointer_mut(parent)
            .unwrap()
            .as_object_mut()
            .unwrap()
            .remove(&key);
        assert_eq!(
            group_for(&pod, None, &PodGroups::default(), "opt-out"),
            None
        );
    }

    #[test]
    fn another_scheduler_gets_none() {
        let mut pod = stored_pod();
        pod["spec"]["schedulerName"] = json!("default-scheduler");
        assert_eq!(
            group_for(&pod, None, &PodGroups::default(), "opt-out"),
            None
        );
    }

    fn group(managed: bool, uid: Option<&str>) -> Value {
        let mut g = json!({ "metadata": { "labels": {}, "annotations": {} } });
        if managed {
            labels::set(&mut g, Meta::Labels, labels::MANAGED_BY, labels::MANAGER);
        }
        if let Some(u) = uid {
            labels::set(&mut g, Meta::Annotations, labels::POD_UID, u);
        }
        g
    }

    #[rstest]
    #[case::ours(group(true, Some("me")), false, Existing::Ours)]
    #[case::previous_pod_gone(group(true, Some("old")), false, Existing::Adopt)]
    #[case::another_live_pod(group(true, Some("old")), true, Existing::Foreign)]
    #[case::made_at_admission(group(true, None), false, Existing::TakeUp)]
    #[case::not_rayshares(group(false, Some("me")), false, Existing::Foreign)]
    fn existing_groups(#[case] g: Value, #[case] alive: bool, #[case] want: Existing) {
        assert_eq!(existing(&g, "me", |_| alive), want);
    }

    #[rstest]
    #[case::running(json!({"status": {"phase": "Running"}}), false)]
    #[case::pending(json!({}), false)]
    #[case::succeeded(json!({"status": {"phase": "Succeeded"}}), true)]
    #[case::failed(json!({"status": {"phase": "Failed"}}), true)]
    #[case::going(json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}), true)]
    fn a_pod_going_or_over_needs_no_group(#[case] pod: Value, #[case] done: bool) {
        assert_eq!(pod_done(&pod), done);
    }

    #[test]
    fn the_update_gives_the_group_to_the_stored_pod() {
        let group = group_for(&stored_pod(), None, &PodGroups::default(), "opt-out").unwrap();
        let now: k8s_openapi::jiff::Timestamp = "2026-11-26T12:00:00Z".parse().unwrap();
        let patch = update_patch(&group, now);
        assert_eq!(patch["metadata"]["ownerReferences"][0]["uid"], "pod-uid-1");
        assert_eq!(
            patch["metadata"]["annotations"][labels::POD_UID],
            "pod-uid-1"
        );
        assert_eq!(
            patch["metadata"]["annotations"][labels::ADMITTED_AT],
            "2026-11-26T12:00:00Z"
        );
        assert_eq!(patch["spec"], group["spec"]);
    }
}
