use super::*;
use crate::config::SharedClusters;
use rstest::rstest;
use serde_json::json;

fn sample(name: &str) -> Value {
    let text = match name {
        "a" => include_str!("../../../deploy/samples/rayjob-run-a.yaml"),
        "b" => include_str!("../../../deploy/samples/rayjob-run-b.yaml"),
        "other" => include_str!("../../../deploy/samples/rayjob-other-config.yaml"),
        _ => unreachable!(),
    };
    serde_norway::from_str(text).unwrap()
}

/// The plan of `job` in namespace "ns" with the default config.
fn plan_of(job: &Value) -> Result<Plan, PlanError> {
    plan(
        job,
        "ns",
        &SharedClusters::default(),
        "rayshare.io/skip",
        super::tests_by(),
    )
}

fn rewrite(job: &Value) -> Rewrite {
    match plan_of(job).unwrap() {
        Plan::Rewrite(r) => *r,
        Plan::Skip(why) => panic!("skipped: {why:?}"),
    }
}

/// Golden names: a change here renames every shared cluster in production (the old ones
/// go idle and are reclaimed). Pinned for canonical form v2 (order-free env/tolerations).
#[test]
fn golden_cluster_names() {
    assert_eq!(rewrite(&sample("a")).name, "ray-ufob4wt5jxr2nhmcdhqx");
    assert_eq!(rewrite(&sample("other")).name, "ray-c6jvbswfnndz3s62zjj6");
}

#[test]
fn two_runs_of_one_config_share_a_cluster() {
    let (a, b) = (rewrite(&sample("a")), rewrite(&sample("b")));
    assert_eq!(a.name, b.name);
    assert_eq!(a.digest, b.digest);
    assert_eq!(a.cluster, b.cluster);
}

#[rstest]
#[case("/spec/rayClusterSpec/headGroupSpec/template/spec/containers/0/image", json!("other:1"))]
#[case("/spec/rayClusterSpec/workerGroupSpecs/0/replicas", json!(3))]
#[case("/spec/rayClusterSpec/headGroupSpec/rayStartParams/num-cpus", json!("0"))]
#[case("/spec/rayClusterSpec/headGroupSpec/template/spec/containers/0/env/6/value", json!("10"))]
#[case("/spec/rayClusterSpec/workerGroupSpecs/0/template/spec/containers/0/resources/requests/cpu", json!("2"))]
#[case("/metadata/labels/ray.io~1scheduler-name", json!("volcano"))]
fn real_config_changes_give_another_cluster(#[case] pointer: &str, #[case] value: Value) {
    let base = rewrite(&sample("a")).name;
    let mut job = sample("a");
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let key = key.replace("~1", "/");
    let target = job
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("{parent}"));
    if let Some(items) = target.as_array_mut() {
        items[key.parse::<usize>().unwrap()] = value;
    } else {
        target[key.as_str()] = value;
    }
    assert_ne!(rewrite(&job).name, base, "{pointer}");
}

#[test]
fn the_job_is_rewritten_onto_the_selector() {
    let r = rewrite(&sample("a"));
    let spec = &r.job["spec"];
    assert!(spec.get("rayClusterSpec").is_none());
    assert_eq!(spec["clusterSelector"], json!({"ray.io/cluster": r.name}));
    assert_eq!(spec["shutdownAfterJobFinishes"], json!(false));
    assert_eq!(spec["ttlSecondsAfterFinished"], json!(0));
    assert_eq!(
        r.job["metadata"]["labels"]["rayshare.io/cluster"],
        json!(r.name)
    );
    // Everything else of the job is kept.
    assert_eq!(spec["entrypoint"], sample("a")["spec"]["entrypoint"]);
    assert_eq!(
        spec["submitterPodTemplate"],
        sample("a")["spec"]["submitterPodTemplate"]
    );
}

