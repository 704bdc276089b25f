//! Index claims: one Lease per (cluster, group, slot), made through the API server.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Preconditions};
use serde_json::{Value, json};

use super::KubeWorld;
use super::calls::{bounded, to_world_error};
use super::resources::lease_resource;
use crate::domain::indices::{self, Slot};
use crate::domain::labels;
use crate::domain::labels::INDEX_CLAIM;
use crate::world::{Claimed, IndexRequest, WorldError};

mod judge;
use judge::{Claim, Judged, inside, judge, still_unheld};

/// (namespace, cluster, cluster uid, worker group): a new cluster of the same name starts
/// with nothing known.
pub(super) type GroupKey = (String, String, String, String);

/// What this replica knows of a group's claims: the slots taken at its last list, plus
/// those it found or made taken since. Trusted for a moment, so a burst of one group's
/// pods costs a create each rather than a list and a create; a slot released meanwhile
/// is at worst passed over (uniqueness never rests on it: the create does).
#[derive(Default)]
pub(super) struct KnownClaims {
    taken: BTreeSet<Slot>,
    /// Claims of the last list still waiting for their pods.
    unheld: Vec<Claim>,
    listed: Option<Instant>,
}

/// How long a list of claims is trusted.
const CLAIMS_KNOWN_FOR: Duration = Duration::from_secs(1);

/// How often a pod waiting on claims in flight looks again.
const WAIT_POLL: Duration = Duration::from_millis(100);

impl KnownClaims {
    pub(super) fn fresh(&self) -> bool {
        self.listed.is_some_and(|t| t.elapsed() < CLAIMS_KNOWN_FOR)
    }

    /// The group's claims as just listed (under the group's lock: none of this replica's
    /// own are in flight).
    fn update(&mut self, judged: Judged, at: Instant) {
        self.taken = judged.taken;
        self.unheld = judged.unheld;
        self.listed = Some(at);
    }
}

