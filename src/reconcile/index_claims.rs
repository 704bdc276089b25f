//! Releases per-host index claims whose pod never appeared or is gone, so their slots are
//! reused (`domain::orphans` judges). Block claims stay with their cluster: they keep
//! per-host claims in their replica apart from their maker's hand-outs
//! (`world/kube/claims/block.rs`).

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};

use super::{delete_exact, list_metadata};
use crate::config::Indices;
use crate::domain::labels::{self, INDEX_CLAIM};
use crate::domain::orphans::{self, SlotKey};
use crate::metrics::Metrics;
use crate::world::kube::lease_resource;

/// One pass; the runner retries a failed one with backoff.
pub async fn pass(
    client: &Client,
    cfg: &Indices,
    instance: &str,
    metrics: &Metrics,
) -> Result<(), kube::Error> {
    let resource = lease_resource();
    let leases: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let judge = (instance, Duration::from_secs(cfg.claim_grace_seconds));
    let per_host = format!("{INDEX_CLAIM}=true,!{}", labels::CLAIM_HOSTS);
    let claims: Vec<_> = list_metadata(&leases, ListParams::default().labels(&per_host))
        .await?
        .into_iter()
        .map(|c| c.metadata)
        .collect();
    let now = Timestamp::now();
    // Nothing old enough to judge: no need to list the pods.
    if orphans::stale_claims(&claims, &HashSet::new(), judge, now).is_empty() {
        return Ok(());
    }
    let pods: Api<Pod> = Api::all(client.clone());
    let selector = format!("{}=worker,{}", labels::RAY_NODE_TYPE, labels::REPLICA_INDEX);
    let held: HashSet<SlotKey> = list_metadata(&pods, ListParams::default().labels(&selector))
        .await?
        .iter()
        .filter_map(|p| orphans::slot_held(&p.metadata))
        .collect();
    for claim in orphans::stale_claims(&claims, &held, judge, now) {
        let reason = "no pod holds its slot";
        delete_exact(client, &resource, claim, "IndexClaim", reason, metrics).await;
    }
    Ok(())
}
