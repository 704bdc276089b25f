//! The chart's opt-in pre-delete hook (uninstall.drain, issue 47), run by the real helm
//! against the control plane: `helm uninstall` makes the drain Job and waits for it before
//! deleting anything; the Job's own command, run as the Job's ServiceAccount (under the
//! release's RBAC and own-objects policy), drains the release's instance and nothing else.
//!
//! This control plane has no kubelet: the test stands in for one. It runs the Job's
//! container command (this build's binary at the image's path) with a kubeconfig that
//! impersonates the pod's ServiceAccount, then records the Job as complete, as the Job
//! controller would; helm sees that and goes on.

use std::process::Stdio;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, Patch, PatchParams};
use kube::config::Kubeconfig;
use serde_json::json;

use crate::drain_instances::{names, objects_of};
use crate::harness::*;

const RELEASE: &str = "rayshare-hook";
const RELEASE_NS: &str = "e2e-helm-hook";
const WORK_NS: &str = "e2e-helm-hook-work";

/// A kubeconfig file acting as `user` (the admin impersonating it).
fn kubeconfig_as(dir: &std::path::Path, namespace: &str, account: &str) -> std::path::PathBuf {
    let mut kc = Kubeconfig::read_from(&CONTROL_PLANE.admin_kubeconfig).unwrap();
    for named in &mut kc.auth_infos {
        let auth = named.auth_info.as_mut().unwrap();
        auth.impersonate = Some(format!("system:serviceaccount:{namespace}:{account}"));
        auth.impersonate_groups = Some(vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".into(),
        ]);
    }
    let path = dir.join("pod.kubeconfig");
    std::fs::write(&path, serde_norway::to_string(&kc).unwrap()).unwrap();
    path
}

fn helm(args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(&*HELM);
    cmd.args(args)
        .arg("--kubeconfig")
        .arg(&CONTROL_PLANE.admin_kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

#[tokio::test]
async fn helm_uninstall_runs_the_drain_hook_for_its_own_instance() {
    let admin = client(&CONTROL_PLANE.admin_kubeconfig).await;
    create_namespace(&admin, WORK_NS, &[]).await;
    // The release's objects (its instance is its full name) and another installation's.
    for (instance, tag) in [(RELEASE, "hook"), ("someone-else", "other")] {
        for object in objects_of(instance, tag) {
            create_in(&admin, WORK_NS, object, false).await;
        }
    }
    let chart = repo().join("charts/rayshare");
    let out = helm(&["install", RELEASE])
        .arg(&chart)
        .args([
            "-n",
            RELEASE_NS,
            "--create-namespace",
            "--set",
            "uninstall.drain=true",
        ])
        .args([
            "--set",
            "replicaCount=1",
            "--set",
            "uninstall.waitSeconds=30",
        ])
        // Its webhook must call nobody: other tests' namespaces carry the usual label.
        .args([
            "--set",
            "webhook.enableLabel.key=rayshare.io/e2e-helm-hook-none",
        ])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "helm install: {out:?}");

    let uninstall = helm(&["uninstall", RELEASE, "-n", RELEASE_NS, "--timeout", "120s"])
        .spawn()
        .unwrap();
    let jobs: Api<Job> = Api::namespaced(admin.clone(), RELEASE_NS);
    let job = wait_for("helm to make the drain Job", || async {
        jobs.get_opt(&format!("{RELEASE}-drain"))
            .await
            .ok()
            .flatten()
    })
    .await;
    // Nothing of the release is deleted while the hook runs.
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(admin.clone(), RELEASE_NS);
    assert!(deployments.get_opt(RELEASE).await.unwrap().is_some());

    // The kubelet's part: the Job's command, as its pod's ServiceAccount.
    let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let account = pod.service_account_name.as_deref().unwrap();
    let command = pod.containers[0].command.clone().unwrap();
    assert_eq!(command[0], "/usr/local/bin/rayshare", "{command:?}");
    let dir = tempfile::tempdir().unwrap();
    let drained = tokio::process::Command::new(env!("CARGO_BIN_EXE_rayshare"))
        .args(&command[1..])
        .arg("--kubeconfig")
        .arg(kubeconfig_as(dir.path(), RELEASE_NS, account))
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&drained.stdout);
    assert!(
        drained.status.success(),
        "{command:?}: {said}\n{}",
        String::from_utf8_lossy(&drained.stderr)
    );
    // The Job controller's part: the Job succeeded.
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let done = json!({"status": {"startTime": now, "completionTime": now, "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
            {"type": "Complete", "status": "True", "lastTransitionTime": now}]}});
    jobs.patch_status(
        &job.metadata.name.unwrap(),
        &PatchParams::default(),
        &Patch::Merge(&done),
    )
    .await
    .unwrap();

    let out = uninstall.wait_with_output().await.unwrap();
    assert!(out.status.success(), "helm uninstall: {out:?}");
    assert!(deployments.get_opt(RELEASE).await.unwrap().is_none());
    assert!(
        jobs.get_opt(&format!("{RELEASE}-drain"))
            .await
            .unwrap()
            .is_none(),
        "hook-succeeded"
    );
    // The release's cluster, claim and group are gone; the other installation's stay.
    let lease = resource("coordination.k8s.io", "v1", "Lease", "leases");
    for (ar, other) in [
        (ray_cluster_resource(), "ray-other"),
        (lease, "rayshare-idx-other-0"),
        (pod_group_resource(), "pg-other"),
    ] {
        let left = wait_for("the release's objects to go", || async {
            let left = names(&admin, &ar, WORK_NS).await;
            (!left.iter().any(|n| n.contains("hook"))).then_some(left)
        })
        .await;
        assert_eq!(left, vec![other.to_string()], "{said}");
    }
    assert!(
        said.contains(&format!("deleted: raycluster {WORK_NS}/ray-hook")),
        "{said}"
    );
}
