use super::*;
use rstest::rstest;

fn slots(pairs: &[(u32, u32)]) -> BTreeSet<Slot> {
    pairs
        .iter()
        .map(|&(replica, host)| Slot { replica, host })
        .collect()
}

#[rstest]
#[case::empty(&[], 4, (0, 0))]
#[case::fills_replica(&[(0, 0), (0, 1)], 4, (0, 2))]
#[case::gap_in_replica(&[(0, 0), (0, 2)], 4, (0, 1))]
#[case::full_replica(&[(0, 0), (0, 1)], 2, (1, 0))]
#[case::lowest_lacking_replica(&[(0, 0), (0, 1), (1, 0), (2, 0), (2, 1)], 2, (1, 1))]
#[case::deleted_replica_reused(&[(1, 0), (1, 1)], 2, (0, 0))]
#[case::single_host(&[(0, 0), (1, 0)], 1, (2, 0))]
fn assignment_rule(#[case] taken: &[(u32, u32)], #[case] hosts: u32, #[case] want: (u32, u32)) {
    let got = next_slot(&slots(taken), hosts);
    assert_eq!((got.replica, got.host), want);
}

#[rstest]
#[case::multi_host(&[(labels::REPLICA_INDEX, "3"), (labels::HOST_INDEX, "2")], Some((3, 2)))]
// Otherwise its claim would look stale once in flight too long, and be given again.
#[case::single_host_pod(&[(labels::REPLICA_INDEX, "3")], Some((3, 0)))]
#[case::no_replica(&[(labels::HOST_INDEX, "2")], None)]
#[case::garbage(&[(labels::REPLICA_INDEX, "x")], None)]
fn the_slot_a_pod_or_claim_holds(#[case] l: &[(&str, &str)], #[case] want: Option<(u32, u32)>) {
    let l = l
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let want = want.map(|(replica, host)| Slot { replica, host });
    assert_eq!(Slot::of_labels(&l), want);
}

#[test]
fn sequential_claims_fill_every_pair_once() {
    let mut taken = BTreeSet::new();
    for _ in 0..128 {
        let s = next_slot(&taken, 4);
        assert!(taken.insert(s));
    }
    assert_eq!(taken.iter().map(|s| s.replica).max(), Some(31));
}

fn worker(labels: Value) -> Value {
    json!({"metadata": {"generateName": "c-tpu-worker-", "labels": labels},
           "spec": {"containers": [{"name": "ray-worker", "resources": {"limits": {"google.com/tpu": "4"}}}]}})
}

fn cluster(hosts: u32) -> ClusterInfo {
    ClusterInfo {
        worker_groups: [("tpu".to_string(), WorkerGroup { hosts, replicas: 2 })].into(),
        ..ClusterInfo::default()
    }
}

#[rstest]
#[case::not_ray(json!({}), Some(cluster(4)), false)]
#[case::head(json!({"ray.io/node-type": "head", "ray.io/cluster": "c", "ray.io/group": "headgroup"}), Some(cluster(4)), false)]
#[case::already(json!({"ray.io/node-type": "worker", "ray.io/cluster": "c", "ray.io/group": "tpu", "ray.io/worker-group-replica-index": "0"}), Some(cluster(4)), false)]
#[case::single_host(json!({"ray.io/node-type": "worker", "ray.io/cluster": "c", "ray.io/group": "tpu"}), Some(cluster(1)), false)]
#[case::unknown_cluster(json!({"ray.io/node-type": "worker", "ray.io/cluster": "c", "ray.io/group": "tpu"}), None, true)]
#[case::absurd_hosts(json!({"ray.io/node-type": "worker", "ray.io/cluster": "c", "ray.io/group": "tpu"}), Some(cluster(u32::MAX)), true)]
fn pods_that_need_no_indices(
    #[case] l: Value,
    #[case] c: Option<ClusterInfo>,
    #[case] warns: bool,
) {
    match plan(
        &worker(l),
        c.as_ref(),
        &Indices::default(),
        "rayshare.io/skip",
    ) {
        Plan::Skip(w) => assert_eq!(w.is_some(), warns),
        other => panic!("{other:?}"),
    }
}

#[test]
fn multi_host_worker_claims() {
    let pod =
        worker(json!({"ray.io/node-type": "worker", "ray.io/cluster": "c", "ray.io/group": "tpu"}));
    let want = Plan::Claim {
        cluster: "c".into(),
        group: "tpu".into(),
        shape: WorkerGroup {
            hosts: 4,
            replicas: 2,
        },
    };
    assert_eq!(
        plan(&pod, Some(&cluster(4)), &Indices::default(), "x"),
        want
    );
    let cfg = Indices {
        single_host_replica_index: true,
        ..Indices::default()
    };
    assert!(matches!(
        plan(&pod, Some(&cluster(1)), &cfg, "x"),
        Plan::Claim {
            shape: WorkerGroup { hosts: 1, .. },
            ..
        }
    ));
}

