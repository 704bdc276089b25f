//! The router in process: every kind of answer, no sockets.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use data_encoding::BASE64;
use rstest::rstest;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::{AppState, Limits, router};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::world::{MemoryWorld, WorldError};

fn state(world: MemoryWorld, config: Config) -> Arc<AppState<MemoryWorld>> {
    Arc::new(AppState {
        config: Arc::new(config),
        world: Arc::new(world),
        metrics: Arc::new(Metrics::default()),
        max_body_bytes: 64 * 1024,
        body_timeout: Duration::from_secs(1),
        limits: Limits::new(1024 * 1024, 64),
    })
}

fn sample(name: &str) -> Value {
    let text = match name {
        "rayjob" => include_str!("../../../deploy/samples/rayjob-run-a.yaml"),
        "pod" => include_str!("../../../deploy/samples/volcano-pod.yaml"),
        _ => unreachable!(),
    };
    serde_norway::from_str(text).unwrap()
}

fn review(group: &str, version: &str, kind: &str, op: &str, object: Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "uid-1", "kind": {"group": group, "version": version, "kind": kind},
        "operation": op, "namespace": "team", "object": object}})
}

async fn call(
    state: Arc<AppState<MemoryWorld>>,
    method: Method,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("content-length", body.len())
        .body(Body::from(body))
        .unwrap();
    let res = router(state).oneshot(req).await.unwrap();
    let status = res.status();
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 22)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn post(state: Arc<AppState<MemoryWorld>>, body: &Value) -> Value {
    let (status, v) = call(
        state,
        Method::POST,
        "/mutate",
        "application/json",
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    v["response"].clone()
}

/// Posts a review and, when admitted, stores the patched object as the API server would
/// (and runs what the provisioner does with a stored object). Returns the response.
async fn post_and_store(state: Arc<AppState<MemoryWorld>>, body: &Value) -> Value {
    let r = post(state.clone(), body).await;
    if r["allowed"] == true {
        let mut object = body["request"]["object"].clone();
        object["metadata"]["namespace"] = body["request"]["namespace"].clone();
        if r.get("patch").is_some() {
            let ops: json_patch::Patch = serde_json::from_value(json!(patch_of(&r))).unwrap();
            json_patch::patch(&mut object, &ops).unwrap();
        }
        state.world.store(&object, &state.config);
    }
    r
}

fn patch_of(response: &Value) -> Vec<Value> {
    let Some(p) = response["patch"].as_str() else {
        return vec![];
    };
    serde_json::from_slice(&BASE64.decode(p.as_bytes()).unwrap()).unwrap()
}

#[rstest]
#[case::not_json(Method::POST, "/mutate", "application/json", b"{nope".to_vec(), 400, "not_json")]
#[case::not_review(Method::POST, "/mutate", "application/json", br#"{"kind":"Pod"}"#.to_vec(), 400, "not_review")]
#[case::no_request(Method::POST, "/mutate", "application/json", br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(), 400, "no_request")]
#[case::wrong_type(Method::POST, "/mutate", "text/plain", b"{}".to_vec(), 415, "content_type")]
#[case::too_large(Method::POST, "/mutate", "application/json", vec![b' '; 65 * 1024], 413, "too_large")]
#[case::unknown_path(Method::POST, "/validate", "application/json", b"{}".to_vec(), 404, "not_found")]
#[tokio::test]
async fn bad_requests_get_clear_answers(
    #[case] method: Method,
    #[case] path: &str,
    #[case] content_type: &str,
    #[case] body: Vec<u8>,
    #[case] code: u16,
    #[case] cause: &str,
) {
    let s = state(MemoryWorld::default(), Config::default());
    let (status, v) = call(s.clone(), method, path, content_type, body).await;
    assert_eq!(status.as_u16(), code);
    assert_eq!(v["cause"], cause, "{v}");
    assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()));
    if path == "/mutate" {
        assert!(s.metrics.encode().contains(&format!("cause=\"{cause}\"")));
    }
}

