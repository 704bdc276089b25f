//! rayshare's webhook called before Kueue's: a chart release whose configuration's name
//! sorts before `kueue-mutating-webhook-configuration`. Kueue's webhook then puts the job
//! rayshare already rewrote in the namespace's `default` LocalQueue and suspends it;
//! rayshare, called again (`reinvocationPolicy: IfNeeded`), moves it to that queue's
//! shared cluster, and KubeRay runs it.

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::harness::*;
use crate::kueue::*;
use crate::sharing::*;
use crate::world::*;

/// Whether a dry-run RayJob comes back rewritten (rayshare's webhook is being called).
async fn rewritten(env: &TestEnv) -> bool {
    let mut job = sample(CONFIG_A);
    job["metadata"]["name"] = json!("order-probe");
    job["metadata"]["namespace"] = json!(env.ns);
    let api = dynamic_api(&env.admin, &job).await;
    let job: kube::api::DynamicObject = serde_json::from_value(job).unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    match api.create(&dry_run, &job).await {
        Ok(made) => made.data["spec"]["clusterSelector"].is_object(),
        Err(_) => false,
    }
}

#[tokio::test]
async fn a_job_kueue_queues_after_rayshare_runs_on_that_queues_cluster() {
    let _kueue = &*KUEUE;
    let name = "kueue-order";
    let env = TestEnv::new(name, &rayshare_config(&format!("e2e-{name}")), 1).await;
    queues(&env, "6", "24Gi").await;

    // The harness's registration sorts after Kueue's: take it away, then register the
    // same under a name that sorts first, each change seen in force before the next.
    let configurations: Api<MutatingWebhookConfiguration> = Api::all(env.admin.clone());
    let mut first: Value = env.webhook_configuration();
    let harness_name = first["metadata"]["name"].as_str().unwrap().to_string();
    configurations
        .delete(&harness_name, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("rayshare's registration to be gone", || async {
        (!rewritten(&env).await).then_some(())
    })
    .await;
    first["metadata"]["name"] = json!(format!("a-{harness_name}"));
    assert!(first["metadata"]["name"].as_str() < Some("kueue-mutating-webhook-configuration"));
    apply(&env.admin, &first).await;
    wait_for("rayshare's earlier registration to be in force", || async {
        rewritten(&env).await.then_some(())
    })
    .await;
    let _kuberay = KubeRay::start(name, &[&env.ns], &KubeRayOptions::default()).await;

    let job = create_job(&env, CONFIG_A, "late", &[]).await;
    let cluster = selected(&job);
    assert!(
        job["metadata"]["labels"]
            .get("kueue.x-k8s.io/queue-name")
            .is_none()
    );
    assert_eq!(job["spec"]["suspend"], false, "{}", job["spec"]);
    assert_eq!(
        job["metadata"]["annotations"]["rayshare.io/kueue-queue-name"],
        "default"
    );
    wait_admitted(&env, &cluster).await;
    wait_job_state(&env, "late", "Running").await;
    // rayshare looked twice: first an unqueued cluster, then, called again after Kueue's
    // webhook, the queue's.
    let planned = "rayshare_objects_planned_total";
    assert_metric(&env, planned, "{kind=\"RayCluster\"} 2").await;
}
