//! `rayshare drain` after an uninstall (issue 31): idle shared clusters go at once, a busy
//! one once its job ends, index claims with them, PodGroups never taken up go or go with
//! their pod; nothing of rayshare's is left.

use std::process::Stdio;

use kube::api::{ListParams, PostParams};
use serde_json::json;

use crate::harness::*;

#[tokio::test]
async fn drain_leaves_no_shared_cluster_and_waits_for_running_jobs() {
    let mut env = TestEnv::new("drain", DEFAULT_CONFIG, 1).await;
    let mut made = Vec::new();
    for (name, image) in [
        ("done", "rayproject/ray:2.41.0"),
        ("running", "rayproject/ray:2.42.0"),
    ] {
        let mut job = sample("rayjob-run-a.yaml");
        job["metadata"]["name"] = json!(name);
        job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] =
            json!(image);
        let stored = create_in(&env.admin, &env.ns, job, false).await;
        made.push(
            stored["spec"]["clusterSelector"]["ray.io/cluster"]
                .as_str()
                .expect("rewritten")
                .to_string(),
        );
    }
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    for name in &made {
        wait_for("the shared cluster", || async {
            clusters.get_opt(name).await.ok().flatten()
        })
        .await;
    }
    finish(&env, "done").await;
    // An index claim, as a worker pod's admission leaves it.
    let leases = env.api(
        &resource("coordination.k8s.io", "v1", "Lease", "leases"),
        &env.ns,
    );
    let claim = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "rayshare-idx-x-0", "labels": {
            "app.kubernetes.io/managed-by": "rayshare", "rayshare.io/index-claim": "true",
            "rayshare.io/instance": env.name,
            "ray.io/cluster": made[1], "ray.io/group": "g",
            "ray.io/worker-group-replica-index": "0", "rayshare.io/claim-hosts": "4"}},
        "spec": {}});
    leases
        .create(
            &PostParams::default(),
            &serde_json::from_value(claim).unwrap(),
        )
        .await
        .unwrap();
    // Two PodGroups made at admission and never taken up (no owner): one no pod names any
    // more, one whose pod still names it.
    let groups = env.api(&pod_group_resource(), &env.ns);
    for name in ["pg-gone", "pg-kept"] {
        let group = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "rayshare",
                "rayshare.io/instance": env.name,
                "rayshare.io/pod": format!("task-{name}")}},
            "spec": {"minMember": 1}});
        groups
            .create(
                &PostParams::default(),
                &serde_json::from_value(group).unwrap(),
            )
            .await
            .unwrap();
    }
    // Uninstalled: the webhook and its reconcilers are gone.
    env.instances[0].stop();
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        // A generated name: the group's label holds only its prefix.
        "metadata": {"generateName": "task-pg-kept-", "annotations": {"scheduling.k8s.io/group-name": "pg-kept"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let pod = create_in(&env.admin, &env.ns, pod, false).await;

    let mut drain = rayshare_drain(&[
        "-n",
        &env.ns,
        "--instance",
        &env.name,
        "--wait-seconds",
        "120",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // The idle cluster goes at once; the busy one stays while its job runs.
    wait_for("the idle cluster to go", || async {
        let gone = clusters.get_opt(&made[0]).await.ok()?.is_none();
        gone.then_some(())
    })
    .await;
    let claims = ListParams::default().labels("rayshare.io/index-claim=true");
    wait_for("the index claims to go", || async {
        leases
            .list(&claims)
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    wait_for("the group whose pod is gone to go", || async {
        groups
            .get_opt("pg-gone")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    // Groups are handled one after another: the kept one's owner may come a call later.
    let owners = wait_for("the kept group to be owned by its pod", || async {
        let kept = groups.get("pg-kept").await.ok()?;
        kept.metadata.owner_references.filter(|o| !o.is_empty())
    })
    .await;
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(
        (owners[0].kind.as_str(), Some(owners[0].uid.as_str())),
        ("Pod", pod["metadata"]["uid"].as_str())
    );
    assert!(
        clusters.get_opt(&made[1]).await.unwrap().is_some(),
        "a cluster whose job runs was deleted"
    );
    assert!(
        drain.try_wait().unwrap().is_none(),
        "drain ended with a job running"
    );

    // Its job ends: the last cluster goes and the drain ends, successfully.
    finish(&env, "running").await;
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), drain.wait_with_output())
        .await
        .expect("drain to end once the job ended")
        .unwrap();
    let stdout = drained(&out);
    assert!(
        stdout.contains(&format!(
            "waiting: raycluster {}/{} runs running",
            env.ns, made[1]
        )),
        "{stdout}"
    );
    assert!(clusters.get_opt(&made[1]).await.unwrap().is_none());
    assert!(
        clusters
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn drain_tells_what_still_runs_when_the_wait_is_over() {
    let mut env = TestEnv::new("drain-busy", DEFAULT_CONFIG, 1).await;
    let name = crate::drain_instances::shared_cluster(&env).await;
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    env.instances[0].stop();
    let out = rayshare_drain(&[
        "-n",
        &env.ns,
        "--instance",
        &env.name,
        "--wait-seconds",
        "0",
    ])
    .output()
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("still busy: raycluster {}/{name}", env.ns)),
        "{stderr}"
    );
    assert!(clusters.get_opt(&name).await.unwrap().is_some());
    // Forced: it goes now, its job with it.
    let out = rayshare_drain(&["--force", "-n", &env.ns, "--all-instances"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(clusters.get_opt(&name).await.unwrap().is_none());
}

/// `rayshare drain <args>` against the test control plane, as an operator runs it.
pub(crate) fn rayshare_drain(args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_rayshare"));
    command
        .arg("drain")
        .args(args)
        .arg("--kubeconfig")
        .arg(&CONTROL_PLANE.admin_kubeconfig);
    command
}

/// The output of a drain that must have succeeded (else both streams, in the panic).
pub(crate) fn drained(out: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "drain: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