#[tokio::test]
async fn wrong_method_is_405() {
    let s = state(MemoryWorld::default(), Config::default());
    let (status, _) = call(s, Method::GET, "/mutate", "application/json", vec![]).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn rayjob_create_is_rewritten_and_its_cluster_made_only_once_stored() {
    let s = state(MemoryWorld::default(), Config::default());
    let body = review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob"));
    post(s.clone(), &body).await;
    assert!(
        s.world.created().is_empty(),
        "admission alone (a review anyone can forge) makes nothing"
    );
    let r = post_and_store(s.clone(), &body).await;
    assert_eq!(r["uid"], "uid-1");
    assert_eq!(r["allowed"], true);
    assert_eq!(r["patchType"], "JSONPatch");
    let ops = patch_of(&r);
    assert!(
        ops.iter()
            .any(|o| o["op"] == "remove" && o["path"] == "/spec/rayClusterSpec")
    );
    assert!(ops.iter().any(|o| o["path"] == "/spec/clusterSelector"));
    let created = s.world.created();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0]["kind"], "RayCluster");
    assert_eq!(created[0]["metadata"]["namespace"], "team");
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap()
            .contains("shared RayCluster")
    );
}

#[tokio::test]
async fn dry_run_answers_the_patch_and_creates_nothing() {
    let s = state(MemoryWorld::default(), Config::default());
    let mut body = review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob"));
    body["request"]["dryRun"] = json!(true);
    let r = post(s.clone(), &body).await;
    assert!(!patch_of(&r).is_empty());
    let mut body = review("", "v1", "Pod", "CREATE", sample("pod"));
    body["request"]["dryRun"] = json!(true);
    let r = post(s.clone(), &body).await;
    assert!(!patch_of(&r).is_empty());
    assert!(s.world.created().is_empty());
    let queued = |s: &Arc<AppState<MemoryWorld>>| s.world.events.lock().unwrap().len();
    assert_eq!(queued(&s), 0, "a dry run queues no event");
    // The same RayJob for real does.
    let body = review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob"));
    post(s.clone(), &body).await;
    assert_eq!(queued(&s), 1);
}

/// The group exists when the pod's admission ends (Volcano's own webhook validates the
/// pod after rayshare), labelled as rayshare's and not yet taken up by a stored pod.
#[tokio::test]
async fn volcano_pod_gets_its_pod_group_during_admission() {
    let s = state(MemoryWorld::default(), Config::default());
    let mut body = review("", "v1", "Pod", "CREATE", sample("pod"));
    body["request"]["dryRun"] = json!(true);
    post(s.clone(), &body).await;
    assert!(s.world.created().is_empty(), "a dry run makes nothing");
    body["request"]["dryRun"] = json!(false);
    let r = post(s.clone(), &body).await;
    let ops = patch_of(&r);
    let name = ops
        .iter()
        .find(|o| o["path"].as_str().unwrap().ends_with("group-name"))
        .and_then(|o| o["value"].as_str())
        .unwrap_or_else(|| panic!("{ops:?}"));
    let created = s.world.created();
    assert_eq!(created.len(), 1);
    let group = &created[0];
    assert_eq!(
        (&group["kind"], &group["metadata"]["name"]),
        (&json!("PodGroup"), &json!(name))
    );
    assert_eq!(
        group["metadata"]["labels"]["rayshare.io/instance"],
        "rayshare"
    );
    // From the containers, which triage does not read.
    assert_eq!(
        group["spec"]["minResources"],
        json!({"cpu": "2", "memory": "1073741824"})
    );
    assert!(
        group["metadata"]["annotations"]
            .get("rayshare.io/pod-uid")
            .is_none()
    );
    // A retried admission finds it and names it again.
    let again = post(s.clone(), &body).await;
    assert_eq!(patch_of(&again), ops);
    assert_eq!(s.world.created().len(), 1);
}

/// With `podGroups.createAtAdmission: false` the group is made only from the stored pod.
#[tokio::test]
async fn volcano_pod_group_from_the_stored_pod_only_when_configured() {
    let mut config = Config::default();
    config.pod_groups.create_at_admission = false;
    let s = state(MemoryWorld::default(), config);
    let body = review("", "v1", "Pod", "CREATE", sample("pod"));
    post(s.clone(), &body).await;
    assert!(
        s.world.created().is_empty(),
        "admission alone makes nothing"
    );
    post_and_store(s.clone(), &body).await;
    let created = s.world.created();
    assert_eq!(created[0]["kind"], "PodGroup");
    assert!(
        created[0]["metadata"]["annotations"]
            .get("rayshare.io/pod-uid")
            .is_some()
    );
}

