//! Replica and host indices for multi-host Ray worker pods (pure parts).
//!
//! Which slot is free is decided here, and what a group's claims mean for the next one
//! (`claims`); which slot a pod *gets* is decided by the API server (see
//! `world/kube/claims/`): a cache cannot make indices unique.

pub(crate) mod claims;
pub(crate) mod next;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::config::Indices;
use crate::domain::cluster::{ClusterInfo, WorkerGroup};
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

/// The slot opens a replica past those KubeRay makes for the group. Real pods only get
/// there when a slot inside was claimed for a pod that never came (an admission rejected
/// after rayshare's, or forged): claiming it would leave both replicas incomplete.
pub fn overflows(slot: Slot, shape: WorkerGroup) -> bool {
    shape.replicas > 0 && slot.replica >= shape.replicas
}

#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    Skip(Option<String>),
    /// Claim a slot of `group` for this pod.
    Claim {
        cluster: String,
        group: String,
        shape: WorkerGroup,
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
    let Some(&shape) = cluster.worker_groups.get(group) else {
        return Plan::Skip(Some(format!(
            "rayshare: indices skipped: RayCluster {cluster_name} has no worker group {group}"
        )));
    };
    let hosts = shape.hosts;
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
        shape,
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
mod tests;
