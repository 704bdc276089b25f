//! RayJobs sent to shared clusters: the rewrite, dry runs and choosing a pool member.

use std::sync::Arc;

use rstest::rstest;
use serde_json::{Value, json};

use super::{AppState, patch_of, post, post_and_store, review, sample, state};
use crate::config::Config;
use crate::world::MemoryWorld;

#[tokio::test]
async fn rayjob_create_is_rewritten_and_its_cluster_made_only_once_stored() {
    let s = state(MemoryWorld::default(), Config::default());
    let body = review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob"));
    post(s.clone(), &body).await;
    assert!(
        s.world.created().is_empty(),
        "admission alone (a review anyone can forge) makes nothing"
    );
    let r = post_and_store(s.clone(), &body).await;
    assert_eq!(r["uid"], "uid-1");
    assert_eq!(r["allowed"], true);
    assert_eq!(r["patchType"], "JSONPatch");
    let ops = patch_of(&r);
    assert!(
        ops.iter()
            .any(|o| o["op"] == "remove" && o["path"] == "/spec/rayClusterSpec")
    );
    assert!(ops.iter().any(|o| o["path"] == "/spec/clusterSelector"));
    let created = s.world.created();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0]["kind"], "RayCluster");
    assert_eq!(created[0]["metadata"]["namespace"], "team");
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap()
            .contains("shared RayCluster")
    );
}

#[tokio::test]
async fn dry_run_answers_the_patch_and_creates_nothing() {
    let s = state(MemoryWorld::default(), Config::default());
    let mut body = review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob"));
    body["request"]["dryRun"] = json!(true);
    let r = post(s.clone(), &body).await;
    assert!(!patch_of(&r).is_empty());
    let mut body = review("", "v1", "Pod", "CREATE", sample("pod"));
    body["request"]["dryRun"] = json!(true);
    let r = post(s.clone(), &body).await;
    assert!(!patch_of(&r).is_empty());
    assert!(s.world.created().is_empty());
    let queued = |s: &Arc<AppState<MemoryWorld>>| s.world.events.lock().unwrap().len();
    assert_eq!(queued(&s), 0, "a dry run queues no event");
    // The same RayJob for real does.
    let body = review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob"));
    post(s.clone(), &body).await;
    assert_eq!(queued(&s), 1);
}

/// Edits every stored object (the cluster of the first job), then admits the job again.
async fn repost_after_editing_clusters(
    s: Arc<AppState<MemoryWorld>>,
    edit: impl Fn(&mut Value),
) -> Value {
    s.world.objects.lock().unwrap().values_mut().for_each(edit);
    post_and_store(
        s,
        &review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob")),
    )
    .await
}

#[tokio::test]
async fn a_foreign_cluster_of_the_same_name_is_never_taken_over() {
    let s = state(MemoryWorld::default(), Config::default());
    let first = post_and_store(
        s.clone(),
        &review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob")),
    )
    .await;
    assert!(first.get("patch").is_some());
    // Replace the cluster with a foreign one of the same name.
    let r = repost_after_editing_clusters(s, |v| {
        v["metadata"]["labels"] = json!({"owner": "someone-else"})
    })
    .await;
    assert!(r.get("patch").is_none());
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap()
            .contains("did not create")
    );
}

/// Five jobs of one config, at most two per cluster, fill the pool's members in order;
/// `stored`: each job is stored (and its cluster made) before the next arrives.
async fn five_jobs_on_a_pool_of_two(stored: bool) -> Arc<AppState<MemoryWorld>> {
    let mut config = Config::default();
    config.shared_clusters.max_jobs_per_cluster = 2;
    let s = state(MemoryWorld::default(), config);
    let mut selected = Vec::new();
    for i in 0..5 {
        let mut job = sample("rayjob");
        job["metadata"]["name"] = json!(format!("job-{i}"));
        let body = review("ray.io", "v1", "RayJob", "CREATE", job);
        let r = if stored {
            post_and_store(s.clone(), &body).await
        } else {
            post(s.clone(), &body).await
        };
        let op = patch_of(&r)
            .into_iter()
            .find(|o| o["path"] == "/spec/clusterSelector")
            .unwrap();
        selected.push(op["value"]["ray.io/cluster"].as_str().unwrap().to_string());
    }
    let base = &selected[0];
    let want = [
        base.clone(),
        base.clone(),
        format!("{base}-1"),
        format!("{base}-1"),
        format!("{base}-2"),
    ];
    assert_eq!(selected, want);
    s
}