/// A group that cannot be made leaves the pod as it was (no group named on it, so
/// Volcano's own controller groups it), with a warning and the API's cause.
#[tokio::test]
async fn a_group_that_cannot_be_made_leaves_the_pod_unchanged() {
    let world = MemoryWorld {
        fail_writes: Some(WorldError::Forbidden("quota".into())),
        ..MemoryWorld::default()
    };
    let s = state(world, Config::default());
    let r = post(s.clone(), &review("", "v1", "Pod", "CREATE", sample("pod"))).await;
    assert_eq!(r["allowed"], true);
    assert!(r.get("patch").is_none(), "{r}");
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap()
            .contains("could not be made")
    );
    assert!(s.metrics.encode().contains("cause=\"api_forbidden\""));
}

#[rstest]
#[case::update(review("ray.io", "v1", "RayJob", "UPDATE", sample("rayjob")))]
#[case::other_kind(review("apps", "v1", "Deployment", "CREATE", json!({"spec": {}})))]
#[case::other_version(review("ray.io", "v1alpha1", "RayJob", "CREATE", sample("rayjob")))]
#[case::plain_pod(review("", "v1", "Pod", "CREATE", json!({"metadata": {"name": "p"}, "spec": {"containers": []}})))]
#[tokio::test]
async fn anything_else_passes_unchanged(#[case] body: Value) {
    let s = state(MemoryWorld::default(), Config::default());
    let r = post(s.clone(), &body).await;
    assert_eq!(r["allowed"], true);
    assert!(r.get("patch").is_none());
    assert!(s.world.created().is_empty());
}

#[rstest]
#[case::rayjob_spec_string(review("ray.io", "v1", "RayJob", "CREATE", json!({"spec": "odd"})))]
#[case::rayjob_no_object(review("ray.io", "v1", "RayJob", "CREATE", Value::Null))]
#[case::pod_spec_number(review("", "v1", "Pod", "CREATE", json!({"spec": 3})))]
#[tokio::test]
async fn odd_objects_pass_with_a_warning(#[case] body: Value) {
    let s = state(MemoryWorld::default(), Config::default());
    let r = post(s.clone(), &body).await;
    assert_eq!(r["allowed"], true);
    assert!(r.get("patch").is_none());
    assert!(!r["warnings"].as_array().unwrap().is_empty());
    assert!(s.metrics.encode().contains("outcome=\"failed_open\""));
}

/// Admission of jobs (and of group pods when groups are made from stored pods only)
/// writes nothing, so an API server that refuses every write cannot fail it: the
/// provisioners make the objects once the admitted ones are stored.
#[rstest]
#[case::rayjob(review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob")))]
#[case::pod(review("", "v1", "Pod", "CREATE", sample("pod")))]
#[tokio::test]
async fn admission_needs_no_api_writes(#[case] body: Value) {
    let world = MemoryWorld {
        fail_writes: Some(WorldError::Unreachable("connection refused".into())),
        ..MemoryWorld::default()
    };
    let mut config = Config::default();
    config.pod_groups.create_at_admission = false;
    let s = state(world, config);
    let r = post(s.clone(), &body).await;
    assert_eq!(r["allowed"], true);
    assert!(r.get("patch").is_some(), "{r}");
    assert!(!s.metrics.encode().contains("rayshare_errors_total"));
}

#[tokio::test]
async fn an_odd_pod_can_be_denied_when_configured() {
    let mut config = Config::default();
    config.pod_groups.deny_on_error = true;
    let s = state(MemoryWorld::default(), config);
    let mut pod = sample("pod");
    pod["spec"] = json!(7);
    let r = post(s, &review("", "v1", "Pod", "CREATE", pod)).await;
    assert_eq!(r["allowed"], false, "{r}");
    assert!(
        r["status"]["message"]
            .as_str()
            .unwrap()
            .contains("not understood")
    );
}

/// Edits every stored object (the cluster of the first job), then admits the job again.
async fn repost_after_editing_clusters(
    s: Arc<AppState<MemoryWorld>>,
    edit: impl Fn(&mut Value),
) -> Value {
    s.world.objects.lock().unwrap().values_mut().for_each(edit);
    post_and_store(
        s,
        &review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob")),
    )
    .await
}

#[tokio::test]
async fn a_foreign_cluster_of_the_same_name_is_never_taken_over() {
    let s = state(MemoryWorld::default(), Config::default());
    let first = post_and_store(
        s.clone(),
        &review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob")),
    )
    .await;
    assert!(first.get("patch").is_some());
    // Replace the cluster with a foreign one of the same name.
    let r = repost_after_editing_clusters(s, |v| {
        v["metadata"]["labels"] = json!({"owner": "someone-else"})
    })
    .await;
    assert!(r.get("patch").is_none());
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap()
            .contains("did not create")
    );
}

