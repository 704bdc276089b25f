//! Reclaim with KubeRay: an idle shared cluster is deleted and KubeRay's pods and services
//! go with it (garbage collector), and jobs admitted while clusters are being reclaimed
//! are never stranded.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::harness::*;
use crate::shared_clusters::*;
use crate::world::*;

async fn state(env: &TestEnv, job: &str) -> String {
    ray_job(env, job).await["status"]["jobDeploymentStatus"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// A job runs its course under KubeRay (kwok completes the submitter pod; without a Ray
/// dashboard to ask, KubeRay fails the job 30 s later), its cluster idles past the TTL, is
/// reclaimed, and the garbage collector takes KubeRay's pods and services with it.
#[tokio::test]
async fn an_idle_cluster_goes_with_kuberays_pods_and_services() {
    // kwok's heads run no Ray: no dashboard answers, so the RayJobs alone decide.
    let config = "reclaim:\n  idleTtlSeconds: 3\n  intervalSeconds: 1\n  quietSeconds: 2\n  headSilenceSeconds: 0\n  namespaces: [e2e-kr-reclaim]\n";
    let env = TestEnv::new("kr-reclaim", config, 1).await;
    let _kuberay = KubeRay::start(&env.name, &[&env.ns], &KubeRayOptions::default()).await;
    let (file, job, _) = JOBS[0];
    let cluster = selected(&create_job(&env, file, job).await).unwrap();
    let pods: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);
    let services: Api<Service> = Api::namespaced(env.admin.clone(), &env.ns);
    let of_cluster = ListParams::default().labels(&format!("ray.io/cluster={cluster}"));
    let owned = wait_for_within(
        SLOW,
        "KubeRay's pods and services of the cluster",
        || async {
            let p = pods.list(&of_cluster).await.ok()?.items.len();
            let s = services.list(&of_cluster).await.ok()?.items.len();
            (p == 3 && s >= 1).then_some((p, s))
        },
    )
    .await;
    let end = if !kuberay_v1_4() {
        wait_for_within(SLOW, "KubeRay to end the job", || async {
            let s = state(&env, job).await;
            ["Complete", "Failed"].contains(&s.as_str()).then_some(s)
        })
        .await
    } else {
        // v1.4 asks the dashboard for ever once the submitter is done: the run is cancelled.
        env.api(&ray_job_resource(), &env.ns)
            .delete(job, &Default::default())
            .await
            .unwrap();
        "cancelled".to_string()
    };
    wait_for_within(SLOW, "the idle cluster to be reclaimed", || async {
        cluster_uid(&env, &cluster).await.is_none().then_some(())
    })
    .await;
    wait_for_within(SLOW, "its pods and services to be collected", || async {
        let p = pods.list(&of_cluster).await.ok()?.items.len();
        let s = services.list(&of_cluster).await.ok()?.items.len();
        (p + s == 0).then_some(())
    })
    .await;
    env.instances[0]
        .wait_for_log("reclaimed idle shared cluster")
        .await;
    eprintln!(
        "[kr-reclaim] job {end}; cluster {cluster} reclaimed with {} pods and {} services",
        owned.0, owned.1
    );
}

/// Admission raced against reclamation, as in the API-server-only race test, now with
/// KubeRay: every admitted job's cluster is made (or kept) for it, KubeRay brings it up
/// and starts the job; only then is the job finished (as a quick job would be)
/// and the next one lands at varying points of the idle TTL and the reclaimer's cycle.
#[tokio::test]
async fn jobs_admitted_during_reclamation_are_never_stranded() {
    let config = "reclaim:\n  idleTtlSeconds: 1\n  intervalSeconds: 1\n  quietSeconds: 1\n  headSilenceSeconds: 0\n  namespaces: [e2e-kr-race]\n";
    let env = TestEnv::new("kr-race", config, 1).await;
    let _kuberay = KubeRay::start(&env.name, &[&env.ns], &KubeRayOptions::default()).await;
    let mut uids = BTreeSet::new();
    let mut unchanged = 0;
    for i in 0..20u64 {
        let name = format!("job-{i}");
        let job = create_job(&env, "rayjob-run-a.yaml", &name).await;
        let Some(cluster) = selected(&job) else {
            unchanged += 1; // fail-open: the job kept its own cluster
            continue;
        };
        let s = wait_for_within(
            SLOW,
            &format!("KubeRay to start {name} on {cluster}"),
            || async {
                let s = state(&env, &name).await;
                (!["", "New", "Initializing"].contains(&s.as_str())).then_some(s)
            },
        )
        .await;
        assert_eq!(
            s,
            "Running",
            "{name}: {}",
            ray_job(&env, &name).await["status"]
        );
        // Running: KubeRay found its cluster (made, or kept, for this stored job).
        uids.extend(cluster_uid(&env, &cluster).await);
        let patch = json!({"status": {"jobDeploymentStatus": "Complete",
            "endTime": k8s_openapi::jiff::Timestamp::now().to_string()}});
        env.api(&ray_job_resource(), &env.ns)
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis((i * 337) % 5000)).await;
    }
    // KubeRay may look at a job before the provisioner has made its cluster (a new
    // config, or one just reclaimed): it warns and retries. Every job above still reached
    // Running; the warnings are counted for the report.
    let waited = describe(&events(&env.admin, &env.ns, "RayJob").await)
        .into_iter()
        .filter(|e| e.contains("RayClusterNotFound"))
        .count();
    eprintln!("[kr-race] {waited} RayClusterNotFound warnings before the cluster was made");
    eprintln!(
        "[kr-race] {} cluster incarnations, {unchanged} jobs passed unchanged",
        uids.len()
    );
    assert!(
        uids.len() > 1,
        "the race was not exercised: the cluster was never reclaimed"
    );
}
