use super::*;
use proptest::prelude::*;
use rstest::rstest;

fn head(object: Value) -> Head {
    // As in a review: parsed from text.
    serde_json::from_str(&object.to_string()).expect("any JSON parses")
}

fn worker(group: &str, extra_labels: Value) -> Value {
    let mut labels = json!({
        "ray.io/node-type": "worker", "ray.io/cluster": "c1", "ray.io/group": group,
    });
    labels
        .as_object_mut()
        .unwrap()
        .extend(extra_labels.as_object().unwrap().clone());
    json!({"metadata": {"labels": labels}, "spec": {"containers": [{"name": "w"}]}})
}

/// One cluster, ns/c1, with a single-host and a 4-host group.
fn cluster() -> Value {
    json!({"kind": "RayCluster", "metadata": {"namespace": "ns", "name": "c1"},
        "spec": {"workerGroupSpecs": [
            {"groupName": "single"}, {"groupName": "multi", "numOfHosts": 4}]}})
}

/// What the cache knows: [`cluster`].
fn clusters(ns: &str, name: &str) -> Option<ClusterInfo> {
    (ns == "ns" && name == "c1").then(|| ClusterInfo::from_value(&cluster()))
}

/// The same, as a world for the full path.
fn world() -> crate::world::MemoryWorld {
    let world = crate::world::MemoryWorld::default();
    let key = ("RayCluster".into(), "ns".into(), "c1".into());
    world.objects.lock().unwrap().insert(key, cluster());
    world
}

#[rstest]
#[case::plain_pod(Kind::Pod, json!({"metadata": {"name": "p"}, "spec": {"containers": []}}), false)]
#[case::volcano_pod(Kind::Pod, json!({"spec": {"schedulerName": "volcano"}}), true)]
#[case::volcano_pod_grouped(Kind::Pod, json!({"metadata": {"annotations": {"scheduling.k8s.io/group-name": "g"}}, "spec": {"schedulerName": "volcano"}}), false)]
#[case::single_host_worker(Kind::Pod, worker("single", json!({})), false)]
#[case::multi_host_worker(Kind::Pod, worker("multi", json!({})), true)]
#[case::multi_host_worker_indexed(Kind::Pod, worker("multi", json!({"ray.io/worker-group-replica-index": "0"})), false)]
// Unknown group or cluster: the full path explains it in a warning.
#[case::unknown_group(Kind::Pod, worker("gpu", json!({})), true)]
#[case::no_spec(Kind::Pod, json!({"metadata": {}}), true)]
// Only string values count, as in the planners (a null group name is no group).
#[case::volcano_pod_null_group(Kind::Pod, json!({"metadata": {"annotations": {"scheduling.k8s.io/group-name": null}}, "spec": {"schedulerName": "volcano"}}), true)]
#[case::rayjob_embedded(Kind::RayJob, json!({"spec": {"rayClusterSpec": {}}}), true)]
#[case::rayjob_selector(Kind::RayJob, json!({"spec": {"clusterSelector": {"ray.io/cluster": "x"}}}), false)]
#[case::rayjob_both(Kind::RayJob, json!({"spec": {"rayClusterSpec": {}, "clusterSelector": {}}}), false)]
#[case::rayjob_null_spec(Kind::RayJob, json!({"spec": {"rayClusterSpec": null}}), false)]
// Rewritten by rayshare, then put in a queue by Kueue's webhook: looked at again.
#[case::rayjob_queued_after_rewrite(Kind::RayJob, json!({"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "default", "rayshare.io/cluster": "x"}}, "spec": {"clusterSelector": {"ray.io/cluster": "x"}}}), true)]
#[case::rayjob_own_selector_in_a_queue(Kind::RayJob, json!({"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "default"}}, "spec": {"clusterSelector": {"ray.io/cluster": "x"}}}), false)]
fn triage(#[case] kind: Kind, #[case] object: Value, #[case] expected: bool) {
    let cfg = Config::default();
    let head = head(object);
    assert_eq!(needs_work(kind, &head, "ns", &cfg, &clusters), expected);
}

