//! Deletes rayshare's PodGroups whose pod never appeared or is gone, and that have no
//! owner to take them away (Volcano issue 4195: orphaned groups hold queue capacity).
//! `domain::orphans` judges; this lists and deletes.

use std::collections::{BTreeSet, HashSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::PartialObjectMeta;

use super::{delete_exact, for_each_page, list_metadata};
use crate::config::PodGroups;
use crate::domain::labels;
use crate::domain::orphans::{self, GroupKey};
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
    let groups: Vec<_> = list_metadata(&groups, ListParams::default().labels(&selector))
        .await?
        .into_iter()
        .map(|g| g.metadata)
        .collect();
    let candidates = orphans::pod_group_candidates(&groups, cfg, Timestamp::now());
    if candidates.is_empty() {
        return Ok(());
    }
    // (namespace, group) of every pod that names a group, in the candidates' namespaces
    // only (or the whole cluster, when they are spread over many).
    let namespaces: BTreeSet<&str> = candidates
        .iter()
        .filter_map(|g| g.namespace.as_deref())
        .collect();
    let scopes: Vec<Api<Pod>> = if namespaces.len() > MAX_NAMESPACED_LISTS {
        vec![Api::all(client.clone())]
    } else {
        namespaces
            .iter()
            .map(|ns| Api::namespaced(client.clone(), ns))
            .collect()
    };
    let mut in_use: HashSet<GroupKey> = HashSet::new();
    for pods in &scopes {
        let note = |p: PartialObjectMeta<Pod>| in_use.extend(orphans::group_named(&p.metadata));
        let page = |p: ListParams| async move { pods.list_metadata(&p).await };
        for_each_page(ListParams::default(), page, note).await?;
    }
    for group in orphans::orphaned_groups(candidates, &in_use) {
        let reason = "its pod never appeared or is gone";
        delete_exact(client, &resource, group, "PodGroup", reason, metrics).await;
    }
    Ok(())
}