#[tokio::test]
async fn features_can_be_switched_off() {
    let mut config = Config::default();
    config.shared_clusters.enabled = false;
    config.pod_groups.enabled = false;
    let s = state(MemoryWorld::default(), config);
    for body in [
        review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob")),
        review("", "v1", "Pod", "CREATE", sample("pod")),
    ] {
        assert!(post(s.clone(), &body).await.get("patch").is_none());
    }
    assert!(s.world.created().is_empty());
}

/// Five jobs of one config, at most two per cluster, fill the pool's members in order;
/// `stored`: each job is stored (and its cluster made) before the next arrives.
async fn five_jobs_on_a_pool_of_two(stored: bool) -> Arc<AppState<MemoryWorld>> {
    let mut config = Config::default();
    config.shared_clusters.max_jobs_per_cluster = 2;
    let s = state(MemoryWorld::default(), config);
    let mut selected = Vec::new();
    for i in 0..5 {
        let mut job = sample("rayjob");
        job["metadata"]["name"] = json!(format!("job-{i}"));
        let body = review("ray.io", "v1", "RayJob", "CREATE", job);
        let r = if stored {
            post_and_store(s.clone(), &body).await
        } else {
            post(s.clone(), &body).await
        };
        let op = patch_of(&r)
            .into_iter()
            .find(|o| o["path"] == "/spec/clusterSelector")
            .unwrap();
        selected.push(op["value"]["ray.io/cluster"].as_str().unwrap().to_string());
    }
    let base = &selected[0];
    let want = [
        base.clone(),
        base.clone(),
        format!("{base}-1"),
        format!("{base}-1"),
        format!("{base}-2"),
    ];
    assert_eq!(selected, want);
    s
}

/// A burst that arrives before any member exists is spread as a trickle would be: the
/// jobs admitted to a member count against it before it is made.
#[tokio::test]
async fn a_burst_before_the_clusters_exist_fills_each_member_once() {
    let s = five_jobs_on_a_pool_of_two(false).await;
    assert!(s.world.created().is_empty(), "admission made a cluster");
}

#[tokio::test]
async fn a_full_cluster_sends_the_next_job_to_the_next_pool_member() {
    let s = five_jobs_on_a_pool_of_two(true).await;
    let created: Vec<Value> = s.world.created();
    assert_eq!(created.len(), 3);
    // Pool members are the same config: same spec and digest, different names.
    assert_eq!(created[0]["spec"], created[2]["spec"]);
    assert_eq!(
        created[0]["metadata"]["annotations"]["rayshare.io/config-digest"],
        created[2]["metadata"]["annotations"]["rayshare.io/config-digest"]
    );
}

/// Member 0 was reclaimed while member 1 stayed warm with room: the next job goes to
/// member 1, not to a cold start of member 0.
#[tokio::test]
async fn a_warm_member_is_preferred_to_a_missing_lower_one() {
    let s = five_jobs_on_a_pool_of_two(true).await;
    let base = {
        let objects = s.world.objects.lock().unwrap();
        let mut names: Vec<String> = objects.keys().map(|(_, _, n)| n.clone()).collect();
        names.sort();
        names[0].clone()
    };
    // Member 0 and its two jobs are gone (reclaimed once they ended).
    s.world
        .objects
        .lock()
        .unwrap()
        .retain(|(_, _, name), _| *name != base);
    s.world.jobs.lock().unwrap().retain(|(_, c), _| *c != base);
    let mut job = sample("rayjob");
    job["metadata"]["name"] = json!("job-5");
    let r = post(s, &review("ray.io", "v1", "RayJob", "CREATE", job)).await;
    let op = patch_of(&r)
        .into_iter()
        .find(|o| o["path"] == "/spec/clusterSelector")
        .unwrap();
    // Member 1 holds two jobs (full), member 2 one: member 2 gets it.
    assert_eq!(op["value"]["ray.io/cluster"], json!(format!("{base}-2")));
}

