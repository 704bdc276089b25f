use super::*;
use rstest::rstest;

fn cfg() -> PodGroups {
    PodGroups::default()
}

fn sample() -> Value {
    serde_norway::from_str(include_str!("../../../deploy/samples/volcano-pod.yaml")).unwrap()
}

struct Created {
    name: String,
    group: Value,
}

fn created(pod: &Value, ns_queue: Option<&str>) -> Created {
    match plan(pod, "uid-1", &cfg(), "rayshare.io/skip").unwrap() {
        Plan::Create { name } => Created {
            group: group(pod, "ns", "uid-1", &name, ns_queue, &cfg()).unwrap(),
            name,
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn sample_pod_gets_a_group() {
    let p = created(&sample(), None);
    assert!(p.name.starts_with("pod-task-"));
    assert_eq!(p.name.len(), "pod-task-".len() + 10);
    assert_eq!(p.group["metadata"]["name"], json!(p.name));
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
fn queue_precedence(#[case] pod_q: Option<&str>, #[case] ns_q: Option<&str>, #[case] want: &str) {
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
#[case::deployment_left_to_volcano(json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u", "controller": true}]}}), false)]
#[case::batch_job_left_to_volcano(json!({"metadata": {"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": true}]}}), false)]
fn pods_that_do_not_qualify(#[case] overlay: Value, #[case] warns: bool) {
    let mut pod = sample();
    json_patch::merge(&mut pod, &overlay);
    match plan(&pod, "u", &cfg(), "rayshare.io/skip").unwrap() {
        Plan::Skip(w) => assert_eq!(w.is_some(), warns),
        other => panic!("{other:?}"),
    }
}

#[test]
fn flyte_owner_is_kept_and_priority_and_hints_copied() {
    let mut pod = sample();
    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "flyte.lyft.com/v1alpha1", "kind": "flyteworkflow", "name": "j", "uid": "u1", "controller": true, "blockOwnerDeletion": true}]);
    labels::set(
        &mut pod,
        Meta::Annotations,
        "volcano.sh/preemptable",
        "false",
    );
    pod["spec"]["priorityClassName"] = json!("high");
    let p = created(&pod, None);
    assert_eq!(
        p.group["metadata"]["ownerReferences"],
        json!([{"apiVersion": "flyte.lyft.com/v1alpha1", "kind": "flyteworkflow", "name": "j", "uid": "u1", "controller": true}])
    );
    assert_eq!(p.group["spec"]["priorityClassName"], "high");
    assert_eq!(
        p.group["metadata"]["annotations"]["volcano.sh/preemptable"],
        "false"
    );
    assert_eq!(
        p.group["metadata"]["annotations"][labels::ADMISSION_UID],
        "uid-1"
    );
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
    assert!(plan(&json!({"spec": 1}), "u", &cfg(), "x").is_err());
    assert!(group(&json!({"spec": 1}), "ns", "u", "g", None, &cfg()).is_err());
    let nameless = json!({"spec": {"schedulerName": "volcano"}});
    assert!(plan(&nameless, "u", &cfg(), "x").is_err());
}
