//! Ray's job table on a real, shared Ray head (issue 31): the record of a finished Ray job
//! is deleted once its RayJob is gone; the record of one whose RayJob is still there, and
//! someone else's, stay.

use kube::api::DeleteParams;

use crate::harness::*;
use crate::ray_head::{RAY_HEAD, head_pod, report_head};
use crate::ray_jobs::{config_via_head_pod, create_and_submit, job, shared_cluster};

/// Ends at once.
const PRINT_ONE: &str = "python -c 'print(1)'";

async fn deleted(env: &TestEnv) -> u64 {
    let metrics = env.instances[0].metrics().await;
    metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix("rayshare_ray_jobs_deleted_total ")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no rayshare_ray_jobs_deleted_total in\n{metrics}"))
}

#[tokio::test]
async fn a_finished_ray_jobs_record_goes_with_its_rayjob() {
    let env = TestEnv::new("raytable", &config_via_head_pod(""), 1).await;
    let jobs = env.api(&ray_job_resource(), &env.ns);
    let done = create_and_submit(&env, job("rayjob-run-a.yaml", "done", PRINT_ONE)).await;
    let kept = create_and_submit(&env, job("rayjob-run-b.yaml", "kept", PRINT_ONE)).await;
    RAY_HEAD.submit("foreign-raytable", None, PRINT_ONE).await;
    let cluster_name = done["spec"]["clusterSelector"]["ray.io/cluster"]
        .as_str()
        .unwrap();
    assert_eq!(
        kept["spec"]["clusterSelector"],
        done["spec"]["clusterSelector"]
    );
    for id in ["done-sub", "kept-sub", "foreign-raytable"] {
        RAY_HEAD.wait_status(id, "SUCCEEDED").await;
    }
    // KubeRay's head pod for the cluster: from now on the stopper reads its job table.
    let cluster = shared_cluster(&env, cluster_name).await;
    let uid = cluster["metadata"]["uid"].as_str().unwrap();
    head_pod(&env, &cluster, "head", uid, RAY_HEAD.port()).await;
    report_head(&env, &cluster, "head").await;
    // A pass that read the cluster's job table (it sets the cluster's unattributed count),
    // ended while both RayJobs are there: nothing goes.
    let gauge = format!(
        "rayshare_ray_jobs_unattributed{{cluster_namespace=\"{}\",cluster=\"{cluster_name}\"}} ",
        env.ns
    );
    wait_for("a pass that read the head's job table", || async {
        let metrics = env.instances[0].metrics().await;
        metrics.contains(&gauge).then_some(())
    })
    .await;
    env.instances[0].wait_passes("RayJobStop", 1).await;
    let ids = RAY_HEAD.submission_ids().await;
    for id in ["done-sub", "kept-sub", "foreign-raytable"] {
        assert!(ids.iter().any(|i| i == id), "{id} not in {ids:?}");
    }
    assert_eq!(deleted(&env).await, 0);

    // Its RayJob deleted (a Flyte run cleaned up), the finished job's record goes.
    jobs.delete("done", &DeleteParams::default()).await.unwrap();
    wait_for("done-sub to leave the head's job table", || async {
        let ids = RAY_HEAD.submission_ids().await;
        (!ids.iter().any(|i| i == "done-sub")).then_some(())
    })
    .await;
    let count = wait_for("the deletion to be counted", || async {
        Some(deleted(&env).await).filter(|n| *n > 0)
    })
    .await;
    assert_eq!(count, 1);

    // A whole pass after it: the others are still listed, as they were.
    env.instances[0].wait_passes("RayJobStop", 2).await;
    for id in ["kept-sub", "foreign-raytable"] {
        assert_eq!(RAY_HEAD.status(id).await, "SUCCEEDED", "{id}");
    }
    assert_eq!(deleted(&env).await, 1);
    RAY_HEAD.delete("foreign-raytable").await;
}