/// A burst that arrives before any member exists is spread as a trickle would be: the
/// jobs admitted to a member count against it before it is made.
#[tokio::test]
async fn a_burst_before_the_clusters_exist_fills_each_member_once() {
    let s = five_jobs_on_a_pool_of_two(false).await;
    assert!(s.world.created().is_empty(), "admission made a cluster");
}

#[tokio::test]
async fn a_full_cluster_sends_the_next_job_to_the_next_pool_member() {
    let s = five_jobs_on_a_pool_of_two(true).await;
    let created: Vec<Value> = s.world.created();
    assert_eq!(created.len(), 3);
    // Pool members are the same config: same spec and digest, different names.
    assert_eq!(created[0]["spec"], created[2]["spec"]);
    assert_eq!(
        created[0]["metadata"]["annotations"]["rayshare.io/config-digest"],
        created[2]["metadata"]["annotations"]["rayshare.io/config-digest"]
    );
}

/// Member 0 was reclaimed while member 1 stayed warm with room: the next job goes to
/// member 1, not to a cold start of member 0.
#[tokio::test]
async fn a_warm_member_is_preferred_to_a_missing_lower_one() {
    let s = five_jobs_on_a_pool_of_two(true).await;
    let base = {
        let objects = s.world.objects.lock().unwrap();
        let mut names: Vec<String> = objects.keys().map(|(_, _, n)| n.clone()).collect();
        names.sort();
        names[0].clone()
    };
    // Member 0 and its two jobs are gone (reclaimed once they ended).
    s.world
        .objects
        .lock()
        .unwrap()
        .retain(|(_, _, name), _| *name != base);
    s.world.jobs.lock().unwrap().retain(|(_, c), _| *c != base);
    let mut job = sample("rayjob");
    job["metadata"]["name"] = json!("job-5");
    let r = post(s, &review("ray.io", "v1", "RayJob", "CREATE", job)).await;
    let op = patch_of(&r)
        .into_iter()
        .find(|o| o["path"] == "/spec/clusterSelector")
        .unwrap();
    // Member 1 holds two jobs (full), member 2 one: member 2 gets it.
    assert_eq!(op["value"]["ray.io/cluster"], json!(format!("{base}-2")));
}

#[rstest]
#[case::deleting("deletionTimestamp")]
#[case::marked_for_reclaim("annotations")]
#[tokio::test]
async fn a_cluster_on_its_way_out_sends_the_job_to_the_next_pool_member(#[case] how: &str) {
    let s = state(MemoryWorld::default(), Config::default());
    let body = review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob"));
    let first = post_and_store(s.clone(), &body).await;
    let r = repost_after_editing_clusters(s, |v| match how {
        "deletionTimestamp" => v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z"),
        _ => {
            v["metadata"]["annotations"]["rayshare.io/reclaim-marked-at"] =
                json!("2026-01-01T00:00:00Z")
        }
    })
    .await;
    let selected = |r: &Value| {
        patch_of(r)
            .into_iter()
            .find(|o| o["path"] == "/spec/clusterSelector")
            .map(|o| o["value"]["ray.io/cluster"].clone())
            .unwrap()
    };
    let base = selected(&first);
    assert_eq!(selected(&r), json!(format!("{}-1", base.as_str().unwrap())));
}
