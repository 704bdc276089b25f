//! `rayshare status` and `kubectl get -L` against the control plane: the pool, the
//! PodGroups and the index claims of one installation, as its users see them.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::harness::*;

fn rayshare_status(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rayshare"))
        .arg("status")
        .arg("--kubeconfig")
        .arg(&CONTROL_PLANE.admin_kubeconfig)
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rayshare status {args:?}: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn status_and_kubectl_show_the_pool_groups_and_claims() {
    let config = "indices:\n  claimGraceSeconds: 60\nreclaim:\n  intervalSeconds: 1\n  namespaces: [e2e-status]\n";
    let env = TestEnv::new("status", config, 1).await;
    // A two-host worker group, so its worker pods get indices.
    let mut job = sample("rayjob-run-a.yaml");
    job["metadata"]["name"] = json!("train");
    job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["numOfHosts"] = json!(2);
    let stored = create_in(&env.admin, &env.ns, job, false).await;
    let cluster = stored["spec"]["clusterSelector"]["ray.io/cluster"]
        .as_str()
        .unwrap()
        .to_string();
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    wait_for("the shared cluster", || async {
        clusters.get_opt(&cluster).await.ok().flatten()
    })
    .await;
    let pods = Api::<Pod>::namespaced(env.admin.clone(), &env.ns);
    let pod: Pod = serde_json::from_value(sample("volcano-pod.yaml")).unwrap();
    let pod = pods.create(&PostParams::default(), &pod).await.unwrap();
    let pod_group = pod.metadata.annotations.unwrap()["scheduling.k8s.io/group-name"].clone();
    let groups = env.api(&pod_group_resource(), &env.ns);
    wait_for("the PodGroup", || async {
        groups.get_opt(&pod_group).await.ok().flatten()
    })
    .await;
    let shared: Value = serde_json::to_value(clusters.get(&cluster).await.unwrap()).unwrap();
    let group = shared["spec"]["workerGroupSpecs"][0]["groupName"]
        .as_str()
        .unwrap();
    let worker: Pod = serde_json::from_value(json!({
        "metadata": {"generateName": format!("{cluster}-worker-"), "labels": {
            "ray.io/cluster": cluster, "ray.io/group": group, "ray.io/node-type": "worker"}},
        "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}]},
    }))
    .unwrap();
    let worker = wait_for("the instance to know the cluster's hosts", || async {
        let made = pods.create(&PostParams::default(), &worker).await.ok()?;
        let labels = made.metadata.labels.clone().unwrap_or_default();
        labels
            .contains_key("ray.io/worker-group-replica-index")
            .then_some(made)
    })
    .await;
    assert!(worker.metadata.name.is_some());

    // JSON: the one namespace, with the cluster, its job, the group and the claim.
    let json: Value =
        serde_json::from_str(&rayshare_status(&["-n", &env.ns, "-o", "json"])).unwrap();
    let ns = &json["namespaces"][&env.ns];
    assert_eq!(json["namespaces"].as_object().unwrap().len(), 1, "{json}");
    let row = &ns["clusters"][0];
    assert_eq!(row["name"], cluster.as_str(), "{json}");
    assert_eq!(row["active_jobs"], json!(["train"]), "{json}");
    assert_eq!(row["state"], "busy", "{json}");
    assert_eq!(row["workers"][0]["hosts"], 2, "{json}");
    assert_eq!(
        row["image"],
        shared["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]
    );
    assert_eq!(ns["pod_groups"][0]["name"], pod_group.as_str(), "{json}");
    assert_eq!(ns["pod_groups"][0]["queue"], "research", "{json}");
    assert_eq!(ns["index_claims"][0]["cluster"], cluster.as_str(), "{json}");
    assert_eq!(ns["index_claims"][0]["replica"], "0", "{json}");

    // The table, for this installation's clusters.
    let table = rayshare_status(&["-n", &env.ns, "--instance", &env.name]);
    assert!(
        table.starts_with(&format!("NAMESPACE {}\n", env.ns)),
        "{table}"
    );
    let line = table
        .lines()
        .find(|l| l.trim_start().starts_with(&cluster))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(line.contains(" busy "), "{table}");
    assert!(table.contains(&pod_group), "{table}");
    assert!(table.contains("INDEX CLAIMS ON"), "{table}");
    let other = rayshare_status(&["-n", &env.ns, "--instance", "another"]);
    assert!(!other.contains("SHARED CLUSTER"), "{other}");

    // kubectl with the documented columns, once the reclaimer has labelled the cluster.
    let digest = &shared["metadata"]["annotations"]["rayshare.io/config-digest"];
    let digest: String = digest.as_str().unwrap().chars().take(16).collect();
    let kubectl = wait_for("the pool labels", || async {
        let out = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&CONTROL_PLANE.admin_kubeconfig)
            .args(["get", "rayclusters", "-n", &env.ns])
            .args([
                "-l",
                "rayshare.io/shared-cluster",
                "-L",
                rayshare::domain::reclaim::pool::COLUMNS,
            ])
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let row = text.lines().find(|l| l.starts_with(&cluster))?.to_string();
        (row.contains(&digest) && row.split_whitespace().any(|c| c == "1")).then_some(text)
    })
    .await;
    assert!(kubectl.contains("ACTIVE-JOBS"), "{kubectl}");
}