#[test]
fn run_scoped_env_travels_in_the_runtime_env() {
    let r = rewrite(&sample("a"));
    let env: Value =
        serde_norway::from_str(r.job["spec"]["runtimeEnvYAML"].as_str().unwrap()).unwrap();
    assert_eq!(env["pip"][0], "numpy==2.1.0");
    let vars = &env["env_vars"];
    assert_eq!(vars["RUN_NAME"], "a1b2c3");
    assert_eq!(vars["ACTION_NAME"], "a0");
    assert_eq!(vars["_U_RUN_BASE"], "s3://flyte/metadata/a1b2c3");
    assert_eq!(vars["FLYTE_INTERNAL_EXECUTION_ID"], "a1b2c3");
    assert_eq!(vars["FLYTE_INTERNAL_TASK_NAME"], "train");
    assert_eq!(vars["FLYTE_ATTEMPT_NUMBER"], "0");
    assert!(vars.get("LOG_LEVEL").is_none());
}

#[test]
fn the_cluster_has_no_run_scoped_parts() {
    let r = rewrite(&sample("a"));
    let text = serde_json::to_string(&r.cluster).unwrap();
    assert!(!text.contains("a1b2c3"), "{text}");
    let head = &r.cluster["spec"]["headGroupSpec"]["template"];
    let env: Vec<&str> = head["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(env, ["LOG_LEVEL", "_F_PN"]);
    assert_eq!(
        head["metadata"]["labels"],
        json!({"project": "flytesnacks", "domain": "development"})
    );
    let meta = &r.cluster["metadata"];
    assert_eq!(meta["labels"]["app.kubernetes.io/managed-by"], "rayshare");
    assert_eq!(
        meta["annotations"]["rayshare.io/config-digest"],
        json!(r.digest)
    );
    assert!(meta.get("ownerReferences").is_none());
    assert!(meta.get("finalizers").is_none());
    assert_eq!(meta["namespace"], "ns");
}

#[test]
fn user_runtime_env_values_win() {
    let mut job = sample("a");
    job["spec"]["runtimeEnvYAML"] = json!("env_vars:\n  RUN_NAME: pinned\n");
    let r = rewrite(&job);
    let env: Value =
        serde_norway::from_str(r.job["spec"]["runtimeEnvYAML"].as_str().unwrap()).unwrap();
    assert_eq!(env["env_vars"]["RUN_NAME"], "pinned");
    assert_eq!(env["env_vars"]["ACTION_NAME"], "a0");
    assert!(r.warnings.iter().any(|w| w.contains("RUN_NAME")));
}

#[test]
fn value_from_run_scoped_env_stays_with_a_warning() {
    let mut job = sample("a");
    job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"][0] = json!({"name": "RUN_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['run']"}}});
    let r = rewrite(&job);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("RUN_NAME") && w.contains("valueFrom"))
    );
    let env: Value =
        serde_norway::from_str(r.job["spec"]["runtimeEnvYAML"].as_str().unwrap()).unwrap();
    // The worker's literal value still travels.
    assert_eq!(env["env_vars"]["RUN_NAME"], "a1b2c3");
}

#[rstest]
#[case::sidecar(json!({"spec": {"submissionMode": "SidecarMode"}}), "SidecarMode")]
#[case::suspended(json!({"spec": {"suspend": true}}), "suspended")]
#[case::backoff(json!({"spec": {"backoffLimit": 2}}), "backoffLimit")]
#[case::delete_cluster(json!({"spec": {"deletionStrategy": {"onSuccess": {"policy": "DeleteCluster"}, "onFailure": {"policy": "DeleteNone"}}}}), "deletionStrategy")]
#[case::delete_workers_rule(json!({"spec": {"deletionStrategy": {"deletionRules": [{"policy": "DeleteWorkers", "condition": {"jobStatus": "FAILED"}}]}}}), "deletionStrategy")]
#[case::v1_4_delete_policy(json!({"spec": {"deletionPolicy": "DeleteWorkers"}}), "deletionPolicy")]
#[case::ray_metadata(json!({"spec": {"metadata": {"owner": "team-a"}}}), "spec.metadata")]
#[case::kueue(json!({"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}}}), "Kueue")]
#[case::managed_by(json!({"spec": {"managedBy": "kueue.x-k8s.io/multikueue"}}), "managed by")]
#[case::opt_out(json!({"metadata": {"annotations": {"rayshare.io/skip": "true"}}}), "rayshare.io/skip")]
fn blocked_jobs_are_skipped_with_a_reason(#[case] overlay: Value, #[case] reason: &str) {
    let mut job = sample("a");
    json_patch::merge(&mut job, &overlay);
    match plan_of(&job).unwrap() {
        Plan::Skip(Some(why)) => assert!(why.contains(reason), "{why}"),
        other => panic!("expected a skip, got {other:?}"),
    }
}

