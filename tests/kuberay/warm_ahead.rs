//! Warm ahead of demand through the real KubeRay operator: a config's tasks fan out and
//! finish, Flyte deletes their RayJobs, the member goes; warm-ahead makes it again from
//! the template it kept, KubeRay brings it up, and the config's next task starts on the
//! member made before it arrived.

use kube::api::DeleteParams;
use serde_json::json;

use crate::harness::*;
use crate::shared_clusters::*;
use crate::world::*;

/// A half-life of a minute against a five-minute idle TTL: a fan-out just seen says the
/// next task is due in about 87 s, within the TTL.
const CONFIG: &str = "reclaim:\n  idleTtlSeconds: 300\n  intervalSeconds: 1\n  quietSeconds: 2\n  headSilenceSeconds: 0\n  namespaces: [e2e-kr-warm]\n\
warmAhead:\n  enabled: true\n  namespaces: [e2e-kr-warm]\n  halfLifeSeconds: 60\n";

async fn state(env: &TestEnv, job: &str) -> String {
    ray_job(env, job).await["status"]["jobDeploymentStatus"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

async fn started(env: &TestEnv, job: &str) -> String {
    wait_for_within(SLOW, "KubeRay to start the job", || async {
        let s = state(env, job).await;
        (!["", "New", "Initializing"].contains(&s.as_str())).then_some(s)
    })
    .await
}

#[tokio::test]
async fn a_member_made_ahead_after_its_jobs_are_gone_serves_the_next_task() {
    let env = TestEnv::new("kr-warm", CONFIG, 1).await;
    let _kuberay = KubeRay::start(&env.name, &[&env.ns], &KubeRayOptions::default()).await;
    let (file, _, _) = JOBS[0];
    let jobs = env.api(&ray_job_resource(), &env.ns);
    let clusters = env.api(&ray_cluster_resource(), &env.ns);

    // A map task's fan-out of three tasks of one config, run by KubeRay on one member.
    let names = ["fan-0", "fan-1", "fan-2"];
    let mut member = None;
    for name in names {
        member = selected(&create_job(&env, file, name).await);
    }
    let member = member.unwrap();
    for name in names {
        assert_eq!(started(&env, name).await, "Running");
    }
    // Flyte deletes the tasks' RayJobs once they are done (KubeRay v1.4 keeps a job
    // Running while no dashboard answers); the member idles.
    for name in names {
        jobs.delete(name, &DeleteParams::default()).await.unwrap();
    }
    wait_for_within(SLOW, "the tasks' RayJobs to go", || async {
        let left = list_json(&env.admin, &ray_job_resource(), &env.ns, "").await;
        left.is_empty().then_some(())
    })
    .await;
    // Idle, and kept past its TTL: the config's arrivals say the next task is near.
    let why = wait_for_within(SLOW, "the member to be kept warm", || {
        kept_warm(&env, &member)
    })
    .await;
    assert!(why.starts_with("kept warm: about"), "{why}");

    // The member goes (a person's delete stands for a node pool's loss): nothing stored
    // of the config is left to build from.
    let first = cluster_uid(&env, &member).await.expect("the member");
    clusters
        .delete(&member, &DeleteParams::default())
        .await
        .unwrap();

    // Made again ahead of any task, and brought up by KubeRay on the kwok nodes.
    let again = wait_for_within(SLOW, "the member made ahead and ready", || async {
        let c = ray_clusters(&env).await.remove(&member)?;
        let uid = c["metadata"]["uid"].as_str()?.to_string();
        (uid != first && c["status"]["state"] == "ready").then_some(uid)
    })
    .await;
    let log = env.instances[0].log_text();
    assert!(
        log.contains("made a shared cluster ahead of demand"),
        "not made by warm-ahead"
    );

    // The config's next task: sent to the member made ahead, which was ready before it
    // arrived, and started there by KubeRay.
    let next = selected(&create_job(&env, file, "next").await);
    assert_eq!(next.as_deref(), Some(member.as_str()));
    assert_eq!(started(&env, "next").await, "Running");
    let status = ray_job(&env, "next").await["status"].clone();
    assert_eq!(status["rayClusterName"], json!(member), "{status}");
    assert_eq!(cluster_uid(&env, &member).await, Some(again));
}
