//! Shared-cluster lifecycle: idle clusters reclaimed, busy ones kept, no job stranded when
//! admission races reclamation, pools, and reconciler hand-off between replicas.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::harness::*;

async fn create_job(env: &TestEnv, file: &str, name: &str, labels: Value) -> Value {
    let mut job = sample(file);
    job["metadata"]["name"] = json!(name);
    json_patch::merge(&mut job["metadata"]["labels"], &labels);
    create_in(&env.admin, &env.ns, job, false).await
}

fn selected(job: &Value) -> Option<String> {
    job["spec"]["clusterSelector"]["ray.io/cluster"]
        .as_str()
        .map(String::from)
}

#[tokio::test]
async fn idle_clusters_are_reclaimed_and_busy_ones_kept() {
    let config = "reclaim:\n  idleTtlSeconds: 2\n  intervalSeconds: 1\n  quietSeconds: 2\n  namespaces: [e2e-reclaim]\n";
    let env = TestEnv::new("reclaim", config, 1).await;
    let idle = selected(&create_job(&env, "rayjob-run-a.yaml", "done", json!({})).await).unwrap();
    let busy = selected(&create_job(&env, "rayjob-other-config.yaml", "running", json!({})).await)
        .unwrap();
    for cluster in [&idle, &busy] {
        wait_for("the provisioner to make the clusters", || {
            cluster_uid(&env, cluster)
        })
        .await;
    }
    finish(&env, "done").await;
    wait_for("the idle cluster to be reclaimed", || async {
        cluster_uid(&env, &idle).await.is_none().then_some(())
    })
    .await;
    // Two more whole reclaim passes (one may have been under way), longer than the TTL
    // and the quiet period together: the busy cluster has been judged and kept.
    env.instances[0].wait_passes("RayCluster", 5).await;
    assert!(
        cluster_uid(&env, &busy).await.is_some(),
        "a cluster with an active job is kept"
    );
    let metrics = env.instances[0].metrics().await;
    assert!(
        metrics.contains("rayshare_objects_deleted_total{kind=\"RayCluster\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("rayshare_shared_clusters{state=\"busy\"} 1"),
        "{metrics}"
    );
    env.instances[0]
        .wait_for_log("reclaimed idle shared cluster")
        .await;
}

/// A job that ran longer than the TTL and was then cancelled (its RayJob deleted: no end
/// time is left behind) keeps its cluster for a whole TTL after it went.
#[tokio::test]
async fn the_idle_clock_starts_when_a_cancelled_job_goes() {
    const TTL: u64 = 6;
    let config = format!(
        "reclaim:\n  idleTtlSeconds: {TTL}\n  intervalSeconds: 1\n  quietSeconds: 1\n  namespaces: [e2e-cancel]\n"
    );
    let env = TestEnv::new("cancel", &config, 1).await;
    let cluster =
        selected(&create_job(&env, "rayjob-run-a.yaml", "long", json!({})).await).unwrap();
    wait_for("the provisioner to make the cluster", || {
        cluster_uid(&env, &cluster)
    })
    .await;
    // The job's age is the input here: it must outlive the TTL while it runs.
    tokio::time::sleep(Duration::from_secs(TTL + 1)).await;
    let cancelled = k8s_openapi::jiff::Timestamp::now();
    env.api(&ray_job_resource(), &env.ns)
        .delete("long", &Default::default())
        .await
        .unwrap();
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    let annotation = |c: &kube::api::DynamicObject, k: &str| {
        c.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(k).cloned())
    };
    let stamp = wait_for("the cluster to be stamped when its job went", || async {
        let c = clusters.get(&cluster).await.ok()?;
        annotation(&c, "rayshare.io/last-active")
    })
    .await;
    let stamp: k8s_openapi::jiff::Timestamp = stamp.parse().unwrap();
    assert!(
        stamp >= cancelled - Duration::from_secs(1),
        "{stamp} < {cancelled}"
    );
    // Whole reclaim passes since: the cluster was judged idle, not expired. That only
    // shows while the TTL since the stamp has not passed: on a machine so busy that two
    // passes took longer, what follows is all there is to see.
    env.instances[0].wait_passes("RayCluster", 2).await;
    let c = clusters.get_opt(&cluster).await.unwrap();
    let ttl_from_stamp = stamp + Duration::from_secs(TTL);
    if k8s_openapi::jiff::Timestamp::now() < ttl_from_stamp {
        let c = c.expect("the cluster must stay a whole TTL after its job went");
        assert!(c.metadata.deletion_timestamp.is_none());
        assert_eq!(annotation(&c, "rayshare.io/reclaim-marked-at"), None);
    } else {
        eprintln!("two passes took past {ttl_from_stamp}: the kept-until check is skipped");
    }
    // And reclaimed once the TTL has passed since the job went.
    wait_for(
        "the cluster to be reclaimed a TTL after its job went",
        || async { cluster_uid(&env, &cluster).await.is_none().then_some(()) },
    )
    .await;
    // However busy the machine: the idle time it was reclaimed for counts from the stamp
    // (a clock started when the job began would be a TTL longer than the time since).
    // Logged once the delete is answered, by a background writer: awaited, not assumed.
    let line = wait_for("the reclaim in the log", || async {
        let log = env.instances[0].log_text();
        log.lines()
            .find(|l| l.contains("reclaimed idle shared cluster") && l.contains(&cluster))
            .map(str::to_string)
    })
    .await;
    let logged: k8s_openapi::jiff::Timestamp =
        line.split_whitespace().next().unwrap().parse().unwrap();
    let idle_for: u64 = line
        .split("no active RayJob for ")
        .nth(1)
        .and_then(|rest| rest.split('s').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no idle time in {line:?}"));
    let since_stamp = logged.duration_since(stamp).as_secs().max(0) as u64;
    assert!(
        (TTL..=since_stamp.max(TTL) + 1).contains(&idle_for),
        "reclaimed after {idle_for}s idle, {since_stamp}s after the stamp: {line}"
    );
}

/// Admission raced against reclamation, many times: every admitted job's cluster exists
/// while the job is active.
#[tokio::test]
async fn jobs_admitted_during_reclamation_are_never_stranded() {
    let config = "reclaim:\n  idleTtlSeconds: 1\n  intervalSeconds: 1\n  quietSeconds: 1\n  namespaces: [e2e-race]\n";
    let env = TestEnv::new("race", config, 1).await;
    let mut uids = BTreeSet::new();
    let mut unchanged = 0;
    for i in 0..20u64 {
        let name = format!("job-{i}");
        let job = create_job(&env, "rayjob-run-a.yaml", &name, json!({})).await;
        match selected(&job) {
            Some(cluster) => {
                // The job is active: the provisioner makes its cluster (or finds it),
                // and it stays while the job runs.
                let made = format!("the cluster {cluster} of stored job {name}");
                uids.insert(wait_for(&made, || cluster_uid(&env, &cluster)).await);
                for _ in 0..2 {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    let uid = cluster_uid(&env, &cluster).await;
                    assert!(uid.is_some(), "job {name} selects {cluster}, which is gone");
                    uids.extend(uid);
                }
            }
            None => unchanged += 1, // fail-open: the job kept its own cluster
        }
        finish(&env, &name).await;
        // Land the next admission at varying points of the idle TTL (1 s), the
        // reclaimer's cycle (1 s) and its quiet period (1 s): before, around and after
        // the cluster is marked and reclaimed.
        tokio::time::sleep(Duration::from_millis((i * 337) % 5000)).await;
    }
    eprintln!(
        "[race] {} cluster incarnations, {unchanged} jobs passed unchanged",
        uids.len()
    );
    assert!(
        uids.len() > 1,
        "the race was not exercised: the cluster was never reclaimed"
    );
}

#[tokio::test]
async fn the_pool_spreads_jobs_over_clusters_of_one_config() {
    let config = "sharedClusters:\n  maxJobsPerCluster: 2\nreclaim:\n  enabled: false\n";
    let env = TestEnv::new("pool", config, 1).await;
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..5 {
        let job = create_job(&env, "rayjob-run-a.yaml", &format!("job-{i}"), json!({})).await;
        *counts.entry(selected(&job).unwrap()).or_default() += 1;
    }
    // Admitted back to back, before any member exists: each counts the jobs already
    // admitted to it.
    let mut sizes: Vec<usize> = counts.values().copied().collect();
    sizes.sort();
    assert_eq!(sizes, vec![1, 2, 2], "{counts:?}");
    for cluster in counts.keys() {
        wait_for("the provisioner to make each member", || {
            cluster_uid(&env, cluster)
        })
        .await;
    }
    let clusters = env
        .api(&ray_cluster_resource(), &env.ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(clusters.items.len(), 3);
}

#[tokio::test]
async fn another_replica_takes_over_reclamation_when_the_leader_dies() {
    let config = "reclaim:\n  idleTtlSeconds: 1\n  intervalSeconds: 1\n  quietSeconds: 2\n  namespaces: [e2e-handoff]\n";
    let mut env = TestEnv::new("handoff", config, 2).await;
    let leases: Api<Lease> = Api::namespaced(env.admin.clone(), &env.ns);
    let holder = || async {
        leases
            .get_opt("rayshare-reconciler")
            .await
            .ok()??
            .spec?
            .holder_identity
    };
    let leader = wait_for("a reconciler leader", holder).await;
    let index = if leader.ends_with("-0") { 0 } else { 1 };
    env.instances[index].stop();
    let survivor = &env.instances[1 - index];
    let shard = json!({SHARD_LABEL: (1 - index).to_string()});
    let cluster = selected(&create_job(&env, "rayjob-run-a.yaml", "after", shard).await).unwrap();
    wait_for("the provisioner to make the cluster", || {
        cluster_uid(&env, &cluster)
    })
    .await;
    finish(&env, "after").await;
    wait_for(
        "the surviving replica to reclaim the idle cluster",
        || async { cluster_uid(&env, &cluster).await.is_none().then_some(()) },
    )
    .await;
    let new_leader = holder().await.unwrap();
    assert_ne!(
        new_leader, leader,
        "the cluster was reclaimed by the stopped leader?"
    );
    survivor.wait_for_log("reclaimed idle shared cluster").await;
}

/// A rollout: the leader stops gracefully and gives its lease up; the standby, watching
/// the lease, takes it at once rather than when the lease would have run out.
#[tokio::test]
async fn a_leader_that_stops_hands_the_lease_over_at_once() {
    const LEASE: i64 = 30;
    let args = ["--leader-lease-seconds".to_string(), LEASE.to_string()];
    let mut env = TestEnv::with_args("rollout", "", 2, &args).await;
    let leases: Api<Lease> = Api::namespaced(env.admin.clone(), &env.ns);
    let spec = || async { leases.get_opt("rayshare-reconciler").await.ok()??.spec };
    let old = wait_for("a reconciler leader", || async {
        spec().await.filter(|s| s.holder_identity.is_some())
    })
    .await;
    let leader = old.holder_identity.clone().unwrap();
    let index = if leader.ends_with("-0") { 0 } else { 1 };
    env.instances[index].stop();
    let new = wait_for("the standby to take the lease", || async {
        spec()
            .await
            .filter(|s| s.holder_identity.as_ref().is_some_and(|h| *h != leader))
    })
    .await;
    let renewed = old.renew_time.unwrap().0;
    let acquired = new.acquire_time.unwrap().0;
    let handover = acquired.duration_since(renewed);
    eprintln!("[rollout] lease taken {handover:#} after the old leader's last renewal");
    // Without the release the standby could only take it once it ran out.
    assert!(
        handover < k8s_openapi::jiff::SignedDuration::from_secs(LEASE),
        "taken {handover:#} after the last renewal: the lease ran out rather than being released"
    );
    assert!(new.lease_transitions > old.lease_transitions);
    env.instances[index]
        .wait_for_log("reconciler lease released")
        .await;
}