#[rstest]
#[case::deleting("deletionTimestamp")]
#[case::marked_for_reclaim("annotations")]
#[tokio::test]
async fn a_cluster_on_its_way_out_sends_the_job_to_the_next_pool_member(#[case] how: &str) {
    let s = state(MemoryWorld::default(), Config::default());
    let body = review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob"));
    let first = post_and_store(s.clone(), &body).await;
    let r = repost_after_editing_clusters(s, |v| match how {
        "deletionTimestamp" => v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z"),
        _ => {
            v["metadata"]["annotations"]["rayshare.io/reclaim-marked-at"] =
                json!("2026-01-01T00:00:00Z")
        }
    })
    .await;
    let selected = |r: &Value| {
        patch_of(r)
            .into_iter()
            .find(|o| o["path"] == "/spec/clusterSelector")
            .map(|o| o["value"]["ray.io/cluster"].clone())
            .unwrap()
    };
    let base = selected(&first);
    assert_eq!(selected(&r), json!(format!("{}-1", base.as_str().unwrap())));
}

/// KubeRay makes a cluster's first worker pods a moment after the cluster: a cache that
/// has not caught up is not a reason to leave a slice's pod without indices.
#[rstest]
#[case::cache_caught_up(false)]
#[case::cache_behind(true)]
#[tokio::test]
async fn a_worker_of_a_cluster_the_cache_has_not_seen_still_gets_indices(#[case] behind: bool) {
    let world = MemoryWorld {
        cache_behind: behind,
        ..MemoryWorld::default()
    };
    let cluster = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "tpu", "namespace": "team", "uid": "u-tpu"},
        "spec": {"workerGroupSpecs": [{"groupName": "a", "replicas": 2, "numOfHosts": 4}]}});
    world
        .objects
        .lock()
        .unwrap()
        .insert(("RayCluster".into(), "team".into(), "tpu".into()), cluster);
    let s = state(world, Config::default());
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "tpu-a-",
            "labels": {"ray.io/cluster": "tpu", "ray.io/group": "a", "ray.io/node-type": "worker"}},
        "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}]}});
    let r = post(s, &review("", "v1", "Pod", "CREATE", pod)).await;
    let ops = patch_of(&r);
    let labelled = |key: &str| {
        ops.iter()
            .any(|o| o.to_string().contains(&key.replace('/', "~1")))
    };
    assert!(labelled("ray.io/worker-group-replica-index"), "{r}");
    assert!(labelled("ray.io/replica-host-index"), "{r}");
}

fn state_with_limits(limits: Limits) -> Arc<AppState<MemoryWorld>> {
    let s = state(MemoryWorld::default(), Config::default());
    Arc::new(AppState {
        config: s.config.clone(),
        world: s.world.clone(),
        metrics: s.metrics.clone(),
        max_body_bytes: s.max_body_bytes,
        body_timeout: s.body_timeout,
        limits,
    })
}

/// Past `--max-in-flight`, a request that needs work passes unchanged with a warning.
#[tokio::test]
async fn past_the_admission_bound_objects_pass_unchanged() {
    let s = state_with_limits(Limits::new(1024 * 1024, 0));
    let body = review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob"));
    let r = post(s.clone(), &body).await;
    assert_eq!((r["allowed"].clone(), r.get("patch")), (json!(true), None));
    assert!(r["warnings"][0].as_str().unwrap().contains("overloaded"));
    assert!(s.metrics.encode().contains("cause=\"overloaded\""));
}

/// Past `--max-buffered-bytes`, a body is refused before it is held (503: the API server
/// applies the webhook's failurePolicy); the budget comes back once answered. Small bodies
/// have a share of their own, which large ones cannot spend.
#[tokio::test]
async fn past_the_buffered_bytes_a_request_is_refused_at_once() {
    let s = state_with_limits(Limits::new(2048 * 1024, 64));
    let large = s.limits.buffered_kib.available_permits();
    assert_eq!((large, s.limits.small_kib.available_permits()), (1536, 512));
    // The large share spent (as by a flood of large reviews in flight).
    let flood = s
        .limits
        .buffered_kib
        .clone()
        .try_acquire_many_owned(1500)
        .unwrap();
    let mut job = sample("rayjob");
    job["metadata"]["annotations"] = json!({"big": "x".repeat(300 * 1024)});
    let big = review("ray.io", "v1", "RayJob", "CREATE", job).to_string();
    let (status, v) = call(
        s.clone(),
        Method::POST,
        "/mutate",
        "application/json",
        big.into_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(v["cause"], "overloaded");
    let small = review("", "v1", "Pod", "CREATE", sample("pod"));
    assert_eq!(
        post(s.clone(), &small).await["allowed"],
        true,
        "not crowded out"
    );
    drop(flood);
    assert_eq!(s.limits.buffered_kib.available_permits(), large);
    assert_eq!(s.limits.small_kib.available_permits(), 512);
}
