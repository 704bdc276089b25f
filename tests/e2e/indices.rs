//! Replica/host indices with two rayshare instances behind the webhook, under concurrency.

use std::collections::BTreeMap;

use futures::StreamExt;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use crate::events::wait_event;
use crate::harness::*;

const HOSTS: u32 = 4;
const REPLICAS: u32 = 32;
/// Group b's replicas (the restart test's group).
const B_REPLICAS: u32 = 8;

fn worker(cluster: &str, group: &str, shard: usize) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "generateName": format!("{cluster}-{group}-worker-"),
            "labels": {
                "ray.io/cluster": cluster, "ray.io/group": group, "ray.io/node-type": "worker",
                "ray.io/is-ray-node": "yes", SHARD_LABEL: shard.to_string(),
            },
        },
        "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray",
            "resources": {"limits": {"google.com/tpu": "4"}}}]},
    }))
    .unwrap()
}

/// (replica, host) -> pod names, for the pods of `group`; and how many have no indices.
async fn indexed(pods: &Api<Pod>, group: &str) -> (BTreeMap<(u32, u32), Vec<String>>, usize) {
    let mut out: BTreeMap<(u32, u32), Vec<String>> = BTreeMap::new();
    let mut unindexed = 0;
    for p in pods
        .list(&ListParams::default().labels(&format!("ray.io/group={group}")))
        .await
        .unwrap()
    {
        let l = p.metadata.labels.clone().unwrap_or_default();
        let (Some(replica), Some(host)) = (
            l.get("ray.io/worker-group-replica-index"),
            l.get("ray.io/replica-host-index"),
        ) else {
            unindexed += 1;
            continue;
        };
        out.entry((replica.parse().unwrap(), host.parse().unwrap()))
            .or_default()
            .push(p.metadata.name.unwrap());
    }
    (out, unindexed)
}

async fn slots(pods: &Api<Pod>, group: &str) -> BTreeMap<(u32, u32), Vec<String>> {
    let (slots, unindexed) = indexed(pods, group).await;
    assert_eq!(unindexed, 0, "pods without indices");
    slots
}

fn assert_each_pair_once(slots: &BTreeMap<(u32, u32), Vec<String>>, replicas: u32) {
    let dupes: Vec<_> = slots.iter().filter(|(_, v)| v.len() > 1).collect();
    assert!(dupes.is_empty(), "duplicate indices: {dupes:?}");
    let want: Vec<(u32, u32)> = (0..replicas)
        .flat_map(|r| (0..HOSTS).map(move |h| (r, h)))
        .collect();
    assert_eq!(slots.keys().copied().collect::<Vec<_>>(), want);
}

async fn create_workers(
    pods: &Api<Pod>,
    cluster: &str,
    group: &str,
    count: usize,
    instances: usize,
) {
    let results = futures::future::join_all((0..count).map(|i| {
        let pod = worker(cluster, group, i % instances);
        async move { pods.create(&PostParams::default(), &pod).await }
    }))
    .await;
    for r in results {
        r.expect("creating a worker pod");
    }
}

