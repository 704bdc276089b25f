//! Deletes rayshare's PodGroups whose pod never appeared or is gone, and that have no
//! owner to take them away (Volcano issue 4195: orphaned groups hold queue capacity).

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::PartialObjectMeta;

use super::{age, delete_exact, list_metadata, since};
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
    // Owned groups too: an owner (a Job, a Flyte workflow) can outlive many of its pods,
    // and each orphaned group holds queue capacity until then.
    let admitted_at = |g: &PartialObjectMeta<DynamicObject>| {
        let stamp = g.metadata.annotations.as_ref()?.get(labels::ADMITTED_AT)?;
        stamp.parse::<Timestamp>().ok()
    };
    let candidates: Vec<_> = list_metadata(&groups, ListParams::default().labels(&selector))
        .await?
        .into_iter()
        .filter(|g| age(&g.metadata) > grace)
        .filter(|g| admitted_at(g).is_none_or(|t| since(t) > grace))
        .collect();
    if candidates.is_empty() {
        return Ok(());
    }
    // (namespace, group) of every pod that names a group.
    let pods: Api<Pod> = Api::all(client.clone());
    let in_use: HashSet<(String, String)> = list_metadata(&pods, ListParams::default())
        .await?
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