impl KubeWorld {
    /// Deterministic per (cluster, group, slot), and unambiguous: joining the names with
    /// '-' would give (`a-b`, `c`) and (`a`, `b-c`) the same claim.
    /// The cluster's uid is part of it: claims of an earlier cluster of the same name
    /// (left for the garbage collector) never stand in a new one's way.
    fn claim_name(r: &IndexRequest, slot: Slot) -> String {
        let id = format!("{}/{}/{}", r.cluster, r.cluster_uid, r.group);
        let h = crate::domain::naming::hashed(&id, 16);
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

    /// The group's slots that are taken: claimed by this cluster (not an earlier one of
    /// the same name) and either held by a live pod or still in flight. A claim past the
    /// in-flight window whose pod is gone (KubeRay replaced it, or it never came: a
    /// rejected or forged review) is deleted here, so its slot goes to the next pod at
    /// once and a replacement keeps its slice's hostnames.
    async fn list_claims(&self, r: &IndexRequest, timeout: Duration) -> Result<Judged, WorldError> {
        let deadline = Instant::now() + timeout;
        let left = || deadline.saturating_duration_since(Instant::now());
        let selector = format!(
            "{}={},{}={}",
            labels::RAY_CLUSTER,
            r.cluster,
            labels::RAY_GROUP,
            r.group
        );
        let leases: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &r.namespace, &lease_resource());
        let params = ListParams::default().labels(&format!("{INDEX_CLAIM}=true,{selector}"));
        let list = bounded(left(), leases.list_metadata(&params))
            .await?
            .map_err(to_world_error)?;
        let claims: Vec<Claim> = list.items.iter().filter_map(Claim::read).collect();
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &r.namespace);
        let params = ListParams::default().labels(&format!(
            "{selector},{}=worker,{}",
            labels::RAY_NODE_TYPE,
            labels::REPLICA_INDEX
        ));
        let held: BTreeSet<Slot> = bounded(left(), pods.list_metadata(&params))
            .await?
            .map_err(to_world_error)?
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| Slot::of_labels(p.metadata.labels.as_ref()?))
            .collect();
        let judged = judge(&claims, &r.cluster_uid, &held, self.claim_in_flight);
        // A dry run has no side effects, not even tidying.
        if !r.dry_run {
            self.release(r, &judged.stale, left()).await;
        }
        Ok(judged)
    }

    /// Deletes exactly these claims (a newer claim of the same slot survives).
    async fn release(&self, r: &IndexRequest, claims: &[Claim], timeout: Duration) {
        let leases: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &r.namespace, &lease_resource());
        let deadline = Instant::now() + timeout;
        for claim in claims {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(claim.uid.clone()),
                    resource_version: Some(claim.resource_version.clone()),
                }),
                ..DeleteParams::default()
            };
            let left = deadline.saturating_duration_since(Instant::now());
            let _ = bounded(left, leases.delete(&claim.name, &params)).await;
        }
    }

    /// The pod's lowest free slot would open a replica past the group's count while
    /// claims inside it still wait for their pods. Waits for those pods; claims whose pod
    /// has not come within `claimTakeoverMs` are taken over (deleted, so their slots are
    /// free), if the budget leaves time to claim after. `known` is fresh on return.
    async fn settle_gaps(
        &self,
        r: &IndexRequest,
        known: &mut KnownClaims,
        deadline: Instant,
    ) -> Result<usize, WorldError> {
        /// Time kept for the claim itself after waiting.
        const RESERVE: Duration = Duration::from_millis(500);
        let left = || deadline.saturating_duration_since(Instant::now());
        let since = Instant::now();
        known.update(self.list_claims(r, left()).await?, since);
        let doubted = inside(&known.unheld, r.shape);
        if doubted.is_empty() {
            return Ok(0);
        }
        let take_over_at = since + self.claim_takeover;
        let may_take_over = take_over_at + RESERVE <= deadline;
        let give_up = take_over_at.min(deadline.checked_sub(RESERVE).unwrap_or(since));
        loop {
            tokio::time::sleep(WAIT_POLL.min(give_up.saturating_duration_since(Instant::now())))
                .await;
            let at = Instant::now();
            known.update(self.list_claims(r, left()).await?, at);
            let still = still_unheld(&doubted, &known.unheld);
            if still.is_empty() {
                return Ok(0);
            }
            if at < give_up {
                continue;
            }
            if !may_take_over {
                return Ok(0);
            }
            tracing::info!(
                namespace = %r.namespace, cluster = %r.cluster, group = %r.group,
                claims = still.len(), "taking over index claims whose pods did not come"
            );
            self.release(r, &still, left()).await;
            for claim in &still {
                known.taken.remove(&claim.slot);
            }
            known
                .unheld
                .retain(|c| !still.iter().any(|s| s.uid == c.uid));
            return Ok(still.len());
        }
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
    ) -> Result<Claimed, WorldError> {
        const RELIST_EVERY: u32 = 8;
        let deadline = Instant::now() + timeout;
        let remaining = || deadline.saturating_duration_since(Instant::now());
        let queue = {
            let mut queues = self.group_queues.lock().expect("not poisoned");
            queues.retain(|_, q| {
                Arc::strong_count(q) > 1 || q.try_lock().is_ok_and(|known| known.fresh())
            });
            let key = (
                r.namespace.clone(),
                r.cluster.clone(),
                r.cluster_uid.clone(),
                r.group.clone(),
            );
            queues.entry(key).or_default().clone()
        };
        let mut known = tokio::time::timeout(remaining(), queue.lock())
            .await
            .map_err(|_| WorldError::Timeout)?;
        if !known.fresh() {
            let at = Instant::now();
            let judged = self.list_claims(r, remaining()).await?;
            known.update(judged, at);
        }
        let mut settled = false;
        let mut taken_over = 0;
        for lost in 1.. {
            let mut slot = indices::next_slot(&known.taken, r.shape.hosts);
            if r.dry_run {
                return Ok(Claimed { slot, taken_over });
            }
            if !settled && indices::overflows(slot, r.shape) {
                settled = true;
                taken_over = self.settle_gaps(r, &mut known, deadline).await?;
                slot = indices::next_slot(&known.taken, r.shape.hosts);
            }
            let won = self
                .try_create(&Self::claim_object(r, slot), remaining())
                .await?;
            known.taken.insert(slot);
            if won {
                return Ok(Claimed { slot, taken_over });
            }
            if lost % RELIST_EVERY == 0 {
                let at = Instant::now();
                let judged = self.list_claims(r, remaining()).await?;
                known.update(judged, at);
            }
            if remaining().is_zero() {
                break;
            }
        }
        Err(WorldError::Timeout)
    }
}
