//! Deletes rayshare's PodGroups whose pod never appeared or is gone, and that have no
//! owner to take them away (Volcano issue 4195: orphaned groups hold queue capacity).

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};

use super::{age, delete_exact};
use crate::config::PodGroups;
use crate::kube_world::pod_group_resource;
use crate::labels;
use crate::metrics::Metrics;

pub async fn pass(client: &Client, cfg: &PodGroups, metrics: &Metrics) {
    if let Err(e) = try_pass(client, cfg, metrics).await {
        tracing::warn!(error = %e, "PodGroup reconcile pass failed");
        metrics.error("reconcile_list");
    }
}

async fn try_pass(client: &Client, cfg: &PodGroups, metrics: &Metrics) -> Result<(), kube::Error> {
    let resource = pod_group_resource();
    let groups: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let selector = format!("{}={}", labels::MANAGED_BY, labels::MANAGER);
    let grace = Duration::from_secs(cfg.orphan_grace_seconds);
    let candidates: Vec<_> = groups
        .list_metadata(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|g| {
            g.metadata
                .owner_references
                .as_ref()
                .is_none_or(Vec::is_empty)
        })
        .filter(|g| age(&g.metadata) > grace)
        .collect();
    if candidates.is_empty() {
        return Ok(());
    }
    // (namespace, group) of every pod that names a group.
    let pods: Api<Pod> = Api::all(client.clone());
    let in_use: HashSet<(String, String)> = pods
        .list_metadata(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|p| {
            let group = p
                .metadata
                .annotations
                .as_ref()?
                .get(labels::GROUP_NAME)?
                .clone();
            Some((p.metadata.namespace?, group))
        })
        .collect();
    for group in candidates {
        let key = (
            group.metadata.namespace.clone().unwrap_or_default(),
            group.metadata.name.clone().unwrap_or_default(),
        );
        if !in_use.contains(&key) {
            delete_exact(
                client,
                &resource,
                &group,
                "PodGroup",
                "its pod never appeared or is gone",
                metrics,
            )
            .await;
        }
    }
    Ok(())
}
