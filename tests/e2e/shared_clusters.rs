//! Shared RayClusters through the real API server and the real CRDs.

use kube::api::ListParams;
use serde_json::{Value, json};

use crate::events::wait_event;
use crate::harness::*;

async fn create_job(env: &TestEnv, mut job: Value, name: &str, dry_run: bool) -> Value {
    job["metadata"]["name"] = json!(name);
    create_in(&env.admin, &env.ns, job, dry_run).await
}

async fn clusters(env: &TestEnv) -> Vec<Value> {
    env.api(&ray_cluster_resource(), &env.ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect()
}

fn selected(job: &Value) -> String {
    job["spec"]["clusterSelector"]["ray.io/cluster"]
        .as_str()
        .expect("a clusterSelector")
        .to_string()
}

#[tokio::test]
async fn jobs_of_one_config_share_a_cluster_and_another_config_gets_its_own() {
    let env = TestEnv::new("shared", DEFAULT_CONFIG, 1).await;
    let a = create_job(&env, sample("rayjob-run-a.yaml"), "a0-0", false).await;
    // The stored job: selector, no embedded spec, no TTL, run identity in its runtime env.
    let stored = serde_json::to_value(
        env.api(&ray_job_resource(), &env.ns)
            .get("a0-0")
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(stored["spec"], a["spec"]);
    assert!(stored["spec"].get("rayClusterSpec").is_none());
    assert_eq!(stored["spec"]["shutdownAfterJobFinishes"], json!(false));
    let runtime_env: Value =
        serde_norway::from_str(stored["spec"]["runtimeEnvYAML"].as_str().unwrap()).unwrap();
    assert_eq!(runtime_env["env_vars"]["RUN_NAME"], "a1b2c3");
    assert_eq!(runtime_env["pip"][0], "numpy==2.1.0");
    let name = selected(&stored);
    // Events say so on the job (`kubectl describe rayjob`) and on the cluster.
    let note = wait_event(&env, "a0-0", "SharedCluster").await;
    assert!(
        note.contains(&name) && note.contains("created for this job's config"),
        "{note}"
    );
    let note = wait_event(&env, &name, "Created").await;
    assert!(note.contains("first used by RayJob a0-0"), "{note}");

    // The provisioner makes the cluster (validated by the real CRD, the stripped spec).
    let all = wait_for("the shared cluster", || async {
        Some(clusters(&env).await).filter(|c| !c.is_empty())
    })
    .await;
    assert_eq!(all.len(), 1);
    let cluster = &all[0];
    assert_eq!(cluster["metadata"]["name"], json!(name));
    assert_eq!(
        cluster["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "rayshare"
    );
    assert!(cluster["metadata"].get("ownerReferences").is_none());
    let sent = sample("rayjob-run-a.yaml")["spec"]["rayClusterSpec"].clone();
    assert_eq!(
        cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"],
        sent["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"]
    );
    let text = cluster["spec"].to_string();
    assert!(
        !text.contains("a1b2c3"),
        "run-scoped values leaked into the shared cluster: {text}"
    );
    // Nothing the CRD schema would prune was lost: everything we meant to store is there.
    let head_env = &cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"];
    assert_eq!(head_env.as_array().unwrap().len(), 2, "{head_env}");

    // Another run of the same config reuses it; another config gets a second cluster.
    let b = create_job(&env, sample("rayjob-run-b.yaml"), "a0-1", false).await;
    assert_eq!(selected(&b), name);
    assert_eq!(clusters(&env).await.len(), 1);
    let other = create_job(&env, sample("rayjob-other-config.yaml"), "a0-2", false).await;
    assert_ne!(selected(&other), name);
    wait_for("a second cluster for the other config", || async {
        (clusters(&env).await.len() == 2).then_some(())
    })
    .await;
    // Two clusters made by the provisioner (whether the second run's admission found the
    // cluster already made, "reused", or not yet, "planned", depends on timing).
    let counted = |m: &str| m.contains("rayshare_objects_created_total{kind=\"RayCluster\"} 2");
    wait_for("the creations to be counted", || async {
        Some(env.instances[0].metrics().await).filter(|m| counted(m))
    })
    .await;
}

#[tokio::test]
async fn fifty_concurrent_identical_jobs_make_exactly_one_cluster() {
    let env = TestEnv::new("fifty", DEFAULT_CONFIG, 1).await;
    let jobs =
        futures::future::join_all(
            (0..50).map(|i| {
                let mut job = sample("rayjob-run-a.yaml");
                job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]
                    [0]["env"][0]["value"] = json!(format!("run-{i}"));
                let env = &env;
                async move { create_job(env, job, &format!("job-{i}"), false).await }
            }),
        )
        .await;
    let names: std::collections::BTreeSet<String> = jobs.iter().map(selected).collect();
    assert_eq!(names.len(), 1, "{names:?}");
    let made = wait_for("the shared cluster", || async {
        Some(clusters(&env).await).filter(|c| !c.is_empty())
    })
    .await;
    assert_eq!(made.len(), 1);
    for (i, job) in jobs.iter().enumerate() {
        let env_vars: Value =
            serde_norway::from_str(job["spec"]["runtimeEnvYAML"].as_str().unwrap()).unwrap();
        assert_eq!(env_vars["env_vars"]["RUN_NAME"], json!(format!("run-{i}")));
    }
}

#[tokio::test]
async fn a_foreign_cluster_is_not_taken_over_and_dry_run_creates_nothing() {
    let env = TestEnv::new("squat", DEFAULT_CONFIG, 1).await;
    // Learn the name with a dry run: answered, nothing created.
    let dry = create_job(&env, sample("rayjob-run-a.yaml"), "probe", true).await;
    let name = selected(&dry);
    assert!(clusters(&env).await.is_empty());
    assert!(
        env.api(&ray_job_resource(), &env.ns)
            .get_opt("probe")
            .await
            .unwrap()
            .is_none()
    );

    // Squat the name with a cluster rayshare did not make.
    let mut foreign = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": env.ns},
        "spec": sample("rayjob-other-config.yaml")["spec"]["rayClusterSpec"].clone()});
    foreign["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"] = json!([]);
    apply(&env.admin, &foreign).await;
    // The probe's read found the name free, and that stands for a second (one read answers
    // a burst); until then, or until the watch shows the squatter, admission cannot know
    // of it (README, Security). Dry runs until rayshare's answer shows it knows.
    wait_for("rayshare to see the foreign cluster", || async {
        let dry = create_job(&env, sample("rayjob-run-a.yaml"), "probe", true).await;
        dry["spec"].get("clusterSelector").is_none().then_some(())
    })
    .await;
    let job = create_job(&env, sample("rayjob-run-a.yaml"), "a0-0", false).await;
    assert!(
        job["spec"].get("clusterSelector").is_none(),
        "must not select a foreign cluster"
    );
    assert!(
        job["spec"]["rayClusterSpec"].is_object(),
        "the job keeps its own cluster"
    );
    let all = clusters(&env).await;
    assert_eq!(all.len(), 1);
    assert!(
        all[0]["metadata"]["labels"]
            .get("app.kubernetes.io/managed-by")
            .is_none()
    );
    // The job hears why it was left alone. (That a dry run queues no event is a unit
    // test: here one would only be dropped, as `not_stored`, 10 s later.)
    let note = wait_event(&env, "a0-0", "SharedClusterFailed").await;
    assert!(
        note.contains("exists that rayshare did not create"),
        "{note}"
    );
}

