//! Multi-host worker pods as KubeRay itself creates them (a `numOfHosts: 4` group of 3
//! replicas), with KubeRay's `RayMultiHostIndexing` gate off (rayshare indexes them) and on
//! (KubeRay does; rayshare keeps its labels and claims nothing).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::harness::*;
use crate::world::*;

pub const CLUSTER: &str = "mh";
pub const GROUP: &str = "tpu";
pub const HOSTS: u32 = 4;
pub const REPLICAS: u32 = 3;

/// rayshare's index settings in these tests: hostnames and TPU env too, so a slot's
/// peers are visible.
pub const CONFIG: &str = "indices:\n  setHostname: true\n  tpuEnv: true\n";

/// KubeRay with its indexing gate on or off; off is all v1.4 knows (it has no gate).
pub fn gate(on: bool) -> KubeRayOptions {
    let feature_gates = if !kuberay_v1_4() {
        format!("RayMultiHostIndexing={on}")
    } else {
        assert!(!on, "KubeRay v1.4 has no RayMultiHostIndexing gate");
        String::new()
    };
    KubeRayOptions {
        feature_gates,
        ..Default::default()
    }
}

pub fn multi_host_cluster(namespace: &str) -> Value {
    let container = |name: &str, resources: Value| json!({"name": name, "image": "rayproject/ray:2.44.0", "resources": resources});
    json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": CLUSTER, "namespace": namespace},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                container("ray-head", json!({"requests": {"cpu": "1", "memory": "2Gi"}}))]}}},
            "workerGroupSpecs": [{"groupName": GROUP, "replicas": REPLICAS, "minReplicas": REPLICAS,
                "maxReplicas": REPLICAS, "numOfHosts": HOSTS, "rayStartParams": {},
                "template": {"spec": {"containers": [container("ray-worker", json!({
                    "requests": {"cpu": "1", "memory": "2Gi"},
                    "limits": {"google.com/tpu": "4"}}))]}}}]}})
}

/// A worker pod's (replica, host), if it has both labels.
pub fn slot(pod: &Pod) -> Option<(u32, u32)> {
    let l = pod.labels();
    Some((
        l.get("ray.io/worker-group-replica-index")?.parse().ok()?,
        l.get("ray.io/replica-host-index")?.parse().ok()?,
    ))
}

/// The live (not terminating) worker pods of the group, once KubeRay made all of them
/// and each got a slot.
pub async fn indexed_workers(env: &TestEnv) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);
    let selector = format!("ray.io/cluster={CLUSTER},ray.io/group={GROUP},ray.io/node-type=worker");
    wait_for_within(SLOW, "every worker pod, each with a slot", || async {
        let live: Vec<Pod> = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .ok()?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        (live.len() == (REPLICAS * HOSTS) as usize && live.iter().all(|p| slot(p).is_some()))
            .then_some(live)
    })
    .await
}

/// Each (replica, host) exactly once; the hosts of a replica share its replica name.
pub fn assert_each_slot_once(workers: &[Pod]) {
    let mut by_slot = BTreeMap::<(u32, u32), Vec<String>>::new();
    let mut names = BTreeMap::<u32, Vec<String>>::new();
    for p in workers {
        let s = slot(p).unwrap();
        by_slot.entry(s).or_default().push(p.name_any());
        names
            .entry(s.0)
            .or_default()
            .push(p.labels()["ray.io/worker-group-replica-name"].clone());
    }
    let want: Vec<(u32, u32)> = (0..REPLICAS)
        .flat_map(|r| (0..HOSTS).map(move |h| (r, h)))
        .collect();
    assert_eq!(
        by_slot.keys().copied().collect::<Vec<_>>(),
        want,
        "slots: {by_slot:?}"
    );
    for (replica, names) in names {
        assert!(
            names.windows(2).all(|w| w[0] == w[1]),
            "replica {replica} has several names: {names:?}"
        );
    }
}

pub async fn claims(env: &TestEnv) -> Vec<Value> {
    list_json(
        &env.admin,
        &resource("coordination.k8s.io", "v1", "Lease", "leases"),
        &env.ns,
        "rayshare.io/index-claim=true",
    )
    .await
}

#[tokio::test]
async fn gate_off_rayshare_indexes_kuberays_workers() {
    let env = TestEnv::new("kr-hosts-off", CONFIG, 1).await;
    let _kuberay = KubeRay::start(&env.name, &[&env.ns], &gate(false)).await;
    apply(&env.admin, &multi_host_cluster(&env.ns)).await;
    let workers = indexed_workers(&env).await;
    assert_each_slot_once(&workers);
    for p in &workers {
        let (r, h) = slot(p).unwrap();
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(
            spec.hostname.as_deref(),
            Some(format!("{GROUP}-{r}-{h}").as_str())
        );
        assert_eq!(spec.subdomain.as_deref(), Some("mh-headless"));
        let env_vars = spec.containers[0].env.clone().unwrap_or_default();
        let id = env_vars.iter().find(|e| e.name == "TPU_WORKER_ID");
        assert_eq!(id.and_then(|e| e.value.clone()), Some(h.to_string()));
    }
    // Every replica has its block claim (its first pod's); hosts a block did not hand
    // out (the group's last replicas go host by host) have their own.
    let claims = claims(&env).await;
    let block_replicas: BTreeSet<&str> = claims
        .iter()
        .filter(|c| c["metadata"]["labels"]["rayshare.io/claim-hosts"].as_str() == Some("4"))
        .filter_map(|c| c["metadata"]["labels"]["ray.io/worker-group-replica-index"].as_str())
        .collect();
    assert_eq!(
        block_replicas,
        BTreeSet::from(["0", "1", "2"]),
        "{claims:#?}"
    );
    assert!(claims.len() <= (REPLICAS + REPLICAS * HOSTS) as usize);
    // KubeRay's headless service resolves the hostnames rayshare set.
    wait_for_within(SLOW, "the cluster to be ready", || async {
        let c = env
            .api(&ray_cluster_resource(), &env.ns)
            .get(CLUSTER)
            .await
            .ok()?;
        (c.data["status"]["state"] == "ready").then_some(())
    })
    .await;
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(env.admin.clone(), &env.ns);
    assert!(services.get_opt("mh-headless").await.unwrap().is_some());
}

#[tokio::test]
async fn gate_on_rayshare_keeps_kuberays_labels_and_claims_nothing() {
    if kuberay_v1_4() {
        eprintln!("not run: this KubeRay has no RayMultiHostIndexing gate to turn on");
        return;
    }
    let env = TestEnv::new("kr-hosts-on", CONFIG, 1).await;
    let _kuberay = KubeRay::start(&env.name, &[&env.ns], &gate(true)).await;
    apply(&env.admin, &multi_host_cluster(&env.ns)).await;
    let workers = indexed_workers(&env).await;
    assert_each_slot_once(&workers);
    assert!(claims(&env).await.is_empty(), "rayshare claimed slots");
    let metrics = env.instances[0].metrics().await;
    assert!(
        !metrics.contains("rayshare_objects_created_total{kind=\"IndexClaim\"}"),
        "{metrics}"
    );
    // Nothing of rayshare's on the pods either: KubeRay's pods as KubeRay made them.
    for p in &workers {
        assert!(
            p.spec.as_ref().unwrap().hostname.is_none(),
            "{}",
            p.name_any()
        );
    }
}