#[rstest]
#[case::empty_metadata(json!({"spec": {"metadata": {}}}))]
#[case::delete_self(json!({"spec": {"deletionPolicy": "DeleteSelf"}}))]
#[case::delete_none_rules(json!({"spec": {"deletionStrategy": {"onSuccess": {"policy": "DeleteNone"}, "onFailure": {"policy": "DeleteSelf"}}}}))]
fn harmless_near_blockers_are_still_shared(#[case] overlay: Value) {
    let mut job = sample("a");
    json_patch::merge(&mut job, &overlay);
    let p = plan_of(&job);
    assert!(matches!(p, Ok(Plan::Rewrite(_))), "{p:?}");
}

#[rstest]
#[case::has_selector(json!({"spec": {"clusterSelector": {"ray.io/cluster": "x"}}}))]
#[case::no_spec(json!({"spec": {"rayClusterSpec": null}}))]
fn nothing_to_do_is_quiet(#[case] overlay: Value) {
    let mut job = sample("a");
    json_patch::merge(&mut job, &overlay);
    let p = plan_of(&job).unwrap();
    assert_eq!(p, Plan::Skip(None));
}

#[test]
fn the_rewritten_job_is_left_alone_on_reinvocation() {
    let r = rewrite(&sample("a"));
    let again = plan_of(&r.job).unwrap();
    assert_eq!(again, Plan::Skip(None));
}

#[rstest]
#[case(json!({"spec": "x"}))]
#[case(json!({"spec": {"rayClusterSpec": "x"}}))]
#[case(json!({"spec": {"rayClusterSpec": {"workerGroupSpecs": []}}}))]
#[case(json!({"spec": {"rayClusterSpec": {"headGroupSpec": {}}, "runtimeEnvYAML": "- a"}}))]
fn odd_shapes_are_errors(#[case] job: Value) {
    let mut job = job;
    if job["spec"]["rayClusterSpec"]["headGroupSpec"].is_object() {
        job["spec"]["rayClusterSpec"]["headGroupSpec"] =
            sample("a")["spec"]["rayClusterSpec"]["headGroupSpec"].clone();
    }
    assert!(plan_of(&job).is_err());
}

/// A cluster serves a job only if rayshare made it for exactly that config.
#[test]
fn existing_clusters_are_classified() {
    use crate::domain::cluster::ClusterInfo;
    let r = rewrite(&sample("a"));
    assert!(ClusterInfo::from_value(&r.cluster).serves(&r.digest));
    assert!(!ClusterInfo::from_value(&r.cluster).serves("other"));
    let foreign = json!({"metadata": {"name": r.name, "annotations": {"rayshare.io/config-digest": r.digest}}});
    assert!(!ClusterInfo::from_value(&foreign).serves(&r.digest));
}

#[test]
fn stand_in_spec_is_head_only_without_resources() {
    let cfg = SharedClusters {
        volcano_stand_in_spec: true,
        ..SharedClusters::default()
    };
    let Plan::Rewrite(r) = plan(&sample("a"), "ns", &cfg, "x", super::tests_by()).unwrap() else {
        panic!()
    };
    let stand_in = &r.job["spec"]["rayClusterSpec"];
    assert!(stand_in.get("workerGroupSpecs").is_none());
    let head = &stand_in["headGroupSpec"]["template"]["spec"]["containers"][0];
    assert_eq!(head["name"], "ray-head");
    assert!(head.get("resources").is_none());
    assert!(r.job["spec"]["clusterSelector"].is_object());
}

