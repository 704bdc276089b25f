//! Volcano PodGroups for pods: one group per pod, queue and priority from the pod (pure).

use serde_json::{Value, json};

use crate::config::PodGroups;
use crate::domain::labels;
use crate::domain::labels::Meta;

/// A pod rayshare cannot plan a group for (it passes unchanged, with a warning).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OddPod {
    #[error("pod has no spec")]
    NoSpec,
    #[error("pod has neither name nor generateName")]
    NoName,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    Skip(Option<String>),
    /// The pod gets group `name`: admission names it on the pod, the provisioner makes
    /// it ([`group`]) from the stored pod.
    Create {
        name: String,
    },
}

/// Whether a pod CREATE gets a group, and its name. Reads only the pod's metadata and
/// `spec.schedulerName`: admission plans from the few fields triage read, not the pod.
pub fn plan(
    pod: &Value,
    request_uid: &str,
    cfg: &PodGroups,
    opt_out: &str,
) -> Result<Plan, OddPod> {
    let spec = spec_of(pod)?;
    if !scheduled_by_gang_scheduler(spec["schedulerName"].as_str(), cfg) {
        return Ok(Plan::Skip(None));
    }
    if labels::get(pod, Meta::Annotations, labels::GROUP_NAME).is_some() {
        return Ok(Plan::Skip(None));
    }
    if labels::get(pod, Meta::Annotations, opt_out) == Some("true") {
        return Ok(Plan::Skip(Some(format!(
            "rayshare: PodGroup skipped: annotation {opt_out}=true"
        ))));
    }
    match owners::allowed(pod, cfg) {
        Ok(()) => {}
        Err(Refusal::Excluded(kind)) => {
            return Ok(Plan::Skip(Some(format!(
                "rayshare: PodGroup skipped: owner kind {kind} brings its own gang scheduling"
            ))));
        }
        // Volcano's own controller groups these pods, as their owner expects.
        Err(Refusal::NotListed(_) | Refusal::Bare) => return Ok(Plan::Skip(None)),
    }
    Ok(Plan::Create {
        name: group_name(pod, request_uid)?,
    })
}

/// The PodGroup `name` of a pod: queue and priority from the pod (or its namespace's
/// queue annotation, `namespace_queue`), `minResources` its effective request, Volcano's
/// hints copied, owned by the pod's controller owner.
pub fn group(
    pod: &Value,
    namespace: &str,
    request_uid: &str,
    name: &str,
    namespace_queue: Option<&str>,
    cfg: &PodGroups,
) -> Result<Value, OddPod> {
    let spec = spec_of(pod)?;
    let queue = labels::get(pod, Meta::Annotations, labels::QUEUE_NAME)
        .or(namespace_queue)
        .unwrap_or(&cfg.default_queue);
    let mut group_spec = json!({
        "minMember": 1,
        "queue": queue,
        "minResources": min_resources(spec),
    });
    if let Some(priority) = spec["priorityClassName"].as_str().filter(|p| !p.is_empty()) {
        group_spec["priorityClassName"] = json!(priority);
    }
    let (mut group_labels, mut group_annotations) = hints::copied(pod);
    group_labels.insert(labels::MANAGED_BY.into(), json!(labels::MANAGER));
    group_annotations.insert(labels::ADMISSION_UID.into(), json!(request_uid));
    let pod_name = pod_name_or_prefix(pod).trim_end_matches(['-', '.']);
    if labels::is_label_value(pod_name) {
        group_labels.insert(labels::FOR_POD.into(), json!(pod_name));
    }
    let mut metadata = json!({
        "name": name,
        "namespace": namespace,
        "labels": group_labels,
        "annotations": group_annotations,
    });
    if let Some(owner) = controller_owner(pod) {
        metadata["ownerReferences"] = json!([owner]);
    }
    Ok(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": group_spec,
    }))
}

/// What a group made at admission asks of its queue until the stored pod's requests
/// replace it: more than any queue or cluster holds, so Volcano's enqueue step (which
/// admits a group to its queue only when its `minResources` fit) leaves it Pending,
/// reserving nothing. A group with no `minResources` would be admitted at once, and the
/// real requests set a moment later would then count against the queue ungated.
pub const UNCONFIRMED_MIN_RESOURCES: &str = "1000000000";

/// The [`group`] admission makes, before its pod is stored, holding nothing a stored pod
/// has not asked for. Volcano's `pods/validate` needs only that the group exists (and
/// that a queue it names is open); the requests and the priority come from the stored
/// pod when the group provisioner takes the group up. Until then it waits, Pending (see
/// [`UNCONFIRMED_MIN_RESOURCES`]), so a forged review holds no capacity.
pub fn unconfirmed(mut group: Value) -> Value {
    if let Some(spec) = group["spec"].as_object_mut() {
        spec.insert(
            "minResources".into(),
            json!({ "cpu": UNCONFIRMED_MIN_RESOURCES }),
        );
        spec.remove("priorityClassName");
    }
    group
}

fn spec_of(pod: &Value) -> Result<&Value, OddPod> {
    pod.get("spec")
        .filter(|s| s.is_object())
        .ok_or(OddPod::NoSpec)
}

/// Whether a pod with this `spec.schedulerName` (unset: the default scheduler) is one
/// rayshare groups.
pub fn scheduled_by_gang_scheduler(scheduler_name: Option<&str>, cfg: &PodGroups) -> bool {
    let scheduler = scheduler_name.unwrap_or("default-scheduler");
    cfg.scheduler_names.iter().any(|s| s == scheduler)
}

fn pod_name_or_prefix(pod: &Value) -> &str {
    let meta = &pod["metadata"];
    meta["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .or(meta["generateName"].as_str())
        .unwrap_or("")
}

/// The pod's own name; for `generateName` pods, the prefix plus a hash of the admission
/// request's uid (unique per request; a re-invocation finds the annotation already set).
pub fn group_name(pod: &Value, request_uid: &str) -> Result<String, OddPod> {
    let meta = &pod["metadata"];
    if let Some(name) = meta["name"].as_str().filter(|n| !n.is_empty()) {
        return Ok(name.to_string());
    }
    let prefix = meta["generateName"]
        .as_str()
        .filter(|p| !p.is_empty())
        .ok_or(OddPod::NoName)?;
    let suffix = crate::domain::naming::hashed(request_uid, 10);
    let mut end = prefix.len().min(253 - suffix.len());
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    let prefix = &prefix[..end];
    Ok(format!("{prefix}{suffix}"))
}

fn controller_owner(pod: &Value) -> Option<Value> {
    let owners = pod["metadata"]["ownerReferences"].as_array()?;
    let owner = owners.iter().find(|o| o["controller"] == true)?;
    Some(json!({
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["name"],
        "uid": owner["uid"],
        "controller": true,
    }))
}

mod hints;
pub mod owners;
mod resources;
pub use resources::min_resources;

use owners::Refusal;

#[cfg(test)]
mod tests;