/// A Flyte 2 job from the corpus (tests/fixtures/flyte/v2), without the owner and
/// finalizer that would tie it to a TaskAction this control plane does not have.
fn flyte_v2_job(case: &str) -> Value {
    let path = repo()
        .join("tests/fixtures/flyte/v2")
        .join(format!("{case}.json"));
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut job = fixture["rayJob"].clone();
    let meta = job["metadata"].as_object_mut().unwrap();
    meta.remove("ownerReferences");
    meta.remove("finalizers");
    job
}

/// Through the real API server: two Flyte 2 runs (another run, action `no` of run `on`,
/// env and tolerations in another Go map order) share one cluster, and the stored
/// runtimeEnvYAML is JSON in which the user's `'on'` / `'1_000'` and the run name `on`
/// are strings for KubeRay's YAML 1.1 reader.
#[tokio::test]
async fn flyte_runs_share_a_cluster_and_keep_ambiguous_strings() {
    let env = TestEnv::new("flyte", DEFAULT_CONFIG, 1).await;
    let first = create_job(
        &env,
        flyte_v2_job("runtime-env-ambiguous-scalars"),
        "amb-0",
        false,
    )
    .await;
    let second = create_job(&env, flyte_v2_job("run-named-on"), "on-no-0", false).await;
    assert_eq!(selected(&first), selected(&second));
    let made = wait_for("the shared cluster", || async {
        Some(clusters(&env).await).filter(|c| !c.is_empty())
    })
    .await;
    assert_eq!(made.len(), 1);

    let stored = |name: &'static str| {
        let api = env.api(&ray_job_resource(), &env.ns);
        async move { serde_json::to_value(api.get(name).await.unwrap()).unwrap() }
    };
    let text = stored("amb-0").await["spec"]["runtimeEnvYAML"]
        .as_str()
        .unwrap()
        .to_string();
    let as_json: Value = serde_json::from_str(&text).expect("runtimeEnvYAML is JSON");
    let as_kuberay = rayshare::domain::shared_cluster::kuberay_yaml::read(&text).unwrap();
    assert_eq!(as_json, as_kuberay);
    let vars = &as_kuberay["env_vars"];
    for (key, value) in [
        ("A", "on"),
        ("B", "yes"),
        ("D", "off"),
        ("E", "~"),
        ("F", "1_000"),
        ("G", "0x1F"),
        ("H", "3"),
    ] {
        assert_eq!(vars[key], json!(value), "{key}");
    }
    assert_eq!(as_kuberay["config"]["setup_timeout_seconds"], json!(600));
    let on = stored("on-no-0").await;
    let on_env = rayshare::domain::shared_cluster::kuberay_yaml::read(
        on["spec"]["runtimeEnvYAML"].as_str().unwrap(),
    )
    .unwrap();
    assert_eq!(on_env["env_vars"]["RUN_NAME"], json!("on"));
    assert_eq!(on_env["env_vars"]["ACTION_NAME"], json!("no"));
    // The run's labels stay on the job; the cluster has none of them.
    assert_eq!(on["metadata"]["labels"]["run"], json!("on"));
    let cluster = &clusters(&env).await[0];
    assert!(
        cluster["spec"]["headGroupSpec"]["template"]["metadata"]["labels"]
            .get("run")
            .is_none()
    );
}
