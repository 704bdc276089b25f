//! `rayshare check` against the control plane (issue 47): a running instance whose
//! dry-run RayJob comes back rewritten; KubeRay found by its Deployment, and its
//! `--batch-scheduler=volcano` caught against the rewritten job; a chart installed by the
//! real helm whose pods cannot pull their image; and no registration at all. And the
//! start-up warning and metric of a replica deployed under a placeholder image.

use std::process::Stdio;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::harness::*;

/// `rayshare check -o json ARGS` as the admin: its exit code and the level of each check.
async fn check(args: &[&str]) -> (i32, Value) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_rayshare"))
        .arg("check")
        .arg("--kubeconfig")
        .arg(&CONTROL_PLANE.admin_kubeconfig)
        .args(["-o", "json"])
        .args(args)
        .stderr(Stdio::piped())
        .output()
        .await
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "rayshare check {args:?}: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    eprintln!("CHECK {args:?}\n{report:#}");
    (out.status.code().unwrap(), report)
}

/// The line of `check` (the first, as `said` of later ones may repeat it).
fn line<'a>(report: &'a Value, check: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["check"] == check)
        .unwrap_or_else(|| panic!("no {check} line: {report:#}"))
}

fn level<'a>(report: &'a Value, check: &str) -> &'a str {
    line(report, check)["level"].as_str().unwrap()
}

fn said<'a>(report: &'a Value, check: &str) -> &'a str {
    line(report, check)["said"].as_str().unwrap()
}

