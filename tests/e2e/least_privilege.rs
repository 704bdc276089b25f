//! rayshare's ServiceAccount, with the chart's RBAC and own-objects policy (the harness
//! installs both, and every test runs rayshare under them), can write only its own Leases,
//! RayClusters and PodGroups: what a leaked token could otherwise do is refused.

use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};

use crate::harness::*;

/// A client acting as rayshare's ServiceAccount (the admin impersonating it).
async fn as_rayshare() -> Client {
    let mut kc = Kubeconfig::read_from(&CONTROL_PLANE.admin_kubeconfig).unwrap();
    for named in &mut kc.auth_infos {
        if let Some(auth) = named.auth_info.as_mut() {
            auth.impersonate = Some(format!(
                "system:serviceaccount:{RAYSHARE_NAMESPACE}:rayshare"
            ));
            auth.impersonate_groups = Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{RAYSHARE_NAMESPACE}"),
                "system:authenticated".into(),
            ]);
        }
    }
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

fn lease(name: &str, labels: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "labels": labels},
        "spec": {"holderIdentity": "someone"},
    }))
    .unwrap()
}

/// The refusal's HTTP code and message, or a panic naming what should have been refused.
fn refused<T: std::fmt::Debug>(what: &str, result: Result<T, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(e)) => (e.code, e.message),
        other => panic!("{what} was not refused: {other:?}"),
    }
}