#[rstest]
#[case::metadata_string(json!({"metadata": "odd", "spec": {}}))]
#[case::metadata_list(json!({"metadata": [{"labels": {}}], "spec": {}}))]
#[case::spec_string(json!({"spec": "odd"}))]
#[case::spec_null(json!({"spec": null}))]
#[case::object_list(json!([1, {"a": [2]}]))]
#[case::object_string(json!("pod"))]
#[case::object_number(json!(-1.5))]
#[case::object_bool(json!(true))]
fn odd_shapes_go_the_full_way(#[case] object: Value) {
    let cfg = Config::default();
    for kind in [Kind::Pod, Kind::RayJob] {
        assert!(needs_work(
            kind,
            &head(object.clone()),
            "ns",
            &cfg,
            &clusters
        ));
    }
}

#[test]
fn odd_leaves_are_values() {
    let h = head(
        json!({"metadata": {"namespace": 7, "labels": "x", "name": {"a": 1}},
        "spec": {"schedulerName": 7, "rayClusterSpec": null, "x": [1, [2, {"y": null}]]}}),
    );
    assert!(!h.odd);
    assert_eq!(h.namespace(""), "default");
    assert_eq!(h.view["metadata"]["labels"], json!("x"));
    assert!(!needs_work(
        Kind::Pod,
        &h,
        "ns",
        &Config::default(),
        &clusters
    ));
    assert!(!needs_work(
        Kind::RayJob,
        &h,
        "ns",
        &Config::default(),
        &clusters
    ));
}

#[test]
fn unset_scheduler_is_the_default_scheduler() {
    let mut cfg = Config::default();
    cfg.pod_groups.scheduler_names = vec!["default-scheduler".into()];
    let pod = head(worker("single", json!({})));
    assert!(needs_work(Kind::Pod, &pod, "ns", &cfg, &clusters));
}

#[test]
fn later_duplicates_win() {
    let h: Head = serde_json::from_str(
        r#"{"metadata": {"labels": {"a": "1"}, "labels": {"b": "2"}}, "spec": {}}"#,
    )
    .unwrap();
    assert_eq!(h.view["metadata"]["labels"], json!({"b": "2"}));
}