#[tokio::test]
async fn check_says_a_running_instance_rewrites_and_catches_kuberays_volcano() {
    // Deployed under the release's image name with another version's tag: a placeholder.
    const IMAGE: &str = "ghcr.io/rayshare/rayshare:0.0.0-not-this-build";
    let args = ["--image".to_string(), IMAGE.to_string()];
    let env = TestEnv::with_args("check", DEFAULT_CONFIG, 1, &args).await;
    env.instances[0]
        .wait_for_log("placeholder image: this build runs under the release's image name")
        .await;
    let metrics = env.instances[0].metrics().await;
    assert!(
        metrics.contains(&format!(
            "rayshare_image_placeholder{{image=\"{IMAGE}\"}} 1\n"
        )),
        "{metrics}"
    );

    let registration = format!("rayshare-e2e-{}", env.name);
    let args = ["--instance", registration.as_str(), "-n", env.ns.as_str()];
    let (code, report) = check(&args).await;
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["ok"], true);
    for ok in [
        "webhook",
        "caBundle",
        "failurePolicy",
        "namespaceSelector",
        "namespaces",
        "dry-run",
        "kuberay CRDs",
        "volcano",
    ] {
        assert_eq!(level(&report, ok), "ok", "{ok}: {report:#}");
    }
    assert!(said(&report, "namespaces").ends_with(&format!("1 opted in: {}", env.ns)));
    assert!(
        said(&report, "dry-run").contains("clusterSelector ray.io/cluster=ray-"),
        "{report:#}"
    );
    // Registered by URL, as these tests do: no Service to look at, said so.
    assert_eq!(level(&report, "endpoints"), "warn");

    // KubeRay's operator (its Deployment; nothing runs it here) with Volcano as its batch
    // scheduler: rayshare's default config drops the spec KubeRay's Volcano plugin needs.
    let kuberay_ns = format!("{}-kuberay", env.ns);
    create_namespace(&env.admin, &kuberay_ns, &[]).await;
    let operator: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "kuberay-operator"},
        "spec": {"selector": {"matchLabels": {"app": "kuberay"}}, "template": {
            "metadata": {"labels": {"app": "kuberay"}},
            "spec": {"containers": [{"name": "kuberay-operator",
                "image": "quay.io/kuberay/operator:v1.6.1",
                "args": ["--feature-gates=RayMultiHostIndexing=true", "--batch-scheduler", "volcano"]}]}}}}))
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(env.admin.clone(), &kuberay_ns);
    deployments
        .create(&PostParams::default(), &operator)
        .await
        .unwrap();
    let (code, report) = check(&args).await;
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(report["ok"], false);
    assert_eq!(level(&report, "kuberay"), "ok", "{report:#}");
    assert_eq!(
        said(&report, "kuberay"),
        format!(
            "{kuberay_ns}/kuberay-operator runs v1.6.1, --batch-scheduler=volcano, --feature-gates=RayMultiHostIndexing=true"
        )
    );
    assert_eq!(level(&report, "batch scheduler"), "fail", "{report:#}");
    assert!(
        line(&report, "batch scheduler")["hint"]
            .as_str()
            .unwrap()
            .contains("kuberay.batchScheduler=volcano")
    );
    deployments
        .delete("kuberay-operator", &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn check_fails_without_a_registration_and_with_pods_that_cannot_pull() {
    // No such installation: fail, exit code 1, in the table too.
    let (code, report) = check(&["--instance", "nobody-installed-this"]).await;
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(level(&report, "webhook"), "fail");
    let table = std::process::Command::new(env!("CARGO_BIN_EXE_rayshare"))
        .args([
            "check",
            "--instance",
            "nobody-installed-this",
            "--kubeconfig",
        ])
        .arg(&CONTROL_PLANE.admin_kubeconfig)
        .output()
        .unwrap();
    assert_eq!(table.status.code(), Some(1));
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(table.starts_with("fail  webhook"), "{table}");
    assert!(table.contains("hint: install rayshare"), "{table}");

    // The chart installed by the real helm, with its default image: no pod of it ever runs.
    const RELEASE: &str = "rayshare-check";
    const RELEASE_NS: &str = "e2e-check-helm";
    const KEY: &str = "rayshare.io/e2e-check-helm";
    let admin = client(&CONTROL_PLANE.admin_kubeconfig).await;
    let work = format!("{RELEASE_NS}-work");
    create_namespace(&admin, &work, &[(KEY, "true")]).await;
    let out = tokio::process::Command::new(&*HELM)
        .args(["install", RELEASE])
        .arg(repo().join("charts/rayshare"))
        .args([
            "-n",
            RELEASE_NS,
            "--create-namespace",
            "--set",
            "replicaCount=1",
        ])
        .args(["--set", &format!("webhook.enableLabel.key={KEY}")])
        .arg("--kubeconfig")
        .arg(&CONTROL_PLANE.admin_kubeconfig)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "helm install: {out:?}");
    // Found by its instance label (config.instance, here the release's full name).
    let (code, report) = check(&["--instance", RELEASE]).await;
    assert_eq!(code, 1, "{report:#}");
    for ok in ["webhook", "caBundle", "namespaces"] {
        assert_eq!(level(&report, ok), "ok", "{ok}: {report:#}");
    }
    assert_eq!(said(&report, "namespaces"), format!("1 opted in: {work}"));
    assert_eq!(level(&report, "endpoints"), "fail", "{report:#}");
    assert_eq!(said(&report, "pods"), "none: the Service selects no pod");
    // Unreachable with failurePolicy Ignore: the job comes back as it went.
    assert_eq!(level(&report, "dry-run"), "fail", "{report:#}");
    assert!(said(&report, "dry-run").contains("came back unchanged"));

    // The kubelet's part (there is none here): the release's pod, stuck pulling its image.
    let deployment = Api::<Deployment>::namespaced(admin.clone(), RELEASE_NS)
        .get(RELEASE)
        .await
        .unwrap();
    let template = deployment.spec.unwrap().template;
    let container = &template.spec.as_ref().unwrap().containers[0];
    let (name, image) = (container.name.clone(), container.image.clone().unwrap());
    let mut pod = Pod {
        metadata: template.metadata.unwrap_or_default(),
        spec: template.spec,
        ..Default::default()
    };
    pod.metadata.name = Some(format!("{RELEASE}-0"));
    let pods: Api<Pod> = Api::namespaced(admin.clone(), RELEASE_NS);
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let stuck = json!({"status": {"phase": "Pending", "containerStatuses": [{
        "name": name, "image": image, "imageID": "", "ready": false, "restartCount": 0,
        "state": {"waiting": {"reason": "ImagePullBackOff", "message": "not found"}}}]}});
    pods.patch_status(
        &format!("{RELEASE}-0"),
        &PatchParams::default(),
        &Patch::Merge(&stuck),
    )
    .await
    .unwrap();
    let (code, report) = check(&["--instance", RELEASE, "-n", &work]).await;
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(
        said(&report, "pods"),
        format!("cannot pull the image: {RELEASE}-0 ({image})")
    );
    assert!(image.starts_with("ghcr.io/rayshare/rayshare:"), "{image}");
}
