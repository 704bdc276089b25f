//! What rayshare knows of a RayCluster, read from the object (pure).

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::domain::labels::Meta;
use crate::domain::{labels, time};

/// What rayshare needs to know about a RayCluster.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterInfo {
    pub uid: String,
    pub managed_by_rayshare: bool,
    pub digest: Option<String>,
    /// The shape of each worker group, by name.
    pub worker_groups: BTreeMap<String, WorkerGroup>,
    pub created: Option<Timestamp>,
    /// When a job was last admitted onto it (rayshare's stamp).
    pub last_admitted: Option<Timestamp>,
    /// When its last active job ended or was deleted (rayshare's stamp).
    pub last_active: Option<Timestamp>,
    /// Its idle-TTL annotation, as written.
    pub idle_ttl: Option<String>,
    /// Being deleted (has a deletionTimestamp).
    pub deleting: bool,
    /// When the reclaimer marked it for deletion (see `reclaim::step`).
    pub marked: Option<Timestamp>,
}

/// How many pods KubeRay makes for a worker group: `replicas` of `hosts` pods each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerGroup {
    /// `numOfHosts` (default 1).
    pub hosts: u32,
    /// `replicas` within `[minReplicas, maxReplicas]`, 0 when suspended, as KubeRay
    /// counts them.
    pub replicas: u32,
}

impl WorkerGroup {
    /// What the shape is read from (all a cache needs to keep of a worker group).
    pub const FIELDS: &[&str] = &[
        "groupName",
        "numOfHosts",
        "replicas",
        "minReplicas",
        "maxReplicas",
        "suspend",
    ];

    fn from_value(g: &Value) -> Self {
        let count = |f: &str| g[f].as_u64().map(|n| n.min(u32::MAX as u64) as u32);
        let hosts = count("numOfHosts").unwrap_or(1).max(1);
        let mut replicas = count("replicas").unwrap_or(0);
        replicas = replicas.max(count("minReplicas").unwrap_or(0));
        replicas = replicas.min(count("maxReplicas").unwrap_or(u32::MAX));
        if g["suspend"] == true {
            replicas = 0;
        }
        Self { hosts, replicas }
    }
}

impl ClusterInfo {
    /// rayshare made it, for the config with this digest: never take over anything else.
    pub fn serves(&self, digest: &str) -> bool {
        self.managed_by_rayshare && self.digest.as_deref() == Some(digest)
    }

    pub fn from_value(cluster: &Value) -> Self {
        let worker_groups = cluster["spec"]["workerGroupSpecs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| {
                Some((
                    g["groupName"].as_str()?.to_string(),
                    WorkerGroup::from_value(g),
                ))
            })
            .collect();
        Self {
            uid: cluster["metadata"]["uid"].as_str().unwrap_or("").into(),
            managed_by_rayshare: labels::get(cluster, Meta::Labels, labels::MANAGED_BY)
                == Some(labels::MANAGER),
            digest: labels::get(cluster, Meta::Annotations, labels::CONFIG_DIGEST).map(Into::into),
            worker_groups,
            created: time::parse_time(&cluster["metadata"]["creationTimestamp"]),
            last_admitted: labels::get(cluster, Meta::Annotations, labels::LAST_ADMITTED)
                .and_then(|t| t.parse().ok()),
            last_active: labels::get(cluster, Meta::Annotations, labels::LAST_ACTIVE)
                .and_then(|t| t.parse().ok()),
            idle_ttl: labels::get(cluster, Meta::Annotations, labels::IDLE_TTL).map(Into::into),
            deleting: cluster["metadata"]["deletionTimestamp"].is_string(),
            marked: labels::get(cluster, Meta::Annotations, labels::RECLAIM_MARKED)
                .and_then(|t| t.parse().ok()),
        }
    }
}
