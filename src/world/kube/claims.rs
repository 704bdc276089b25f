//! Index claims: one Lease per (cluster, group, slot), made through the API server.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{Value, json};

use super::KubeWorld;
use super::calls::{bounded, to_world_error};
use super::resources::{INDEX_CLAIM, lease_resource};
use crate::domain::indices::{self, Slot};
use crate::domain::labels;
use crate::world::{IndexRequest, WorldError};

/// (namespace, cluster, worker group).
pub(super) type GroupKey = (String, String, String);

/// What this replica knows of a group's claims: the slots taken at its last list, plus
/// those it found or made taken since. Trusted for a moment, so a burst of one group's
/// pods costs a create each rather than a list and a create; a slot released meanwhile
/// is at worst passed over (uniqueness never rests on it: the create does).
#[derive(Default)]
pub(super) struct KnownClaims {
    taken: BTreeSet<Slot>,
    listed: Option<Instant>,
}

/// How long a list of claims is trusted.
const CLAIMS_KNOWN_FOR: Duration = Duration::from_secs(1);

impl KnownClaims {
    pub(super) fn fresh(&self) -> bool {
        self.listed.is_some_and(|t| t.elapsed() < CLAIMS_KNOWN_FOR)
    }
}

impl KubeWorld {
    /// Deterministic per (cluster, group, slot), and unambiguous: joining the names with
    /// '-' would give (`a-b`, `c`) and (`a`, `b-c`) the same claim.
    fn claim_name(r: &IndexRequest, slot: Slot) -> String {
        let h = crate::domain::naming::hashed(&format!("{}/{}", r.cluster, r.group), 16);
        format!("rayshare-idx-{h}-{}-{}", slot.replica, slot.host)
    }

    /// A claim Lease for one slot, owned by the RayCluster so it goes with it.
    pub fn claim_object(r: &IndexRequest, slot: Slot) -> Value {
        let mut metadata = json!({
            "name": Self::claim_name(r, slot),
            "namespace": r.namespace,
            "labels": {
                labels::MANAGED_BY: labels::MANAGER,
                INDEX_CLAIM: "true",
                labels::RAY_CLUSTER: r.cluster,
                labels::RAY_GROUP: r.group,
                labels::REPLICA_INDEX: slot.replica.to_string(),
                labels::HOST_INDEX: slot.host.to_string(),
            },
            "annotations": { labels::ADMISSION_UID: r.admission_uid },
        });
        if !r.cluster_uid.is_empty() {
            metadata["ownerReferences"] = json!([{
                "apiVersion": "ray.io/v1", "kind": "RayCluster",
                "name": r.cluster, "uid": r.cluster_uid,
            }]);
        }
        json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": { "holderIdentity": r.admission_uid },
        })
    }

    async fn taken_slots(
        &self,
        r: &IndexRequest,
        timeout: Duration,
    ) -> Result<BTreeSet<Slot>, WorldError> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &r.namespace, &lease_resource());
        let selector = format!(
            "{INDEX_CLAIM}=true,{}={},{}={}",
            labels::RAY_CLUSTER,
            r.cluster,
            labels::RAY_GROUP,
            r.group
        );
        let list = bounded(
            timeout,
            api.list_metadata(&ListParams::default().labels(&selector)),
        )
        .await?
        .map_err(to_world_error)?;
        Ok(list
            .items
            .iter()
            .filter_map(|o| {
                let l = o.metadata.labels.as_ref()?;
                Some(Slot {
                    replica: l.get(labels::REPLICA_INDEX)?.parse().ok()?,
                    host: l.get(labels::HOST_INDEX)?.parse().ok()?,
                })
            })
            .collect())
    }

    /// Lists the group's claims (unless listed a moment ago), then creates the claim of
    /// the lowest free slot; the API server's name uniqueness makes the create the
    /// arbiter. A lost race (with another replica) moves up to the next free slot,
    /// re-listing now and then, so claims stay compact: a claimer only ever passes slots
    /// it saw taken.
    pub(super) async fn claim(
        &self,
        r: &IndexRequest,
        timeout: Duration,
    ) -> Result<Slot, WorldError> {
        const RELIST_EVERY: u32 = 8;
        let deadline = Instant::now() + timeout;
        let remaining = || deadline.saturating_duration_since(Instant::now());
        let queue = {
            let mut queues = self.group_queues.lock().expect("not poisoned");
            queues.retain(|_, q| {
                Arc::strong_count(q) > 1 || q.try_lock().is_ok_and(|known| known.fresh())
            });
            let key = (r.namespace.clone(), r.cluster.clone(), r.group.clone());
            queues.entry(key).or_default().clone()
        };
        let mut known = tokio::time::timeout(remaining(), queue.lock())
            .await
            .map_err(|_| WorldError::Timeout)?;
        if !known.fresh() {
            let at = Instant::now();
            known.taken = self.taken_slots(r, remaining()).await?;
            known.listed = Some(at);
        }
        for lost in 1.. {
            let slot = indices::next_slot(&known.taken, r.hosts);
            if r.dry_run {
                return Ok(slot);
            }
            let won = self
                .try_create(&Self::claim_object(r, slot), remaining())
                .await?;
            known.taken.insert(slot);
            if won {
                return Ok(slot);
            }
            if lost % RELIST_EVERY == 0 {
                let at = Instant::now();
                let listed = self.taken_slots(r, remaining()).await?;
                known.taken.extend(listed);
                known.listed = Some(at);
            }
            if remaining().is_zero() {
                break;
            }
        }
        Err(WorldError::Timeout)
    }
}
