//! Replica and host indices for multi-host Ray worker pods (pure parts).
//!
//! Which slot is free is decided here; which slot a pod *gets* is decided by the API
//! server (see `world/kube/claims.rs`): a cache cannot make indices unique.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::config::Indices;
use crate::domain::cluster::ClusterInfo;
use crate::domain::labels;
use crate::domain::labels::Meta;

/// A (replica, host) pair within a worker group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slot {
    pub replica: u32,
    pub host: u32,
}

impl Slot {
    /// The slot a pod's (or a claim's) labels say it holds. A single-host group's pods
    /// carry only the replica index (`indices.singleHostReplicaIndex`): their host is 0.
    pub fn of_labels(l: &BTreeMap<String, String>) -> Option<Slot> {
        Some(Slot {
            replica: l.get(labels::REPLICA_INDEX)?.parse().ok()?,
            host: match l.get(labels::HOST_INDEX) {
                Some(host) => host.parse().ok()?,
                None => 0,
            },
        })
    }
}

/// The lowest replica that still lacks hosts (else the next one), and the lowest free
/// host in it.
pub fn next_slot(taken: &BTreeSet<Slot>, hosts: u32) -> Slot {
    let hosts = hosts.max(1);
    let mut replica = 0;
    loop {
        if let Some(host) = (0..hosts).find(|&host| !taken.contains(&Slot { replica, host })) {
            return Slot { replica, host };
        }
        replica += 1;
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    Skip(Option<String>),
    /// Claim a slot of `group` (with `hosts` hosts per replica) for this pod.
    Claim {
        cluster: String,
        group: String,
        hosts: u32,
    },
}

/// More hosts per replica than any TPU slice has.
pub const MAX_HOSTS: u32 = 4096;

/// Decides whether a pod needs indices. `cluster` is what the cache knows of its RayCluster.
pub fn plan(pod: &Value, cluster: Option<&ClusterInfo>, cfg: &Indices, opt_out: &str) -> Plan {
    let label = |k| labels::get(pod, Meta::Labels, k);
    if label(labels::RAY_NODE_TYPE) != Some("worker") {
        return Plan::Skip(None);
    }
    let (Some(cluster_name), Some(group)) = (label(labels::RAY_CLUSTER), label(labels::RAY_GROUP))
    else {
        return Plan::Skip(None);
    };
    if labels::get(pod, Meta::Annotations, opt_out) == Some("true") {
        return Plan::Skip(Some(format!(
            "rayshare: indices skipped: annotation {opt_out}=true"
        )));
    }
    // KubeRay >= 1.5 with RayMultiHostIndexing labelled it already.
    if label(labels::REPLICA_INDEX).is_some() {
        return Plan::Skip(None);
    }
    let Some(cluster) = cluster else {
        return Plan::Skip(Some(format!(
            "rayshare: indices skipped: RayCluster {cluster_name} is not known yet"
        )));
    };
    let Some(&hosts) = cluster.worker_hosts.get(group) else {
        return Plan::Skip(Some(format!(
            "rayshare: indices skipped: RayCluster {cluster_name} has no worker group {group}"
        )));
    };
    if hosts <= 1 && !cfg.single_host_replica_index {
        return Plan::Skip(None);
    }
    // Each pod's TPU env names every host of its replica: a cluster spec with an absurd
    // `numOfHosts` must not make every admission build millions of names.
    if hosts > MAX_HOSTS {
        return Plan::Skip(Some(format!(
            "rayshare: indices skipped: worker group {group} has {hosts} hosts per replica, more than {MAX_HOSTS}"
        )));
    }
    Plan::Claim {
        cluster: cluster_name.into(),
        group: group.into(),
        hosts,
    }
}

/// `<group>-<5 chars>`, derived from the slot so every host of a replica agrees on it
/// whoever assigned it (KubeRay uses 5 random characters).
pub fn replica_name(cluster: &str, group: &str, replica: u32) -> String {
    let suffix = crate::domain::naming::hashed(&format!("{cluster}/{group}/{replica}"), 5);
    // A label value holds 63 characters: shorten a long group name (the hash keeps it unique).
    let group: String = group.chars().take(57).collect();
    let group = group.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    format!("{group}-{suffix}")
}

/// A DNS-1123 label, as `spec.hostname` must be.
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

pub fn hostname(group: &str, slot: Slot) -> String {
    format!("{group}-{}-{}", slot.replica, slot.host)
}

fn requests_tpu(pod: &Value) -> bool {
    pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .any(requests_tpu_container)
}

fn requests_tpu_container(container: &Value) -> bool {
    ["requests", "limits"]
        .iter()
        .any(|f| container["resources"][f].get("google.com/tpu").is_some())
}

/// The pod with its slot's labels (and, per config, hostname and TPU env), and warnings
/// for what could not be set.
pub fn apply(
    pod: &Value,
    cluster: &str,
    group: &str,
    hosts: u32,
    slot: Slot,
    cfg: &Indices,
) -> (Value, Vec<String>) {
    let mut warnings = Vec::new();
    let mut pod = pod.clone();
    let replica = slot.replica.to_string();
    labels::set(&mut pod, Meta::Labels, labels::REPLICA_INDEX, &replica);
    if hosts > 1 {
        let host = slot.host.to_string();
        labels::set(&mut pod, Meta::Labels, labels::HOST_INDEX, &host);
        let name = replica_name(cluster, group, slot.replica);
        labels::set(&mut pod, Meta::Labels, labels::REPLICA_NAME, &name);
    }
    let subdomain = format!("{cluster}-headless");
    let host_of = |host| {
        hostname(
            group,
            Slot {
                replica: slot.replica,
                host,
            },
        )
    };
    if cfg.set_hostname && hosts > 1 {
        let host = host_of(slot.host);
        match pod["spec"].as_object_mut() {
            Some(spec) if is_dns_label(&host) && is_dns_label(&subdomain) => {
                spec.entry("hostname").or_insert(json!(host));
                spec.entry("subdomain").or_insert(json!(subdomain));
            }
            _ => warnings.push(format!(
                "rayshare: hostname not set: {host}.{subdomain} is not a valid DNS name"
            )),
        }
    }
    if cfg.tpu_env && requests_tpu(&pod) {
        let peers: Vec<String> = (0..hosts)
            .map(|host| format!("{}.{subdomain}", host_of(host)))
            .collect();
        let env = [
            ("TPU_WORKER_ID", slot.host.to_string()),
            ("TPU_NAME", format!("{group}-{}", slot.replica)),
            ("TPU_WORKER_HOSTNAMES", peers.join(",")),
        ];
        let containers = pod.get_mut("spec").and_then(|s| s.get_mut("containers"));
        for container in containers
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if !requests_tpu_container(container) {
                continue;
            }
            let Some(container) = container.as_object_mut() else {
                continue;
            };
            let env_list = container.entry("env").or_insert(json!([]));
            if !env_list.is_array() {
                *env_list = json!([]);
            }
            let vars = env_list.as_array_mut().expect("just made an array");
            for (name, value) in &env {
                if !vars.iter().any(|v| v["name"] == *name) {
                    vars.push(json!({"name": name, "value": value}));
                }
            }
        }
    }
    (pod, warnings)
}

#[cfg(test)]
mod tests {
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
            worker_hosts: [("tpu".to_string(), hosts)].into(),
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
        let pod = worker(
            json!({"ray.io/node-type": "worker", "ray.io/cluster": "c", "ray.io/group": "tpu"}),
        );
        let want = Plan::Claim {
            cluster: "c".into(),
            group: "tpu".into(),
            hosts: 4,
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
            Plan::Claim { hosts: 1, .. }
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
}
