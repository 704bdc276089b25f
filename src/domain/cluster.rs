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
    /// `numOfHosts` per worker group (default 1).
    pub worker_hosts: BTreeMap<String, u32>,
    pub created: Option<Timestamp>,
    /// When a job was last admitted onto it (rayshare's stamp).
    pub last_admitted: Option<Timestamp>,
    /// Its idle-TTL annotation, as written.
    pub idle_ttl: Option<String>,
    /// Being deleted (has a deletionTimestamp).
    pub deleting: bool,
    /// When the reclaimer marked it for deletion (see `reclaim::step`).
    pub marked: Option<Timestamp>,
}

impl ClusterInfo {
    /// rayshare made it, for the config with this digest: never take over anything else.
    pub fn serves(&self, digest: &str) -> bool {
        self.managed_by_rayshare && self.digest.as_deref() == Some(digest)
    }

    pub fn from_value(cluster: &Value) -> Self {
        let worker_hosts = cluster["spec"]["workerGroupSpecs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| {
                let hosts = g["numOfHosts"]
                    .as_u64()
                    .unwrap_or(1)
                    .clamp(1, u32::MAX as u64);
                Some((g["groupName"].as_str()?.to_string(), hosts as u32))
            })
            .collect();
        Self {
            uid: cluster["metadata"]["uid"].as_str().unwrap_or("").into(),
            managed_by_rayshare: labels::get(cluster, Meta::Labels, labels::MANAGED_BY)
                == Some(labels::MANAGER),
            digest: labels::get(cluster, Meta::Annotations, labels::CONFIG_DIGEST).map(Into::into),
            worker_hosts,
            created: time::parse_time(&cluster["metadata"]["creationTimestamp"]),
            last_admitted: labels::get(cluster, Meta::Annotations, labels::LAST_ADMITTED)
                .and_then(|t| t.parse().ok()),
            idle_ttl: labels::get(cluster, Meta::Annotations, labels::IDLE_TTL).map(Into::into),
            deleting: cluster["metadata"]["deletionTimestamp"].is_string(),
            marked: labels::get(cluster, Meta::Annotations, labels::RECLAIM_MARKED)
                .and_then(|t| t.parse().ok()),
        }
    }
}