/// Pods and RayJobs from a small vocabulary of the fields the features look at,
/// including odd values.
fn object() -> impl Strategy<Value = (Kind, Value)> {
    let value = |choices: Vec<Value>| prop::sample::select(choices);
    let labels = prop::collection::btree_map(
        prop::sample::select(vec![
            "ray.io/node-type",
            "ray.io/cluster",
            "ray.io/group",
            "ray.io/worker-group-replica-index",
        ]),
        value(vec![
            json!("worker"),
            json!("head"),
            json!("c1"),
            json!("single"),
            json!("multi"),
            json!("gpu"),
            json!("0"),
            json!(null),
            json!(5),
        ]),
        0..5,
    );
    let annotations = prop::collection::btree_map(
        prop::sample::select(vec![
            "scheduling.k8s.io/group-name",
            "rayshare.io/skip",
            "scheduling.volcano.sh/queue-name",
        ]),
        value(vec![json!("g"), json!("true"), json!(null), json!(1)]),
        0..3,
    );
    let spec = value(vec![
        json!(null),
        json!("odd"),
        json!({"containers": [{"name": "c"}]}),
        json!({"schedulerName": "volcano", "containers": [{"name": "c"}]}),
        json!({"schedulerName": "default-scheduler", "containers": []}),
        json!({"schedulerName": 7}),
        json!({"rayClusterSpec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "ray"}]}}}}}),
        json!({"rayClusterSpec": null}),
        json!({"rayClusterSpec": {}, "clusterSelector": {"ray.io/cluster": "x"}}),
        json!({"rayClusterSpec": "odd"}),
    ]);
    let kind = prop::sample::select(vec![Kind::Pod, Kind::RayJob]);
    (kind, labels, annotations, spec, any::<bool>()).prop_map(|(kind, l, a, spec, named)| {
        let mut meta = json!({"labels": l, "annotations": a});
        if named {
            meta["name"] = json!("p");
        } else {
            meta["generateName"] = json!("p-");
        }
        let mut object = json!({"metadata": meta});
        if !spec.is_null() {
            object["spec"] = spec;
        }
        (kind, object)
    })
}

fn configs() -> Vec<Config> {
    let mut default_scheduler = Config::default();
    default_scheduler.pod_groups.scheduler_names = vec!["default-scheduler".into()];
    let mut single_host = Config::default();
    single_host.indices.single_host_replica_index = true;
    vec![Config::default(), default_scheduler, single_host]
}

proptest::proptest! {
    /// Triage is sound: what it clears, the full path leaves alone without a word.
    #[test]
    fn what_triage_clears_the_full_path_leaves_alone((kind, object) in object()) {
        use crate::admission::review::{AdmissionRequest, GroupVersionKind};
        use crate::admission::{self, Outcome};
        let group = if kind == Kind::RayJob { "ray.io" } else { "" };
        let req = AdmissionRequest {
            uid: "u".into(),
            kind: GroupVersionKind { group: group.into(), version: "v1".into(), kind: kind.as_str().into() },
            namespace: "ns".into(),
            operation: "CREATE".into(),
            ..AdmissionRequest::default()
        }
        .with_object(&object);
        for cfg in configs() {
            let world = world();
            let Some(settled) = admission::settled(&req, &cfg, &world, None) else {
                continue;
            };
            if settled.outcome != Outcome::Unchanged {
                continue;
            }
            let full = futures::executor::block_on(admission::work(&req, &cfg, &world, None));
            proptest::prop_assert_eq!(full.outcome, Outcome::Unchanged, "{}", object);
            proptest::prop_assert!(full.verdict.warnings.is_empty(), "{} {:?}", object, full.verdict.warnings);
            proptest::prop_assert!(full.verdict.patch.is_none());
        }
    }
}

/// What the review's pass skipped unread can still be malformed: the full parse, when
/// a feature needs the whole object (here indices, for a Ray worker pod), says so. A pod
/// that only gets a group is planned and its group made from the fields triage read
/// (what a group needs of the containers comes from the stored pod): the rest is the
/// API server's, which decoded the object before asking.
#[rstest]
#[case::lone_surrogate(r#""\ud800""#)]
#[case::number_out_of_range("1e400")]
fn a_malformed_object_is_named_when_work_needs_it(#[case] bad: &str) {
    use crate::admission::{self, Outcome};
    let body = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","kind":{{"group":"","version":"v1","kind":"Pod"}},"operation":"CREATE","namespace":"ns","object":{{"metadata":{{"name":"p","labels":{{"ray.io/node-type":"worker"}}}},"spec":{{"schedulerName":"volcano","x":{bad}}}}}}}}}"#
    );
    fails_open_naming_the_leaf(&body);
    let group_only = body.replace(r#","labels":{"ray.io/node-type":"worker"}"#, "");
    let req = crate::admission::review::parse_review(group_only.into_bytes()).unwrap();
    let mut cfg = Config::default();
    let a = futures::executor::block_on(admission::admit(&req, &cfg, &world(), None));
    assert_eq!(a.outcome, Outcome::Mutated);
    cfg.pod_groups.create_at_admission = false;
    let a = futures::executor::block_on(admission::admit(&req, &cfg, &world(), None));
    assert_eq!(a.outcome, Outcome::Mutated);
}

#[test]
fn namespace_from_request_then_object() {
    let h = head(json!({"metadata": {"namespace": "obj"}, "spec": {}}));
    assert_eq!(h.namespace("req"), "req");
    assert_eq!(h.namespace(""), "obj");
    assert_eq!(Head::default().namespace(""), "default");
}

proptest::proptest! {
    /// A RayJob read whole in the review's pass is the object as a full parse sees it, and
    /// triage sees the same of it as a read that builds nothing.
    #[test]
    fn a_whole_read_is_the_object_and_triages_alike(
        (_, mut object) in object(),
        api_version in prop::sample::select(vec![json!("ray.io/v1"), json!("v1"), json!(7)]),
        kind in prop::sample::select(vec![json!("RayJob"), json!("Pod")]),
    ) {
        object["apiVersion"] = api_version.clone();
        object["kind"] = kind.clone();
        let text = object.to_string();
        let whole: Head = serde_json::from_str(&text).unwrap();
        let LazyHead(lazy) = serde_json::from_str(&text).unwrap();
        let ray_job = api_version == "ray.io/v1" && kind == "RayJob";
        prop_assert_eq!(whole.tree(), ray_job.then_some(&object));
        prop_assert_eq!(Head { tree: None, ..whole }, lazy);
    }
}

#[rstest]
#[case::api_server_order(r#"{"apiVersion":"ray.io/v1","kind":"RayJob","metadata":{"name":"j"},"spec":{"rayClusterSpec":{}}}"#, true)]
#[case::with_status(
    r#"{"apiVersion":"ray.io/v1","kind":"RayJob","metadata":{},"spec":{},"status":{}}"#,
    true
)]
#[case::kind_after_spec(
    r#"{"apiVersion":"ray.io/v1","spec":{"rayClusterSpec":{}},"kind":"RayJob","metadata":{}}"#,
    false
)]
#[case::unknown_field(
    r#"{"apiVersion":"ray.io/v1","kind":"RayJob","metadata":{},"x":1,"spec":{}}"#,
    false
)]
#[case::other_version(
    r#"{"apiVersion":"ray.io/v1alpha1","kind":"RayJob","metadata":{},"spec":{}}"#,
    false
)]
fn a_ray_job_is_read_whole_only_when_its_fields_allow(#[case] text: &str, #[case] whole: bool) {
    let h: Head = serde_json::from_str(text).unwrap();
    assert_eq!(h.tree().is_some(), whole);
    if let Some(tree) = h.tree() {
        assert_eq!(tree, &serde_json::from_str::<Value>(text).unwrap());
    }
}