#[test]
fn autoscaling_can_be_forced_on() {
    let mut cfg = SharedClusters::default();
    cfg.autoscaling.enabled = true;
    let Plan::Rewrite(r) = plan(&sample("a"), "ns", &cfg, "x", super::tests_by()).unwrap() else {
        panic!()
    };
    assert_eq!(r.cluster["spec"]["enableInTreeAutoscaling"], json!(true));
    assert_eq!(
        r.cluster["spec"]["autoscalerOptions"]["idleTimeoutSeconds"],
        json!(60)
    );
    assert_ne!(r.name, rewrite(&sample("a")).name);
}

/// The token that ties the Ray submission to its RayJob: label and runtime env agree, a
/// copied value is replaced, and an odd request uid ties nothing.
#[rstest]
#[case("uid-1", Some("uid-1"))]
#[case("not a label value", None)]
fn jobs_carry_their_admission_token(#[case] uid: &str, #[case] token: Option<&str>) {
    let mut job = sample("a");
    job["spec"]["runtimeEnvYAML"] = json!("env_vars:\n  RAYSHARE_ADMISSION: copied\n");
    let cfg = SharedClusters::default();
    let Plan::Rewrite(r) = plan(
        &job,
        "ns",
        &cfg,
        "x",
        Admitter {
            instance: "rayshare",
            request_uid: uid,
        },
    )
    .unwrap() else {
        panic!()
    };
    assert_eq!(job_life::job_token(&r.job), token);
    let env: Value =
        serde_json::from_str(r.job["spec"]["runtimeEnvYAML"].as_str().unwrap()).unwrap();
    let carried = env["env_vars"][job_life::TOKEN_ENV].as_str();
    let expected = token.map(|t| format!("rayshare/ns/{t}"));
    assert_eq!(carried, Some(expected.as_deref().unwrap_or("copied")));
    let replaced = r
        .warnings
        .iter()
        .any(|w| w.contains("replaced runtime env"));
    assert_eq!(replaced, token.is_some());
}

#[rstest]
#[case(
    "pyflyte-fast-execute --additional-distribution s3://b/f.tar.gz --dest-dir . -- pyflyte-execute",
    "/tmp/rayshare-jobs",
    true
)]
#[case(
    "pyflyte-fast-execute --additional-distribution s3://b/f.tar.gz --dest-dir . -- pyflyte-execute",
    "",
    false
)]
#[case("python /app/main.py", "/tmp/rayshare-jobs", false)]
fn fast_registered_entrypoints_get_their_own_directory(
    #[case] entrypoint: &str,
    #[case] root: &str,
    #[case] moved: bool,
) {
    let mut job = sample("a");
    job["spec"]["entrypoint"] = json!(entrypoint);
    let cfg = SharedClusters {
        job_workdir_root: root.into(),
        ..SharedClusters::default()
    };
    let Plan::Rewrite(r) = plan(&job, "ns", &cfg, "x", super::tests_by()).unwrap() else {
        panic!()
    };
    let now = r.job["spec"]["entrypoint"].as_str().unwrap();
    let own = "sh -c 'mkdir -p /tmp/rayshare-jobs && d=$(mktemp -d /tmp/rayshare-jobs/uid-1.";
    assert_eq!(now.starts_with(own), moved);
    assert!(now.contains(entrypoint));
    // Where a job runs is not part of its cluster's identity.
    assert_eq!(r.name, rewrite(&sample("a")).name);
}

/// The spec travels as an annotation; one the API server would refuse (over 256 KiB of
/// annotations) leaves the job unchanged, which the API server then stores as it is.
#[rstest]
#[case::big_env(300 * 1024, 0)]
#[case::big_annotation(0, 260 * 1024)]
fn a_spec_too_large_to_travel_leaves_the_job_unchanged(
    #[case] env_bytes: usize,
    #[case] annotation_bytes: usize,
) {
    let mut job = sample("a");
    let head = &mut job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"];
    head["containers"][0]["env"] = json!([{"name": "BIG", "value": "x".repeat(env_bytes)}]);
    job["metadata"]["annotations"]["big"] = json!("y".repeat(annotation_bytes));
    let planned = plan_of(&job);
    match planned {
        Ok(Plan::Skip(Some(why))) => assert!(why.contains("too large to travel"), "{why}"),
        Ok(Plan::Rewrite(_)) => panic!("rewritten"),
        other => panic!("{other:?}"),
    }
}