#[tokio::test]
async fn rayshares_account_writes_only_its_own_objects() {
    let admin = client(&CONTROL_PLANE.admin_kubeconfig).await;
    let rayshare = as_rayshare().await;
    let ns = "e2e-least-privilege";
    create_namespace(&admin, ns, &[(ENABLE_LABEL, "true")]).await;
    let off = "e2e-least-privilege-off";
    create_namespace(&admin, off, &[]).await;
    let lease_res = resource("coordination.k8s.io", "v1", "Lease", "leases");
    let admin_leases: Api<DynamicObject> = Api::namespaced_with(admin.clone(), ns, &lease_res);
    let leases: Api<DynamicObject> = Api::namespaced_with(rayshare.clone(), ns, &lease_res);
    // Someone else's leader election and a node's heartbeat.
    admin_leases
        .create(&PostParams::default(), &lease("kube-scheduler", json!({})))
        .await
        .unwrap();

    // RBAC: no update of Leases outside its own leader Lease.
    let mut theirs = admin_leases.get("kube-scheduler").await.unwrap();
    theirs.data["spec"]["holderIdentity"] = json!("rayshare");
    let (code, _) = refused(
        "taking over another leader Lease",
        leases
            .replace("kube-scheduler", &PostParams::default(), &theirs)
            .await,
    );
    assert_eq!(code, 403);

    // The API server enforces the policy (installed with the world) once its informer has it.
    let dry_run = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    wait_for("the own-objects policy to be in force", || async {
        leases
            .delete("kube-scheduler", &dry_run)
            .await
            .is_err()
            .then_some(())
    })
    .await;
    // The policy: no delete or create of a Lease that is not an index claim.
    let (code, message) = refused(
        "deleting another leader Lease",
        leases
            .delete("kube-scheduler", &DeleteParams::default())
            .await,
    );
    assert_eq!(code, 403);
    assert!(
        message.contains("rayshare may write only its own leases"),
        "{message}"
    );
    let node_leases: Api<DynamicObject> =
        Api::namespaced_with(rayshare.clone(), "kube-node-lease", &lease_res);
    refused(
        "creating a node heartbeat",
        node_leases
            .create(&PostParams::default(), &lease("node-1", json!({})))
            .await,
    );
    // Its own kind of Lease it may create and delete, in a namespace the webhook serves.
    let claim = lease("claim", json!({"rayshare.io/index-claim": "true"}));
    for elsewhere in ["kube-system", off] {
        let there: Api<DynamicObject> =
            Api::namespaced_with(rayshare.clone(), elsewhere, &lease_res);
        let (code, message) = refused(
            &format!("creating an index claim in {elsewhere}"),
            there.create(&PostParams::default(), &claim).await,
        );
        assert_eq!(code, 403);
        assert!(
            message.contains("only in namespaces the webhook serves"),
            "{message}"
        );
    }
    leases.create(&PostParams::default(), &claim).await.unwrap();
    leases
        .delete("claim", &DeleteParams::default())
        .await
        .unwrap();

    // Someone's own RayCluster: never deleted; rayshare's: may be.
    let cluster = |name: &str, labels: Value| {
        json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
                "containers": [{"name": "ray-head", "image": "rayproject/ray"}]}}}}})
    };
    apply(&admin, &cluster("users", json!({}))).await;
    apply(
        &admin,
        &cluster(
            "shared",
            json!({"app.kubernetes.io/managed-by": "rayshare"}),
        ),
    )
    .await;
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(rayshare.clone(), ns, &ray_cluster_resource());
    let (code, message) = refused(
        "deleting a user's RayCluster",
        clusters.delete("users", &DeleteParams::default()).await,
    );
    assert_eq!(code, 403);
    assert!(message.contains("rayclusters"), "{message}");
    // Its own kind of RayCluster, but privileged and outside what the webhook serves: a
    // leaked token must not turn into pods in kube-system.
    let managed = json!({"app.kubernetes.io/managed-by": "rayshare"});
    for elsewhere in ["kube-system", off] {
        let mut privileged = cluster("squat", managed.clone());
        privileged["metadata"]["namespace"] = json!(elsewhere);
        privileged["spec"]["headGroupSpec"]["template"]["spec"]["hostPID"] = json!(true);
        let there: Api<DynamicObject> =
            Api::namespaced_with(rayshare.clone(), elsewhere, &ray_cluster_resource());
        let object: DynamicObject = serde_json::from_value(privileged).unwrap();
        let (code, message) = refused(
            &format!("creating a RayCluster in {elsewhere}"),
            there.create(&PostParams::default(), &object).await,
        );
        assert_eq!(code, 403);
        assert!(
            message.contains("only in namespaces the webhook serves"),
            "{message}"
        );
    }
    // Where it serves, it may create its own, and change its metadata, never its spec.
    let own: DynamicObject = serde_json::from_value(cluster("own", managed.clone())).unwrap();
    clusters.create(&PostParams::default(), &own).await.unwrap();
    let params = kube::api::PatchParams::default();
    let annotate = json!({"metadata": {"annotations": {"rayshare.io/idle-since": "x"}}});
    clusters
        .patch("own", &params, &kube::api::Patch::Merge(&annotate))
        .await
        .unwrap();
    let host_pid = json!({"spec": {"headGroupSpec": {"template": {"spec": {"hostPID": true}}}}});
    let (code, message) = refused(
        "changing a RayCluster's spec",
        clusters
            .patch("own", &params, &kube::api::Patch::Merge(&host_pid))
            .await,
    );
    assert_eq!(code, 403);
    assert!(message.contains("never changes the spec"), "{message}");
    clusters
        .delete("own", &DeleteParams::default())
        .await
        .unwrap();
    clusters
        .delete("shared", &DeleteParams::default())
        .await
        .unwrap();

    // A RayJob: the wake annotation, and nothing else.
    let mut job = sample("rayjob-run-a.yaml");
    job["metadata"]["name"] = json!("users-job");
    job["metadata"]["annotations"] = json!({"team": "a"});
    create_in(&admin, ns, job, false).await;
    let jobs: Api<DynamicObject> = Api::namespaced_with(rayshare.clone(), ns, &ray_job_resource());
    let merge = |patch: Value| {
        let jobs = jobs.clone();
        async move {
            let params = kube::api::PatchParams::default();
            jobs.patch("users-job", &params, &kube::api::Patch::Merge(&patch))
                .await
        }
    };
    let woken = merge(json!({"metadata": {"annotations": {
        "rayshare.io/cluster-made": "2026-01-01T00:00:00Z"}}}))
    .await
    .unwrap();
    assert_eq!(woken.metadata.annotations.unwrap()["team"], "a");
    for (what, patch) in [
        (
            "a RayJob's spec",
            json!({"spec": {"entrypoint": "rm -rf /"}}),
        ),
        (
            "another annotation",
            json!({"metadata": {"annotations": {"team": "b"}}}),
        ),
        (
            "a new annotation",
            json!({"metadata": {"annotations": {"x": "y"}}}),
        ),
        ("a label", json!({"metadata": {"labels": {"x": "y"}}})),
        (
            "its finalizers",
            json!({"metadata": {"finalizers": ["x.io/keep"]}}),
        ),
    ] {
        let (code, message) = refused(what, merge(patch).await);
        assert_eq!(code, 403, "{what}: {message}");
        assert!(message.contains("rayshare.io/cluster-made"), "{message}");
    }
    let (code, _) = refused(
        "deleting a RayJob",
        jobs.delete("users-job", &DeleteParams::default()).await,
    );
    assert_eq!(code, 403);
}
