//! Warm ahead of demand through the real API server: a config whose tasks just fanned out has
//! its idle member kept warm (with why), and made again ahead of the next task when it is
//! gone, from its stored job's spec.

use kube::api::DeleteParams;
use serde_json::json;

use crate::harness::*;

/// A half-life of a minute against a five-minute idle TTL: one fan-out just seen says the
/// next is due in about 87 s (60 s / ln 2), within the TTL for the next 100 s or so.
const CONFIG: &str = "reclaim:\n  idleTtlSeconds: 300\n  intervalSeconds: 1\n  quietSeconds: 2\n  headSilenceSeconds: 0\n  namespaces: [e2e-warm]\n\
warmAhead:\n  enabled: true\n  namespaces: [e2e-warm]\n  halfLifeSeconds: 60\n";

#[tokio::test]
async fn a_config_in_steady_demand_is_kept_warm_and_made_ahead_again() {
    let env = TestEnv::new("warm", CONFIG, 1).await;
    // A map task's fan-out of six tasks of one config, each finished as KubeRay would
    // finish it.
    let mut cluster = String::new();
    for i in 0..6 {
        let name = format!("task-{i}");
        let mut job = sample("rayjob-run-a.yaml");
        job["metadata"]["name"] = json!(name);
        let stored = create_in(&env.admin, &env.ns, job, false).await;
        cluster = stored["spec"]["clusterSelector"]["ray.io/cluster"]
            .as_str()
            .unwrap()
            .to_string();
        finish(&env, &name).await;
    }
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    let why = wait_for("the idle member to be kept warm", || {
        kept_warm(&env, &cluster)
    })
    .await;
    assert!(why.starts_with("kept warm: about"), "{why}");

    // Gone (as a reclaim or a person would delete it): its jobs are over, so only
    // warm-ahead makes it again, before any task asks.
    let first = cluster_uid(&env, &cluster).await.expect("the member");
    clusters
        .delete(&cluster, &DeleteParams::default())
        .await
        .unwrap();
    let again = wait_for("the member to be made ahead again", || async {
        cluster_uid(&env, &cluster)
            .await
            .filter(|uid| *uid != first)
    })
    .await;
    assert_ne!(again, first);
    let made = clusters.get(&cluster).await.unwrap();
    assert!(
        made.data["spec"]["headGroupSpec"].is_object(),
        "built from the stored job's spec"
    );
    // Logged after the create returns, by a background writer: awaited, not read at once
    // (read at once it failed a clean-clone run with the member already made).
    env.instances[0]
        .wait_for_log("made a shared cluster ahead of demand")
        .await;
}
