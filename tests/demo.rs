//! rayshare's main job, on the built-in local cluster (a real API server, kube-scheduler,
//! kube-controller-manager, kwok's fake nodes and the real KubeRay operator): Flyte-shaped
//! RayJobs from two runs of one config and one of another, and a Volcano pod, through the
//! real webhook. KubeRay brings up rayshare's shared clusters and runs every job on one.
//!
//! `bash tests/demo.sh` runs this with RAYSHARE_DEMO_WAIT=1: it then keeps everything
//! running, with a kubeconfig for your own kubectl, until Ctrl-C. In `cargo test` it
//! checks the outcome and exits.

use rayshare_testkit::{harness, world};

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::Value;

use harness::*;
use world::*;

/// What `kubectl get <resource> -n <namespace>` prints: the API server's own table for
/// the resource (the columns kubectl shows by default).
/// Runs the real kubectl with the admin kubeconfig; its standard output.
fn kubectl(args: &[&str]) -> String {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&CONTROL_PLANE.admin_kubeconfig)
        .args(args)
        .output()
        .expect("kubectl on PATH");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn kubectl_get(client: &Client, path: &str) -> String {
    let request = hyper::Request::get(path)
        .header(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .unwrap();
    let table: Value = serde_json::from_str(&client.request_text(request).await.unwrap()).unwrap();
    let columns: Vec<usize> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, c)| c["priority"].as_i64().unwrap_or(0) == 0)
        .map(|(i, _)| i)
        .collect();
    let mut lines = vec![
        columns
            .iter()
            .map(|&i| {
                table["columnDefinitions"][i]["name"]
                    .as_str()
                    .unwrap()
                    .to_uppercase()
            })
            .collect::<Vec<_>>(),
    ];
    for row in table["rows"].as_array().unwrap() {
        lines.push(
            columns
                .iter()
                .map(|&i| match &row["cells"][i] {
                    Value::String(s) => s.clone(),
                    Value::Null => "<none>".into(),
                    other => other.to_string(),
                })
                .collect(),
        );
    }
    let widths: Vec<usize> = (0..columns.len())
        .map(|c| lines.iter().map(|l| l[c].len()).max().unwrap_or(0))
        .collect();
    lines
        .iter()
        .map(|l| {
            l.iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect::<Vec<_>>()
                .join("   ")
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn demo() {
    // The reclaimer writes the pool labels `kubectl get -L` shows: often, for the demo.
    let config = "reclaim:\n  intervalSeconds: 2\n  namespaces: [e2e-demo]\n";
    let env = TestEnv::new("demo", config, 1).await;
    // The only operator of this test binary: it watches every namespace.
    let kuberay = KubeRay::start("demo", &[], &KubeRayOptions::default()).await;
    println!(
        "\nrayshare demo: namespace {} is enabled (label {ENABLE_LABEL}=true); KubeRay, \
         kube-scheduler, kube-controller-manager and kwok ({} fake nodes) are running\n",
        env.ns,
        WORLD.nodes.len()
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
        selected.push((
            stored["metadata"]["name"].as_str().unwrap().to_string(),
            cluster,
        ));
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
    println!(
        "Pod {} (schedulerName volcano) -> Volcano PodGroup {}",
        pod.metadata.name.as_deref().unwrap_or(""),
        group.as_deref().unwrap_or("(none)")
    );

    // KubeRay takes over: both shared clusters come up, every job runs on its cluster.
    let jobs = env.api(&ray_job_resource(), &env.ns);
    for (job, cluster) in &selected {
        wait_for_within(SLOW, &format!("KubeRay to start {job}"), || async {
            let status = jobs.get(job).await.ok()?.data["status"].clone();
            let state = status["jobDeploymentStatus"].as_str().unwrap_or("");
            (status["rayClusterName"] == cluster.as_str()
                && !["", "New", "Initializing"].contains(&state))
            .then_some(())
        })
        .await;
    }
    let ns = &env.ns;
    println!("\n$ kubectl get rayclusters,rayjobs,pods -n {ns}");
    for path in [
        format!("/apis/ray.io/v1/namespaces/{ns}/rayclusters"),
        format!("/apis/ray.io/v1/namespaces/{ns}/rayjobs"),
        format!("/api/v1/namespaces/{ns}/pods"),
    ] {
        println!("{}\n", kubectl_get(&env.admin, &path).await);
    }
    println!(
        "Two RayClusters for three jobs: KubeRay made the pods of rayshare's shared clusters \
         only; the a0-* pods are the jobs' submitters. kwok plays the nodes, so no Ray runs: \
         it completes each submitter at once, and KubeRay, finding no Ray job to follow, \
         marks the job Failed 30 s later."
    );

    // What the people who run the jobs see: events on their RayJob, and the pool.
    let first = &selected[0].0;
    // rayshare records the event in the background once the job is stored.
    let events = wait_for(&format!("the SharedCluster event on {first}"), || async {
        let describe = kubectl(&["describe", "rayjob", first, "-n", ns]);
        let events = describe[describe.find("Events:")?..].to_string();
        events.contains("SharedCluster").then_some(events)
    })
    .await;
    println!("$ kubectl describe rayjob {first} -n {ns}   (its Events)\n{events}");
    let pool = [
        "get",
        "rayclusters",
        "-n",
        ns,
        "-l",
        "rayshare.io/shared-cluster",
    ];
    let columns = rayshare::domain::reclaim::pool::COLUMNS;
    let shared = env.api(&ray_cluster_resource(), ns);
    wait_for("the reclaimer to label the pool", || async {
        let list = shared.list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .all(|c| {
                c.labels()
                    .contains_key(rayshare::domain::labels::POOL_ACTIVE_JOBS)
            })
            .then_some(())
    })
    .await;
    println!("$ kubectl {} -L {columns}", pool.join(" "));
    println!("{}", kubectl(&[&pool[..], &["-L", columns]].concat()));
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_rayshare"))
        .arg("status")
        .arg("--kubeconfig")
        .arg(&CONTROL_PLANE.admin_kubeconfig)
        .args(["-n", ns])
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    println!("$ rayshare status -n {ns}\n{status}");
    assert!(status.contains(&selected[0].1), "{status}");

    let clusters = env
        .api(&ray_cluster_resource(), &env.ns)
        .list(&Default::default())
        .await
        .unwrap();
    assert_eq!(
        selected[0].1, selected[1].1,
        "two runs of one config share a cluster"
    );
    assert_ne!(selected[0].1, selected[2].1, "another config gets its own");
    assert_eq!(clusters.items.len(), 2);
    assert!(group.is_some());

    if std::env::var_os("RAYSHARE_DEMO_WAIT").is_some() {
        println!(
            "\nEverything keeps running. Try:\n  kubectl --kubeconfig {} get rayclusters,rayjobs,pods,podgroups -n {ns}\n\
             Logs: {}\nCtrl-C to stop.",
            CONTROL_PLANE.admin_kubeconfig.display(),
            WORLD.dir.display(),
        );
        let _ = tokio::signal::ctrl_c().await;
    }
    drop(kuberay);
}
