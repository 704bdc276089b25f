//! Deletes rayshare's PodGroups whose pod never appeared or is gone, and that have no
//! owner to take them away (Volcano issue 4195: orphaned groups hold queue capacity).

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::PartialObjectMeta;

use super::{age, delete_exact, for_each_page, list_metadata, since};
use crate::config::PodGroups;
use crate::domain::labels;
use crate::domain::labels::POD_UID;
use crate::metrics::Metrics;
use crate::world::kube::pod_group_resource;

/// Beyond this many namespaces with candidates, one cluster-wide list is cheaper.
const MAX_NAMESPACED_LISTS: usize = 20;

/// One pass; the runner retries a failed one with backoff.
pub async fn pass(
    client: &Client,
    cfg: &PodGroups,
    instance: &str,
    metrics: &Metrics,
) -> Result<(), kube::Error> {
    let resource = pod_group_resource();
    let groups: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let selector = format!(
        "{}={},{}={}",
        labels::MANAGED_BY,
        labels::MANAGER,
        labels::INSTANCE,
        instance
    );
    // A group no stored pod has taken up yet was made on a review's word alone.
    let grace = |g: &PartialObjectMeta<DynamicObject>| {
        let taken_up = g
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(POD_UID));
        Duration::from_secs(if taken_up {
            cfg.orphan_grace_seconds
        } else {
            cfg.unconfirmed_grace_seconds
        })
    };
    // Owned groups too: an owner (a Job, a Flyte workflow) can outlive many of its pods,
    // and each orphaned group holds queue capacity until then.
    let admitted_at = |g: &PartialObjectMeta<DynamicObject>| {
        let stamp = g.metadata.annotations.as_ref()?.get(labels::ADMITTED_AT)?;
        stamp.parse::<Timestamp>().ok()
    };
    let candidates: Vec<_> = list_metadata(&groups, ListParams::default().labels(&selector))
        .await?
        .into_iter()
        .filter(|g| age(&g.metadata) > grace(g))
        .filter(|g| admitted_at(g).is_none_or(|t| since(t) > grace(g)))
        .collect();
    if candidates.is_empty() {
        return Ok(());
    }
    // (namespace, group) of every pod that names a group, in the candidates' namespaces
    // only (or the whole cluster, when they are spread over many).
    let namespaces: BTreeSet<&str> = candidates
        .iter()
        .filter_map(|g| g.metadata.namespace.as_deref())
        .collect();
    let scopes: Vec<Api<Pod>> = if namespaces.len() > MAX_NAMESPACED_LISTS {
        vec![Api::all(client.clone())]
    } else {
        namespaces
            .iter()
            .map(|ns| Api::namespaced(client.clone(), ns))
            .collect()
    };
    let mut in_use: HashSet<(String, String)> = HashSet::new();
    for pods in &scopes {
        let note = |p: PartialObjectMeta<Pod>| {
            let meta = p.metadata;
            if let (Some(ns), Some(mut annotations)) = (meta.namespace, meta.annotations)
                && let Some(group) = annotations.remove(labels::GROUP_NAME)
            {
                in_use.insert((ns, group));
            }
        };
        let page = |p: ListParams| async move { pods.list_metadata(&p).await };
        for_each_page(ListParams::default(), page, note).await?;
    }
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
