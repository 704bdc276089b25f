//! rayshare's main job, on the built-in local control plane: Flyte-shaped RayJobs from
//! two runs of one config and one of another, and a Volcano pod, through the real webhook.
//!
//! `bash tests/demo.sh` runs this with RAYSHARE_DEMO_WAIT=1: it then keeps everything
//! running, with a kubeconfig for your own kubectl, until Ctrl-C. In `cargo test` it
//! checks the outcome and exits.

#[path = "e2e/harness.rs"]
#[allow(dead_code)] // shared with the e2e tests, which use all of it
mod harness;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::Value;

use harness::*;

#[tokio::test]
async fn demo() {
    let env = TestEnv::new("demo", DEFAULT_CONFIG, 1).await;
    println!(
        "\nrayshare demo: namespace {} is enabled (label {ENABLE_LABEL}=true)\n",
        env.ns
    );
    let mut selected = Vec::new();
    for file in [
        "rayjob-run-a.yaml",
        "rayjob-run-b.yaml",
        "rayjob-other-config.yaml",
    ] {
        let stored = create_in(&env.admin, &env.ns, sample(file), false).await;
        let cluster = stored["spec"]["clusterSelector"]["ray.io/cluster"]
            .as_str()
            .unwrap_or("(own cluster)")
            .to_string();
        let runtime_env: Value =
            serde_norway::from_str(stored["spec"]["runtimeEnvYAML"].as_str().unwrap_or("{}"))
                .unwrap();
        println!(
            "RayJob {:<6} (run {}) -> shared RayCluster {cluster}",
            stored["metadata"]["name"].as_str().unwrap(),
            runtime_env["env_vars"]["RUN_NAME"].as_str().unwrap_or("?"),
        );
        selected.push(cluster);
    }
    let clusters = env
        .api(&ray_cluster_resource(), &env.ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    println!(
        "\nRayClusters created by rayshare: {}",
        clusters.items.len()
    );
    for c in &clusters.items {
        println!("  {}", c.metadata.name.as_deref().unwrap_or(""));
    }
    let pod: Pod = serde_json::from_value(sample("volcano-pod.yaml")).unwrap();
    let pod = Api::<Pod>::namespaced(env.admin.clone(), &env.ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    let group = pod
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .get("scheduling.k8s.io/group-name")
        .cloned();
    let groups = env
        .api(&pod_group_resource(), &env.ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    for g in &groups.items {
        println!(
            "\nPod {} -> Volcano PodGroup {} (queue {}, minResources {})",
            pod.metadata.name.as_deref().unwrap_or(""),
            g.metadata.name.as_deref().unwrap_or(""),
            g.data["spec"]["queue"],
            g.data["spec"]["minResources"],
        );
    }

    assert_eq!(
        selected[0], selected[1],
        "two runs of one config share a cluster"
    );
    assert_ne!(selected[0], selected[2], "another config gets its own");
    assert_eq!(clusters.items.len(), 2);
    assert!(group.is_some());
    assert_eq!(groups.items.len(), 1);

    if std::env::var_os("RAYSHARE_DEMO_WAIT").is_some() {
        println!(
            "\nEverything keeps running. Try:\n  kubectl --kubeconfig {} get rayjobs,rayclusters,podgroups -n {}\nCtrl-C to stop.",
            CONTROL_PLANE.admin_kubeconfig.display(),
            env.ns
        );
        let _ = tokio::signal::ctrl_c().await;
    }
}