#[test]
fn apply_sets_kuberay_labels_and_peer_env() {
    let pod = worker(json!({"ray.io/node-type": "worker"}));
    let cfg = Indices {
        set_hostname: true,
        tpu_env: true,
        ..Indices::default()
    };
    let (out, warnings) = apply(
        &pod,
        "c",
        "tpu",
        2,
        Slot {
            replica: 3,
            host: 1,
        },
        &cfg,
    );
    assert!(warnings.is_empty());
    let l = &out["metadata"]["labels"];
    assert_eq!(l[labels::REPLICA_INDEX], "3");
    assert_eq!(l[labels::HOST_INDEX], "1");
    assert_eq!(l[labels::REPLICA_NAME], json!(replica_name("c", "tpu", 3)));
    assert_eq!(out["spec"]["hostname"], "tpu-3-1");
    assert_eq!(out["spec"]["subdomain"], "c-headless");
    let env = &out["spec"]["containers"][0]["env"];
    assert_eq!(env[0], json!({"name": "TPU_WORKER_ID", "value": "1"}));
    assert_eq!(env[1], json!({"name": "TPU_NAME", "value": "tpu-3"}));
    assert_eq!(env[2]["value"], "tpu-3-0.c-headless,tpu-3-1.c-headless");
}

#[test]
fn user_env_is_never_overwritten() {
    let mut pod = worker(json!({}));
    pod["spec"]["containers"][0]["env"] = json!([{"name": "TPU_WORKER_ID", "value": "mine"}]);
    let cfg = Indices {
        tpu_env: true,
        ..Indices::default()
    };
    let (out, _) = apply(
        &pod,
        "c",
        "tpu",
        2,
        Slot {
            replica: 0,
            host: 1,
        },
        &cfg,
    );
    let env = out["spec"]["containers"][0]["env"].as_array().unwrap();
    assert_eq!(env[0]["value"], "mine");
    assert_eq!(
        env.iter().filter(|e| e["name"] == "TPU_WORKER_ID").count(),
        1
    );
}

#[test]
fn invalid_names_are_never_set() {
    let pod = worker(json!({"ray.io/node-type": "worker"}));
    let cfg = Indices {
        set_hostname: true,
        ..Indices::default()
    };
    let (out, warnings) = apply(
        &pod,
        "c",
        "GPU_Group",
        2,
        Slot {
            replica: 0,
            host: 1,
        },
        &cfg,
    );
    assert!(out["spec"].get("hostname").is_none());
    assert_eq!(warnings.len(), 1);
    let long = "g".repeat(63);
    assert!(replica_name("c", &long, 0).len() <= 63);
    // An odd spec does not panic.
    let odd = json!({"metadata": {}, "spec": "x"});
    let cfg = Indices {
        set_hostname: true,
        tpu_env: true,
        ..Indices::default()
    };
    apply(
        &odd,
        "c",
        "g",
        2,
        Slot {
            replica: 0,
            host: 0,
        },
        &cfg,
    );
}

#[test]
fn replica_names_are_shared_by_hosts_and_distinct_by_replica() {
    assert_eq!(replica_name("c", "g", 0), replica_name("c", "g", 0));
    assert_ne!(replica_name("c", "g", 0), replica_name("c", "g", 1));
    assert_eq!(replica_name("c", "g", 0).len(), "g-".len() + 5);
}

#[rstest]
#[case::plain(json!({"replicas": 3, "numOfHosts": 4}), 4, 3)]
#[case::defaults(json!({}), 1, 0)]
#[case::below_min(json!({"replicas": 1, "minReplicas": 2, "maxReplicas": 5}), 1, 2)]
#[case::above_max(json!({"replicas": 9, "minReplicas": 2, "maxReplicas": 5}), 1, 5)]
#[case::suspended(json!({"replicas": 3, "suspend": true}), 1, 0)]
#[case::absurd(json!({"replicas": 1u64 << 40, "numOfHosts": 0}), 1, u32::MAX)]
fn worker_groups_are_counted_as_kuberay_counts_them(
    #[case] mut group: Value,
    #[case] hosts: u32,
    #[case] replicas: u32,
) {
    group["groupName"] = json!("g");
    let cluster = json!({"spec": {"workerGroupSpecs": [group]}});
    let info = ClusterInfo::from_value(&cluster);
    assert_eq!(info.worker_groups["g"], WorkerGroup { hosts, replicas });
}

#[rstest]
#[case::inside((1, 3), 2, false)]
#[case::past((2, 0), 2, true)]
#[case::count_unknown((7, 0), 0, false)]
fn a_slot_past_the_replicas_overflows(
    #[case] slot: (u32, u32),
    #[case] replicas: u32,
    #[case] want: bool,
) {
    let slot = Slot {
        replica: slot.0,
        host: slot.1,
    };
    assert_eq!(overflows(slot, WorkerGroup { hosts: 4, replicas }), want);
}