/// A leaf serde_json cannot build in a RayJob read whole: the review still parses, and
/// the request fails open naming the problem, as for any other object.
#[rstest]
#[case::lone_surrogate(r#""\ud800""#)]
#[case::number_out_of_range("1e400")]
fn a_malformed_ray_job_fails_open(#[case] bad: &str) {
    let body = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","kind":{{"group":"ray.io","version":"v1","kind":"RayJob"}},"operation":"CREATE","namespace":"ns","object":{{"apiVersion":"ray.io/v1","kind":"RayJob","metadata":{{"name":"j"}},"spec":{{"entrypoint":{bad},"rayClusterSpec":{{"headGroupSpec":{{}}}}}}}}}}}}"#
    );
    let req = fails_open_naming_the_leaf(&body);
    assert!(req.head.as_ref().is_some_and(|h| h.tree().is_none()));
}

/// The review of `body` parses, and its object fails open with a warning that it does
/// not parse.
fn fails_open_naming_the_leaf(body: &str) -> crate::admission::AdmissionRequest {
    use crate::admission::{self, Outcome};
    let req = crate::admission::review::parse_review(body.to_string().into_bytes())
        .expect("the review parses");
    let a = futures::executor::block_on(admission::admit(&req, &Config::default(), &world(), None));
    assert_eq!(a.outcome, Outcome::Failed(crate::cause::Cause::OddObject));
    assert!(a.verdict.allowed);
    assert!(
        a.verdict.warnings[0].contains("does not parse"),
        "{:?}",
        a.verdict.warnings
    );
    req
}
