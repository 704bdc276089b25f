//! Releases per-host index claims whose pod never appeared or is gone, so their slots are
//! reused. Block claims stay with their cluster: they keep per-host claims in their
//! replica apart from their maker's hand-outs (`world/kube/claims/block.rs`).

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};

use super::{age, delete_exact, list_metadata};
use crate::config::Indices;
use crate::domain::indices::Slot;
use crate::domain::labels;
use crate::domain::labels::INDEX_CLAIM;
use crate::metrics::Metrics;
use crate::world::kube::lease_resource;

type SlotKey = (String, String, String, Slot);

fn slot_key(
    namespace: Option<&String>,
    l: &std::collections::BTreeMap<String, String>,
) -> Option<SlotKey> {
    Some((
        namespace?.clone(),
        l.get(labels::RAY_CLUSTER)?.clone(),
        l.get(labels::RAY_GROUP)?.clone(),
        Slot::of_labels(l)?,
    ))
}

/// One pass; the runner retries a failed one with backoff.
pub async fn pass(client: &Client, cfg: &Indices, metrics: &Metrics) -> Result<(), kube::Error> {
    let resource = lease_resource();
    let leases: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let grace = Duration::from_secs(cfg.claim_grace_seconds);
    let claims: Vec<_> = list_metadata(
        &leases,
        ListParams::default().labels(&format!("{INDEX_CLAIM}=true,!{}", labels::CLAIM_HOSTS)),
    )
    .await?
    .into_iter()
    .filter(|c| age(&c.metadata) > grace)
    .collect();
    if claims.is_empty() {
        return Ok(());
    }
    let pods: Api<Pod> = Api::all(client.clone());
    let selector = format!("{}=worker,{}", labels::RAY_NODE_TYPE, labels::REPLICA_INDEX);
    let held: HashSet<SlotKey> = list_metadata(&pods, ListParams::default().labels(&selector))
        .await?
        .iter()
        .filter_map(|p| slot_key(p.metadata.namespace.as_ref(), p.metadata.labels.as_ref()?))
        .collect();
    for claim in claims {
        let key = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| slot_key(claim.metadata.namespace.as_ref(), l));
        if key.is_some_and(|k| !held.contains(&k)) {
            delete_exact(
                client,
                &resource,
                &claim,
                "IndexClaim",
                "no pod holds its slot",
                metrics,
            )
            .await;
        }
    }
    Ok(())
}
