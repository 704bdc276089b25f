//! The stopper's side effects stay with what rayshare made, in the tenant's own namespace
//! (issue 30): a tenant who names its head service after an ExternalName Service and
//! plants pods labelled as the cluster's head gets no call to the address it chose, and a
//! submission tied to another namespace is never stopped, while the Ray job of a deleted
//! RayJob on the head KubeRay made is.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::harness::*;
use crate::ray_head::{RAY_HEAD, RAY_TOKEN_HEAD, head_pod, report_head};
use crate::ray_jobs::{PRINT_RUN, config_via_head_pod, create_and_submit, job, shared_cluster};

/// A listener on 127.0.0.1 that counts the connections made to it and answers nothing.
async fn trap() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let count = hits.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            drop(socket);
        }
    });
    (port, hits)
}

#[tokio::test]
async fn the_stopper_calls_only_the_head_kuberay_made_and_only_its_namespaces_jobs() {
    let env = TestEnv::new("isolation", &config_via_head_pod(""), 1).await;
    // The tenant names its head service `proxy`, an ExternalName Service it made.
    let services: Api<Service> = Api::namespaced(env.admin.clone(), &env.ns);
    let proxy: Service = serde_json::from_value(json!({
        "metadata": {"name": "proxy"},
        "spec": {"type": "ExternalName", "externalName": "rayshare-victim.example"},
    }))
    .unwrap();
    services
        .create(&PostParams::default(), &proxy)
        .await
        .unwrap();
    let mut tenant_job = job("rayjob-run-a.yaml", "t", PRINT_RUN);
    tenant_job["spec"]["rayClusterSpec"]["headGroupSpec"]["headService"] =
        json!({"metadata": {"name": "proxy"}});
    let stored = create_and_submit(&env, tenant_job).await;
    let cluster_name = stored["spec"]["clusterSelector"]["ray.io/cluster"]
        .as_str()
        .unwrap();
    let cluster = shared_cluster(&env, cluster_name).await;
    let cluster_uid = cluster["metadata"]["uid"].as_str().unwrap();

    // Pods labelled as the cluster's head, pointing at addresses the tenant chose: one
    // whose owner reference names the cluster itself (anyone who may create pods can
    // write one), one controlled by the tenant's RayJob; both named to sort before
    // KubeRay's.
    let (trap_port, hits) = trap().await;
    let job_uid = stored["metadata"]["uid"].as_str().unwrap();
    head_pod(&env, &cluster, "a-impostor", cluster_uid, trap_port).await;
    head_pod(&env, &cluster, "b-impostor", job_uid, trap_port).await;
    // And the head KubeRay made.
    let head = format!("{cluster_name}-head-x7k2p");
    head_pod(&env, &cluster, &head, cluster_uid, RAY_HEAD.port()).await;
    report_head(&env, &cluster, &head).await;

    // A submission of this installation tied to another namespace, whose token no
    // RayJob carries: judged by this namespace's jobs it would be "deleted".
    let token_env: Value =
        serde_norway::from_str(stored["spec"]["runtimeEnvYAML"].as_str().unwrap()).unwrap();
    let own = token_env["env_vars"]["RAYSHARE_ADMISSION"]
        .as_str()
        .unwrap();
    let instance = own.split('/').next().unwrap();
    let foreign =
        json!({"env_vars": {"RAYSHARE_ADMISSION": format!("{instance}/other-team/no-such-token")}});
    RAY_HEAD
        .submit(
            "other-namespace",
            Some(&foreign.to_string()),
            "python -c 'import time; time.sleep(3600)'",
        )
        .await;
    RAY_HEAD.wait_status("other-namespace", "RUNNING").await;

    // The tenant's own job ends with its RayJob, on the head KubeRay made.
    let jobs = env.api(&ray_job_resource(), &env.ns);
    jobs.delete("t", &DeleteParams::default()).await.unwrap();
    RAY_HEAD.wait_stopped("t-sub").await;
    // A whole pass over the cluster after that stop: every submission was judged.
    env.instances[0].wait_passes("RayJobStop", 2).await;

    assert_eq!(RAY_HEAD.status("other-namespace").await, "RUNNING");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "the stopper called an address a tenant chose"
    );
    RAY_HEAD.stop("other-namespace").await;
}

/// A cluster in token mode (KubeRay 1.6 `authOptions.mode: token`, Ray's
/// `RAY_AUTH_MODE=token`): the stopper reads the token from the Secret KubeRay made for the
/// cluster, as KubeRay's own dashboard client does, and stops the deleted RayJob's job.
#[tokio::test]
async fn a_token_mode_heads_job_is_stopped_when_its_rayjob_is_deleted() {
    let head = &*RAY_TOKEN_HEAD;
    let env = TestEnv::new("token-auth", &config_via_head_pod(""), 1).await;
    let mut tenant_job = job("rayjob-run-a.yaml", "tk", PRINT_RUN);
    tenant_job["spec"]["rayClusterSpec"]["authOptions"] = json!({"mode": "token"});
    let stored = create_in(&env.admin, &env.ns, tenant_job, false).await;
    let renv: Value =
        serde_norway::from_str(stored["spec"]["runtimeEnvYAML"].as_str().unwrap()).unwrap();
    head.submit("tk-sub", Some(&renv.to_string()), PRINT_RUN)
        .await;
    head.wait_status("tk-sub", "RUNNING").await;
    let cluster_name = stored["spec"]["clusterSelector"]["ray.io/cluster"]
        .as_str()
        .unwrap();
    let cluster = shared_cluster(&env, cluster_name).await;
    assert_eq!(cluster["spec"]["authOptions"]["mode"], "token");
    let cluster_uid = cluster["metadata"]["uid"].as_str().unwrap();

    // As KubeRay makes them: the token's Secret (named like the cluster, controlled by
    // it) and the head pod.
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": cluster_name, "labels": {"ray.io/cluster": cluster_name},
            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster",
                "name": cluster_name, "uid": cluster_uid, "controller": true}]},
        "stringData": {"auth_token": head.token.clone().unwrap()},
    }))
    .unwrap();
    Api::<Secret>::namespaced(env.admin.clone(), &env.ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let head_name = format!("{cluster_name}-head-t0k3n");
    head_pod(&env, &cluster, &head_name, cluster_uid, head.port()).await;
    report_head(&env, &cluster, &head_name).await;

    let jobs = env.api(&ray_job_resource(), &env.ns);
    jobs.delete("tk", &DeleteParams::default()).await.unwrap();
    head.wait_stopped("tk-sub").await;
}
