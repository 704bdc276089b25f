//! Warm ahead of demand through the real API server: a config whose tasks keep coming has
//! its idle member kept warm (with why), and made again ahead of the next task when it is
//! gone, from its stored job's spec.

use std::time::Duration;

use kube::api::DeleteParams;
use serde_json::json;

use crate::harness::*;

const CONFIG: &str = "reclaim:\n  idleTtlSeconds: 120\n  intervalSeconds: 1\n  quietSeconds: 2\n  headSilenceSeconds: 0\n  namespaces: [e2e-warm]\n\
warmAhead:\n  enabled: true\n  namespaces: [e2e-warm]\n  halfLifeSeconds: 300\n  burstWindowSeconds: 1\n";

#[tokio::test]
async fn a_config_in_steady_demand_is_kept_warm_and_made_ahead_again() {
    let env = TestEnv::new("warm", CONFIG, 1).await;
    // Six tasks of one config, each an arrival of its own: created more than the burst
    // window apart in whole seconds (a creationTimestamp's resolution), so 2.5 s (the
    // trace's spacing, not a wait); each finished as KubeRay would finish it.
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
        tokio::time::sleep(Duration::from_millis(2500)).await;
    }
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    let why = wait_for("the idle member to be kept warm", || async {
        let c = clusters.get_opt(&cluster).await.ok()??;
        c.metadata
            .annotations?
            .get("rayshare.io/kept-warm")
            .cloned()
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
    let log = env.instances[0].log_text();
    assert!(
        log.contains("made a shared cluster ahead of demand"),
        "{}",
        tail_of(&log)
    );
}

fn tail_of(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