#[tokio::test]
async fn concurrent_workers_on_two_instances_get_unique_indices() {
    // 128 creates at once, with the other tests, on 2 cores, within the shipped budgets
    // (admission and claims): no pod may fail open.
    let config = "indices:\n  reconcileIntervalSeconds: 1\n  setHostname: true\n  tpuEnv: true\n";
    let mut env = TestEnv::new("indices", config, 2).await;
    let cluster = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "tpu", "namespace": env.ns},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray"}]}}},
                 "workerGroupSpecs": [
                    {"groupName": "a", "replicas": REPLICAS, "numOfHosts": HOSTS, "rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}]}}},
                    {"groupName": "b", "replicas": B_REPLICAS, "numOfHosts": HOSTS, "rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}]}}}]}});
    apply(&env.admin, &cluster).await;
    // The instances learn the cluster through their caches.
    wait_for("both instances to know the cluster", || async {
        let mut pod = worker("tpu", "a", 0);
        let mut known = true;
        for shard in 0..2 {
            pod.metadata
                .labels
                .as_mut()
                .unwrap()
                .insert(SHARD_LABEL.into(), shard.to_string());
            let dry = Api::<Pod>::namespaced(env.admin.clone(), &env.ns)
                .create(
                    &PostParams {
                        dry_run: true,
                        ..Default::default()
                    },
                    &pod,
                )
                .await
                .ok()?;
            known &= dry
                .metadata
                .labels
                .unwrap_or_default()
                .contains_key("ray.io/worker-group-replica-index");
        }
        known.then_some(())
    })
    .await;
    let pods = Api::<Pod>::namespaced(env.admin.clone(), &env.ns);

    // 128 pods of 4-host groups, created at once, alternating between the instances.
    create_workers(&pods, "tpu", "a", (REPLICAS * HOSTS) as usize, 2).await;
    let taken = slots(&pods, "a").await;
    assert_each_pair_once(&taken, REPLICAS);
    // Peers are derived from the indices alone.
    let (_, names) = taken.iter().find(|((r, h), _)| (*r, *h) == (3, 2)).unwrap();
    // generateName pods: each event finds its pod by the slot's labels.
    let note = wait_event(&env, &names[0], "IndicesAssigned").await;
    assert_eq!(note, "Assigned worker group a replica 3, host 2 of 4");
    let pod = pods.get(&names[0]).await.unwrap();
    assert_eq!(
        pod.spec.as_ref().unwrap().hostname.as_deref(),
        Some("a-3-2")
    );
    assert_eq!(
        pod.spec.as_ref().unwrap().subdomain.as_deref(),
        Some("tpu-headless")
    );
    let env_vars = pod.spec.unwrap().containers[0].env.clone().unwrap();
    assert!(
        env_vars
            .iter()
            .any(|e| e.name == "TPU_WORKER_ID" && e.value.as_deref() == Some("2"))
    );

    // Delete replica 5; once its pods are gone, new pods reuse its slots (its block claim
    // stays: past the in-flight window only live pods count in it, and before that a pod
    // that would overflow the group takes it over).
    for ((r, _), names) in &taken {
        if *r == 5 {
            pods.delete(&names[0], &DeleteParams::default())
                .await
                .unwrap();
        }
    }
    wait_for("replica 5's pods to go", || async {
        let params =
            ListParams::default().labels("ray.io/group=a,ray.io/worker-group-replica-index=5");
        pods.list(&params)
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    create_workers(&pods, "tpu", "a", HOSTS as usize, 2).await;
    // Exactly replica 5's slots again: none past the group, none twice.
    let after = slots(&pods, "a").await;
    assert_each_pair_once(&after, REPLICAS);

    // Restart one instance while a second group's pods are being created. Pods that reach
    // it while it is down are let through unindexed by the API server (its fail-open,
    // counted); rayshare itself fails none open, none share a slot, none is past the group.
    // A quarter of the pods first, so the instance dies holding claims of this burst;
    // four while it is down; the rest two at a time while it starts again and after.
    let b_pods = (B_REPLICAS * HOSTS) as usize;
    let create = |from: usize, to: usize, at_once: usize| {
        let pods = &pods;
        futures::stream::iter(from..to)
            .map(move |i| {
                let pod = worker("tpu", "b", i % 2);
                async move { pods.create(&PostParams::default(), &pod).await }
            })
            .buffer_unordered(at_once)
            .collect::<Vec<_>>()
    };
    let mut created = create(0, b_pods / 4, b_pods / 4).await;
    env.instances[1].stop();
    created.extend(create(b_pods / 4, b_pods / 4 + 4, 4).await);
    let (rest, ()) = tokio::join!(
        create(b_pods / 4 + 4, b_pods, 2),
        env.instances[1].restart()
    );
    created.extend(rest);
    for c in created {
        c.expect("creating a worker pod");
    }
    let (taken, unindexed) = indexed(&pods, "b").await;
    let dupes: Vec<_> = taken.iter().filter(|(_, v)| v.len() > 1).collect();
    assert!(
        dupes.is_empty(),
        "duplicate indices across a restart: {dupes:?}"
    );
    let past: Vec<_> = taken.keys().filter(|(r, _)| *r >= B_REPLICAS).collect();
    assert!(past.is_empty(), "slots past the group: {past:?}");
    assert_eq!(taken.len() + unindexed, b_pods);
    let api_server = env.api_server_fail_opens().await as usize;
    let not_ready = before_ready(&env);
    eprintln!(
        "[indices] across the restart: {} indexed, {unindexed} let through while an \
         instance was down or not yet ready ({api_server} counted by the API server, \
         {not_ready} by rayshare before it was ready)",
        taken.len()
    );
    assert_eq!(rayshare_fail_opens(&env), 0, "rayshare failed pods open");
    assert!(
        unindexed <= api_server + not_ready,
        "pods unindexed by rayshare itself"
    );
    assert!(
        unindexed > 0,
        "no pod reached the instance while it was down"
    );
    // The pods let through unindexed stand for KubeRay's replacements: deleted and made
    // again, they fill exactly the group's slots left (the dead process's claims taken
    // over).
    let params = ListParams::default().labels("ray.io/group=b");
    let strays: Vec<String> = pods
        .list(&params)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| {
            let labels = p.metadata.labels.as_ref().unwrap();
            !labels.contains_key("ray.io/worker-group-replica-index")
        })
        .map(|p| p.metadata.name.unwrap())
        .collect();
    for name in &strays {
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }
    create_workers(&pods, "tpu", "b", strays.len(), 2).await;
    assert_each_pair_once(&slots(&pods, "b").await, B_REPLICAS);
    assert_eq!(rayshare_fail_opens(&env), 0, "rayshare failed pods open");
}

/// Pod admissions rayshare failed open once ready, in every instance's log (a restarted
/// one's earlier process too). The harness's API server calls an instance by its address,
/// not through a Service that waits for readiness: a restarted process answers before its
/// namespace watch has listed, and such a pod (left unchanged, "not served") stands with
/// those that found it down.
fn rayshare_fail_opens(env: &TestEnv) -> usize {
    let failed_open = |log: &str| {
        log.lines()
            .filter(|l| l.contains("kind=Pod") && l.contains("outcome=\"failed_open\""))
            .count()
    };
    env.instances
        .iter()
        .map(|i| {
            let log = i.log_text();
            let ready = log
                .split_once("caches synced")
                .map_or("", |(_, after)| after);
            failed_open(ready) + failed_open(&i.previous_log_text())
        })
        .sum()
}

/// Pod admissions a restarted process left unchanged before it was ready.
fn before_ready(env: &TestEnv) -> usize {
    env.instances
        .iter()
        .map(|i| {
            let log = i.log_text();
            let (before, _) = log.split_once("caches synced").unwrap_or((&log, ""));
            before
                .lines()
                .filter(|l| l.contains("kind=Pod") && l.contains("outcome=\"failed_open\""))
                .count()
        })
        .sum()
}

/// A worker pod the API server refuses after rayshare admitted it (its container name is
/// invalid): a tenant can make such claims at will, and a quota refusal makes them too.
fn refused_worker(cluster: &str, group: &str) -> Pod {
    let mut pod = worker(cluster, group, 0);
    pod.spec.as_mut().unwrap().containers[0].name = "Not_A_DNS_Label".into();
    pod
}

/// A slice of `replicas` replicas whose burst has refused pods at `refused_at`: every
/// replica complete, the refused pods' claims taken over.
async fn slice_with_refused_pods(name: &str, replicas: u32, refused_at: &[usize]) {
    let config =
        "admissionTimeoutMs: 15000\nindices:\n  claimTimeoutMs: 15000\n  claimTakeoverMs: 1000\n";
    let env = TestEnv::new(name, config, 1).await;
    let cluster = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "slice", "namespace": env.ns},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray"}]}}},
                 "workerGroupSpecs": [
                    {"groupName": "a", "replicas": replicas, "numOfHosts": HOSTS, "rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}]}}}]}});
    apply(&env.admin, &cluster).await;
    let pods = Api::<Pod>::namespaced(env.admin.clone(), &env.ns);
    // A refused pod made a claim once the instance knows the cluster.
    let claims = env.api(&rayshare_claims(), &env.ns);
    wait_for("the instance to claim for a refused pod", || async {
        let refused = refused_worker("slice", "a");
        let stored = pods.create(&PostParams::default(), &refused).await;
        assert!(stored.is_err(), "an invalid pod was stored");
        let n = claims.list(&ListParams::default()).await.ok()?.items.len();
        (n > 0).then_some(())
    })
    .await;

    // KubeRay's burst for the slice, with refused creates among it.
    let real = (replicas * HOSTS) as usize;
    let results = futures::future::join_all((0..real + refused_at.len()).map(|i| {
        let refused = refused_at.contains(&i);
        let pod = if refused {
            refused_worker("slice", "a")
        } else {
            worker("slice", "a", 0)
        };
        let pods = &pods;
        async move { (refused, pods.create(&PostParams::default(), &pod).await) }
    }))
    .await;
    for (refused, result) in results {
        assert_eq!(result.is_err(), refused, "{result:?}");
    }
    // Every replica complete: the real pods fill exactly the slice's slots.
    let taken = slots(&pods, "a").await;
    assert_each_pair_once(&taken, replicas);
    // By taking over the refused pods' claims, and saying so.
    let metrics = env.instances[0].metrics().await;
    let taken_over = metrics
        .lines()
        .find_map(|l| l.strip_prefix("rayshare_objects_deleted_total{kind=\"IndexClaim\"} "))
        .and_then(|n| n.parse::<u32>().ok());
    assert!(taken_over.is_some_and(|n| n > 0), "{metrics}");
}

#[tokio::test]
async fn claims_whose_pods_never_come_leave_no_gap_in_a_slice() {
    // A small group: claims host by host.
    slice_with_refused_pods("index-gaps", 4, &[0, 3, 6, 9, 12, 15]).await;
}

#[tokio::test]
async fn claims_whose_pods_never_come_leave_no_gap_in_a_big_slice() {
    // A group of block claims (8 replicas and more), refused pods among the first ones.
    slice_with_refused_pods("index-gaps-big", 12, &[0, 3, 6, 9, 12, 15, 30, 45]).await;
}

fn rayshare_claims() -> kube::core::ApiResource {
    resource("coordination.k8s.io", "v1", "Lease", "leases")
}
