//! Volcano PodGroups for pods: one group per pod, queue and priority from the pod (pure).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::config::PodGroups;
use crate::domain::labels;
use crate::domain::labels::Meta;
use crate::domain::quantity::{self, Milli};

#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    Skip(Option<String>),
    Create(Box<GroupPlan>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct GroupPlan {
    /// The pod with its group annotation.
    pub pod: Value,
    /// The PodGroup to create.
    pub group: Value,
    pub name: String,
}

/// Plans the PodGroup of a pod CREATE. `namespace_queue` is the namespace's queue
/// annotation, as the shell's namespace cache knows it.
pub fn plan(
    pod: &Value,
    namespace: &str,
    request_uid: &str,
    namespace_queue: Option<&str>,
    cfg: &PodGroups,
    opt_out: &str,
) -> Result<Plan, String> {
    let spec = pod
        .get("spec")
        .filter(|s| s.is_object())
        .ok_or("pod has no spec")?;
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
    if let Some(kind) = excluded_owner(pod, cfg) {
        return Ok(Plan::Skip(Some(format!(
            "rayshare: PodGroup skipped: owner kind {kind} brings its own gang scheduling"
        ))));
    }

    let name = group_name(pod, request_uid)?;
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
    let mut group_labels = json!({ labels::MANAGED_BY: labels::MANAGER });
    let pod_name = pod_name_or_prefix(pod).trim_end_matches(['-', '.']);
    if labels::is_label_value(pod_name) {
        group_labels[labels::FOR_POD] = json!(pod_name);
    }
    let mut metadata = json!({
        "name": name,
        "namespace": namespace,
        "labels": group_labels,
        "annotations": { labels::ADMISSION_UID: request_uid },
    });
    if let Some(owner) = controller_owner(pod) {
        metadata["ownerReferences"] = json!([owner]);
    }
    let group = json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": group_spec,
    });

    let mut new_pod = pod.clone();
    labels::set(&mut new_pod, Meta::Annotations, labels::GROUP_NAME, &name);
    Ok(Plan::Create(Box::new(GroupPlan {
        pod: new_pod,
        group,
        name,
    })))
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
pub fn group_name(pod: &Value, request_uid: &str) -> Result<String, String> {
    let meta = &pod["metadata"];
    if let Some(name) = meta["name"].as_str().filter(|n| !n.is_empty()) {
        return Ok(name.to_string());
    }
    let prefix = meta["generateName"]
        .as_str()
        .filter(|p| !p.is_empty())
        .ok_or("pod has neither name nor generateName")?;
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

fn excluded_owner(pod: &Value, cfg: &PodGroups) -> Option<String> {
    let owners = pod["metadata"]["ownerReferences"].as_array()?;
    owners.iter().find_map(|o| {
        let kind = o["kind"].as_str()?;
        let group = o["apiVersion"].as_str()?.rsplit_once('/').map(|(g, _)| g);
        let qualified = group.map(|g| format!("{g}/{kind}"));
        cfg.excluded_owner_kinds
            .iter()
            .find(|k| *k == kind || Some(k.as_str()) == qualified.as_deref())
            .map(|_| qualified.unwrap_or_else(|| kind.to_string()))
    })
}

type Resources = BTreeMap<String, Milli>;

/// A container's requests, limits standing in where a request is absent.
fn container_requests(container: &Value) -> Resources {
    let mut out = Resources::new();
    for field in ["limits", "requests"] {
        let Some(map) = container["resources"][field].as_object() else {
            continue;
        };
        for (name, q) in map {
            let text = match q {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => continue,
            };
            if let Some(q) = quantity::parse(&text) {
                out.insert(name.clone(), q);
            }
        }
    }
    out
}

fn add(into: &mut Resources, other: &Resources) {
    for (k, v) in other {
        let slot = into.entry(k.clone()).or_default();
        *slot = *slot + *v;
    }
}

fn max_into(into: &mut Resources, other: &Resources) {
    for (k, v) in other {
        let slot = into.entry(k.clone()).or_default();
        *slot = (*slot).max(*v);
    }
}

/// The scheduler's effective request of a pod (k8s `PodRequests`): app containers and
/// sidecars summed, each regular init container (plus the sidecars started before it)
/// as a floor, then pod overhead.
pub fn min_resources(spec: &Value) -> Value {
    let mut total = Resources::new();
    for c in spec["containers"].as_array().into_iter().flatten() {
        add(&mut total, &container_requests(c));
    }
    let mut sidecars = Resources::new();
    let mut init_floor = Resources::new();
    for c in spec["initContainers"].as_array().into_iter().flatten() {
        let mut reqs = container_requests(c);
        if c["restartPolicy"] == "Always" {
            add(&mut total, &reqs);
            add(&mut sidecars, &reqs);
            reqs = sidecars.clone();
        } else {
            add(&mut reqs, &sidecars);
        }
        max_into(&mut init_floor, &reqs);
    }
    max_into(&mut total, &init_floor);
    if let Some(overhead) = spec.get("overhead") {
        add(
            &mut total,
            &container_requests(&json!({"resources": {"requests": overhead}})),
        );
    }
    Value::Object(
        total
            .into_iter()
            .map(|(k, v)| (k, json!(quantity::format(v))))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn cfg() -> PodGroups {
        PodGroups::default()
    }

    fn sample() -> Value {
        serde_norway::from_str(include_str!("../../deploy/samples/volcano-pod.yaml")).unwrap()
    }

    fn created(pod: &Value, ns_queue: Option<&str>) -> GroupPlan {
        match plan(pod, "ns", "uid-1", ns_queue, &cfg(), "rayshare.io/skip").unwrap() {
            Plan::Create(p) => *p,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sample_pod_gets_a_group() {
        let p = created(&sample(), None);
        assert!(p.name.starts_with("pod-task-"));
        assert_eq!(p.name.len(), "pod-task-".len() + 10);
        assert_eq!(
            p.pod["metadata"]["annotations"][labels::GROUP_NAME],
            json!(p.name)
        );
        assert_eq!(p.group["spec"]["queue"], "research");
        assert_eq!(p.group["spec"]["minMember"], 1);
        // init container (2 CPU) beats the app containers' 750m; memory: 1Gi vs 640Mi.
        assert_eq!(
            p.group["spec"]["minResources"],
            json!({"cpu": "2", "memory": "1073741824"})
        );
        assert_eq!(p.group["metadata"]["labels"][labels::FOR_POD], "pod-task");
        assert!(p.group["metadata"].get("ownerReferences").is_none());
    }

    #[test]
    fn generate_name_groups_are_stable_per_request_and_unique_across() {
        let a = group_name(&sample(), "uid-1").unwrap();
        assert_eq!(a, group_name(&sample(), "uid-1").unwrap());
        assert_ne!(a, group_name(&sample(), "uid-2").unwrap());
        let named = json!({"metadata": {"name": "p1"}});
        assert_eq!(group_name(&named, "uid-1").unwrap(), "p1");
    }

    #[rstest]
    #[case(Some("pq"), Some("nsq"), "pq")]
    #[case(None, Some("nsq"), "nsq")]
    #[case(None, None, "default")]
    fn queue_precedence(
        #[case] pod_q: Option<&str>,
        #[case] ns_q: Option<&str>,
        #[case] want: &str,
    ) {
        let mut pod = sample();
        pod["metadata"]["annotations"] = json!({});
        if let Some(q) = pod_q {
            labels::set(&mut pod, Meta::Annotations, labels::QUEUE_NAME, q);
        }
        assert_eq!(created(&pod, ns_q).group["spec"]["queue"], want);
    }

    #[rstest]
    #[case::other_scheduler(json!({"spec": {"schedulerName": "default-scheduler"}}), false)]
    #[case::no_scheduler(json!({"spec": {"schedulerName": null}}), false)]
    #[case::has_group(json!({"metadata": {"annotations": {"scheduling.k8s.io/group-name": "g"}}}), false)]
    #[case::opt_out(json!({"metadata": {"annotations": {"rayshare.io/skip": "true"}}}), true)]
    #[case::volcano_job(json!({"metadata": {"ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j", "uid": "u", "controller": true}]}}), true)]
    #[case::ray(json!({"metadata": {"ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "c", "uid": "u"}]}}), true)]
    fn pods_that_do_not_qualify(#[case] overlay: Value, #[case] warns: bool) {
        let mut pod = sample();
        json_patch::merge(&mut pod, &overlay);
        match plan(&pod, "ns", "u", None, &cfg(), "rayshare.io/skip").unwrap() {
            Plan::Skip(w) => assert_eq!(w.is_some(), warns),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn batch_job_owner_is_kept_and_priority_copied() {
        let mut pod = sample();
        pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u1", "controller": true, "blockOwnerDeletion": true}]);
        pod["spec"]["priorityClassName"] = json!("high");
        let p = created(&pod, None);
        assert_eq!(
            p.group["metadata"]["ownerReferences"],
            json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u1", "controller": true}])
        );
        assert_eq!(p.group["spec"]["priorityClassName"], "high");
    }

    #[rstest]
    #[case::sum_of_apps(json!({"containers": [{"resources": {"requests": {"cpu": "1"}}}, {"resources": {"requests": {"cpu": "500m"}}}]}), json!({"cpu": "1500m"}))]
    #[case::limits_only(json!({"containers": [{"resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "1"}}}]}), json!({"cpu": "1", "nvidia.com/gpu": "1"}))]
    #[case::request_beats_limit(json!({"containers": [{"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}]}), json!({"cpu": "1"}))]
    #[case::init_is_floor(json!({"containers": [{"resources": {"requests": {"cpu": "1"}}}], "initContainers": [{"resources": {"requests": {"cpu": "3"}}}, {"resources": {"requests": {"cpu": "2"}}}]}), json!({"cpu": "3"}))]
    #[case::sidecar_adds(json!({"containers": [{"resources": {"requests": {"cpu": "1"}}}], "initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}, {"resources": {"requests": {"cpu": "1500m"}}}]}), json!({"cpu": "2500m"}))]
    #[case::overhead(json!({"containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}], "overhead": {"cpu": "250m", "memory": "64Mi"}}), json!({"cpu": "1250m", "memory": "1140850688"}))]
    #[case::nothing(json!({"containers": [{"name": "x"}]}), json!({}))]
    fn min_resources_rule(#[case] spec: Value, #[case] want: Value) {
        assert_eq!(min_resources(&spec), want);
    }

    #[test]
    fn long_multibyte_generate_names_do_not_panic() {
        let pod = json!({"metadata": {"generateName": "é".repeat(200)}});
        let name = group_name(&pod, "u").unwrap();
        assert!(name.len() <= 253);
    }

    #[test]
    fn odd_pods_are_errors() {
        assert!(plan(&json!({"spec": 1}), "ns", "u", None, &cfg(), "x").is_err());
        let nameless = json!({"spec": {"schedulerName": "volcano"}});
        assert!(plan(&nameless, "ns", "u", None, &cfg(), "x").is_err());
    }
}
