//! KubeRay run with `--batch-scheduler=volcano` (Volcano's scheduler itself stands in as a
//! kube-scheduler profile named `volcano`, see world/mod.rs): what rayshare's default config
//! does, and what `sharedClusters.volcanoStandInSpec` does.

use kube::ResourceExt;
use serde_json::json;

use crate::harness::*;
use crate::shared_clusters::*;
use crate::world::*;

fn volcano() -> KubeRayOptions {
    KubeRayOptions {
        batch_scheduler: Some("volcano".into()),
        ..Default::default()
    }
}

async fn pod_groups(env: &TestEnv) -> Vec<serde_json::Value> {
    list_json(&env.admin, &pod_group_resource(), &env.ns, "").await
}

async fn group_names(env: &TestEnv) -> Vec<String> {
    let mut names: Vec<String> = pod_groups(env)
        .await
        .iter()
        .map(|g| g["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// The job's status once KubeRay took it past Initializing.
async fn past_initializing(env: &TestEnv, job: &str) -> serde_json::Value {
    wait_for_within(SLOW, "the job to leave Initializing", || async {
        let status = ray_job(env, job).await["status"].clone();
        let state = status["jobDeploymentStatus"].as_str().unwrap_or("");
        (!["", "New", "Initializing"].contains(&state)).then_some(status)
    })
    .await
}

/// The default config leaves a selector without a spec; KubeRay's Volcano plugin refuses
/// such a job on every reconcile, so it never leaves Initializing, although its shared
/// cluster is up and ready. KubeRay v1.4 groups RayClusters only: the job runs there.
#[tokio::test]
async fn default_config_leaves_jobs_initializing() {
    let env = TestEnv::new("kr-volcano-default", DEFAULT_CONFIG, 1).await;
    let kuberay = KubeRay::start(&env.name, &[&env.ns], &volcano()).await;
    let (file, job, _) = JOBS[0];
    let cluster = selected(&create_job(&env, file, job).await).unwrap();
    wait_for_within(SLOW, "the shared cluster to be ready", || async {
        (ray_clusters(&env).await.get(&cluster)?["status"]["state"] == "ready").then_some(())
    })
    .await;
    if kuberay_v1_4() {
        let status = past_initializing(&env, job).await;
        assert_eq!(status["rayClusterName"], json!(cluster), "{status}");
        assert_eq!(group_names(&env).await, vec![format!("ray-{cluster}-pg")]);
        assert_no_validation_failures(&env).await;
        return;
    }
    let refusal = format!("gang scheduling does not support RayJob {}/{job}", env.ns);
    wait_for_within(
        SLOW,
        "KubeRay's Volcano plugin to refuse the job",
        || async { kuberay.log_text().contains(&refusal).then_some(()) },
    )
    .await;
    // Refused again and again; never past Initializing.
    let refusals = kuberay.log_text().matches(&refusal).count();
    wait_for_within(SLOW, "KubeRay to refuse the job again", || async {
        (kuberay.log_text().matches(&refusal).count() > refusals).then_some(())
    })
    .await;
    let status = ray_job(&env, job).await["status"].clone();
    assert_eq!(status["jobDeploymentStatus"], "Initializing", "{status}");
    // The cluster's own PodGroup (KubeRay's, for a standalone RayCluster); none for the job.
    assert_eq!(group_names(&env).await, vec![format!("ray-{cluster}-pg")]);
    eprintln!(
        "[volcano default] {job} -> {cluster}: cluster ready, job {} ({} refusals so far: {refusal})",
        status["jobDeploymentStatus"],
        kuberay.log_text().matches(&refusal).count()
    );
}

/// rayshare's config as the chart renders it with `sets`, its reclaimer kept to
/// `namespace` (tests share one API server).
fn chart_config(sets: &[&str], namespace: &str) -> String {
    let configmap = helm_template("templates/configmap.yaml", sets)
        .into_iter()
        .find(|o| o["kind"] == "ConfigMap")
        .expect("the chart renders its ConfigMap");
    let mut config: serde_json::Value =
        serde_norway::from_str(configmap["data"]["config.yaml"].as_str().unwrap()).unwrap();
    config["reclaim"]["namespaces"] = json!([namespace]);
    serde_norway::to_string(&config).unwrap()
}

/// The chart's `kuberay.batchScheduler=volcano` turns the stand-in spec on. With it KubeRay
/// sizes the job's PodGroup from the stand-in (minMember 1, filled by the submitter), runs
/// the job on the shared cluster and puts the submitter into the group.
#[tokio::test]
async fn stand_in_spec_runs_jobs() {
    let config = chart_config(
        &["kuberay.batchScheduler=volcano"],
        "e2e-kr-volcano-stand-in",
    );
    assert!(config.contains("volcanoStandInSpec: true"), "{config}");
    let env = TestEnv::new("kr-volcano-stand-in", &config, 1).await;
    let _kuberay = KubeRay::start(&env.name, &[&env.ns], &volcano()).await;
    let (file, job, run) = JOBS[0];
    let stored = create_job(&env, file, job).await;
    let cluster = selected(&stored).unwrap();
    assert!(stored["spec"]["rayClusterSpec"].is_object());
    let status = past_initializing(&env, job).await;
    assert_eq!(status["rayClusterName"], json!(cluster), "{status}");
    assert_eq!(
        ray_clusters(&env).await.keys().cloned().collect::<Vec<_>>(),
        vec![cluster.clone()],
        "KubeRay made no cluster from the stand-in"
    );
    if kuberay_v1_4() {
        // No PodGroup for the job in v1.4: the stand-in is harmless there, not needed.
        assert_eq!(group_names(&env).await, vec![format!("ray-{cluster}-pg")]);
        assert_no_validation_failures(&env).await;
        return;
    }
    let group_name = format!("ray-{job}-pg");
    let groups = pod_groups(&env).await;
    let group = groups
        .iter()
        .find(|g| g["metadata"]["name"] == group_name.as_str())
        .unwrap_or_else(|| panic!("no PodGroup {group_name}: {groups:?}"));
    assert_eq!(group["spec"]["minMember"], 1, "{group}");
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(env.admin.clone(), &env.ns);
    let submitter_pod = wait_for_within(SLOW, "the submitter pod to run", || async {
        let list = pods
            .list(
                &kube::api::ListParams::default()
                    .labels(&format!("batch.kubernetes.io/job-name={job}")),
            )
            .await
            .ok()?;
        let pod = list.items.into_iter().next()?;
        ["Running", "Succeeded"]
            .contains(&pod_phase(&pod))
            .then_some(pod)
    })
    .await;
    assert_eq!(
        submitter_pod
            .annotations()
            .get("scheduling.k8s.io/group-name"),
        Some(&group_name)
    );
    // KubeRay's two groups (the shared cluster's, the job's) and none of rayshare's: it
    // leaves pods that KubeRay already grouped alone.
    let mut want = vec![format!("ray-{cluster}-pg"), group_name.clone()];
    want.sort();
    assert_eq!(group_names(&env).await, want);
    let submitter =
        kube::Api::<k8s_openapi::api::batch::v1::Job>::namespaced(env.admin.clone(), &env.ns)
            .get(job)
            .await
            .unwrap();
    assert_eq!(
        submitted_runtime_env(&submitter)["env_vars"]["RUN_NAME"],
        run
    );
    assert_no_validation_failures(&env).await;
    eprintln!(
        "[volcano stand-in] {job} -> {cluster}: {}, PodGroup {group_name} minMember {} minResources {}",
        status["jobDeploymentStatus"], group["spec"]["minMember"], group["spec"]["minResources"]
    );
}
