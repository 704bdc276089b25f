//! Slots of multi-host workers that KubeRay replaces (its `RayMultiHostIndexing` gate off,
//! so rayshare indexes them):
//! - a worker pod deleted and recreated by KubeRay at once gets the freed slot back (a
//!   claim past `indices.claimInFlightSeconds` that no live pod holds is released when its
//!   slot is wanted), so the slice's hostnames still match;
//! - claims left by an earlier RayCluster of the same name (another uid) do not count.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};

use crate::harness::*;
use crate::multi_host::*;
use crate::world::*;

/// Claims count 2 s without their pod here (10 s by default).
fn config() -> String {
    format!("{CONFIG}  claimInFlightSeconds: 2\n")
}

#[tokio::test]
async fn a_replaced_worker_gets_the_freed_slot_back() {
    let env = TestEnv::new("kr-replace", &config(), 1).await;
    let _kuberay = KubeRay::start(&env.name, &[&env.ns], &gate(false)).await;
    apply(&env.admin, &multi_host_cluster(&env.ns)).await;
    let workers = indexed_workers(&env).await;
    assert_each_slot_once(&workers);
    let before: BTreeSet<String> = workers.iter().map(|p| p.name_any()).collect();
    let victim = workers.iter().find(|p| slot(p) == Some((1, 2))).unwrap();
    // Its claim past the in-flight window, so that only the live-pod check keeps it.
    let leases = env.api(
        &resource("coordination.k8s.io", "v1", "Lease", "leases"),
        &env.ns,
    );
    let claim_age = || async {
        let params = ListParams::default().labels(
            "rayshare.io/index-claim=true,ray.io/worker-group-replica-index=1,ray.io/replica-host-index=2",
        );
        let claim = leases.list(&params).await.ok()?.items.pop()?;
        let created = claim.metadata.creation_timestamp?.0;
        let age = k8s_openapi::jiff::Timestamp::now().duration_since(created);
        (age.as_secs() > 2).then_some(())
    };
    wait_for(
        "the victim's claim to leave the in-flight window",
        claim_age,
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);
    pods.delete(&victim.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    // KubeRay replaces it at once (well before rayshare's periodic claim pass).
    let replacement = wait_for("KubeRay to replace the deleted worker", || async {
        let list = pods
            .list(&ListParams::default().labels("ray.io/node-type=worker"))
            .await
            .ok()?;
        list.items
            .into_iter()
            .find(|p| !before.contains(&p.name_any()))
    })
    .await;
    assert_eq!(
        slot(&replacement),
        Some((1, 2)),
        "the replacement {} did not get the freed slot: labels {:?}, hostname {:?}",
        replacement.name_any(),
        replacement.labels(),
        replacement.spec.as_ref().and_then(|s| s.hostname.clone())
    );
    assert_each_slot_once(&indexed_workers(&env).await);
}

#[tokio::test]
async fn claims_of_an_earlier_cluster_of_the_same_name_are_ignored() {
    let env = TestEnv::new("kr-recreate", &config(), 1).await;
    let _kuberay = KubeRay::start(&env.name, &[&env.ns], &gate(false)).await;
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    apply(&env.admin, &multi_host_cluster(&env.ns)).await;
    assert_each_slot_once(&indexed_workers(&env).await);
    let old_uid = clusters.get(CLUSTER).await.unwrap().uid().unwrap();
    // Deleted and made again at once, as rayshare's reclaimer and a new job can do: the old
    // incarnation's pods and claims are left to the garbage collector.
    clusters
        .delete(CLUSTER, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the old RayCluster to be gone", || async {
        clusters
            .get_opt(CLUSTER)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    apply(&env.admin, &multi_host_cluster(&env.ns)).await;
    let new_uid = clusters.get(CLUSTER).await.unwrap().uid().unwrap();
    assert_ne!(old_uid, new_uid);
    let pods: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);
    let workers = wait_for_within(SLOW, "the new cluster's workers, indexed", || async {
        let list = pods
            .list(&ListParams::default().labels("ray.io/node-type=worker"))
            .await
            .ok()?;
        let new: Vec<Pod> = list
            .items
            .into_iter()
            .filter(|p| p.owner_references().iter().any(|o| o.uid == new_uid))
            .collect();
        (new.len() == (REPLICAS * HOSTS) as usize && new.iter().all(|p| slot(p).is_some()))
            .then_some(new)
    })
    .await;
    assert_each_slot_once(&workers);
}
