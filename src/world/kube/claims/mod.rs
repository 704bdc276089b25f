//! Index claims, made through the API server: a block Lease per replica of a group
//! (`block.rs`), and a Lease per (replica, host) for the hosts a block did not hand out.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
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

mod block;
mod known;
mod read;
pub(super) use known::KnownClaims;

/// How often a pod waiting on claims in flight looks again.
const WAIT_POLL: Duration = Duration::from_millis(100);
use crate::domain::indices::claims::{Claim, Judged, inside, judge, still_unheld};
use crate::domain::indices::next::{Next, Side, next_claim};

/// (namespace, cluster, cluster uid, worker group): a new cluster of the same name starts
/// with nothing known.
pub(super) type GroupKey = (String, String, String, String);

/// A number of its own per request and attempt (the admission's uid is unique).
fn spread_of(admission_uid: &str, attempt: u32) -> usize {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (admission_uid, attempt).hash(&mut h);
    h.finish() as usize
}

/// `rayshare-idx-<hash of cluster, its uid, group>`: every claim of a group starts so.
fn group_prefix(r: &IndexRequest) -> String {
    let id = format!("{}/{}/{}", r.cluster, r.cluster_uid, r.group);
    format!("rayshare-idx-{}", crate::domain::naming::hashed(&id, 16))
}

/// A claim Lease of the group, owned by the RayCluster so it goes with it.
fn lease_object(r: &IndexRequest, name: &str) -> Value {
    let mut metadata = json!({
        "name": name,
        "namespace": r.namespace,
        "labels": {
            labels::MANAGED_BY: labels::MANAGER,
            INDEX_CLAIM: "true",
            labels::INSTANCE: r.instance,
            labels::RAY_CLUSTER: r.cluster,
            labels::RAY_GROUP: r.group,
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

impl KubeWorld {
    /// Deterministic per (cluster, group, slot), and unambiguous: joining the names with
    /// '-' would give (`a-b`, `c`) and (`a`, `b-c`) the same claim.
    /// The cluster's uid is part of it: claims of an earlier cluster of the same name
    /// (left for the garbage collector) never stand in a new one's way.
    fn claim_name(r: &IndexRequest, slot: Slot) -> String {
        format!("{}-{}-{}", group_prefix(r), slot.replica, slot.host)
    }

    /// A claim Lease for one slot.
    pub fn claim_object(r: &IndexRequest, slot: Slot) -> Value {
        let mut lease = lease_object(r, &Self::claim_name(r, slot));
        let l = &mut lease["metadata"]["labels"];
        l[labels::REPLICA_INDEX] = json!(slot.replica.to_string());
        l[labels::HOST_INDEX] = json!(slot.host.to_string());
        lease
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
        let claims: Vec<Claim> = list
            .items
            .iter()
            .filter_map(Claim::read)
            .map(|c| c.within(r.shape.hosts))
            .collect();
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

    /// Deletes exactly these claims (a newer claim of the same slot survives), a few at
    /// once: a recreated group's stale claims must not spend a pod's whole budget.
    async fn release(&self, r: &IndexRequest, claims: &[Claim], timeout: Duration) {
        const AT_ONCE: usize = 8;
        let leases: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &r.namespace, &lease_resource());
        let release = |claim: &Claim| {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(claim.uid.clone()),
                    resource_version: Some(claim.resource_version.clone()),
                }),
                ..DeleteParams::default()
            };
            let (leases, name) = (leases.clone(), claim.name.clone());
            async move {
                let _ = leases.delete(&name, &params).await;
            }
        };
        let all = futures::stream::iter(claims).for_each_concurrent(AT_ONCE, release);
        let _ = tokio::time::timeout(timeout, all).await;
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
        tracing::debug!(
            namespace = %r.namespace, cluster = %r.cluster, group = %r.group,
            doubted = doubted.len(), taken = known.taken.len(),
            "a pod would open a replica past the group's count"
        );
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
            let mut left_over = still;
            let mut taken_over = 0;
            // A block's maker may seal it between our list and our takeover (its version
            // then no longer matches): take it over again as it is now.
            for _ in 0..3 {
                let (blocks, slots): (Vec<Claim>, Vec<Claim>) =
                    left_over.iter().cloned().partition(|c| c.span.is_some());
                self.release(r, &slots, left()).await;
                for claim in &blocks {
                    block::take_over(&self.client, &r.namespace, claim, left()).await;
                }
                let at = Instant::now();
                known.update(self.list_claims(r, left()).await?, at);
                let now_left = still_unheld(&left_over, &known.unheld);
                taken_over += left_over.len() - now_left.len();
                left_over = now_left;
                if left_over.is_empty() || left().is_zero() {
                    break;
                }
            }
            return Ok(taken_over);
        }
    }

    /// The end of a group this replica opens blocks from: the low one while it leads or
    /// knows of no election, else the high one.
    fn side(&self) -> Side {
        match self.leading.get() {
            Some(leading) if !*leading.borrow() => Side::High,
            _ => Side::Low,
        }
    }

    /// How long a block made here hands out hosts: half the takeover wait, so a pod that
    /// takes a block over never races its maker.
    fn block_open_for(&self) -> Duration {
        (self.claim_takeover / 2).min(Duration::from_secs(1))
    }

    /// Lists the group's claims (unless listed a moment ago), then creates the claim of
    /// the lowest free slot; the API server's name uniqueness makes the create the
    /// arbiter. A lost race (with another replica) moves up to the next free slot,
    /// re-listing now and then (at once for a block: the other end has come this far),
    /// so claims stay compact: a claimer only ever passes slots it saw taken.
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
        let lock = || async {
            tokio::time::timeout(remaining(), queue.lock())
                .await
                .map_err(|_| WorldError::Timeout)
        };
        // Blocks need an owner to go with, and a maker that may hand out for a moment.
        let blocks_on =
            r.shape.hosts > 1 && !r.cluster_uid.is_empty() && !self.block_open_for().is_zero();
        let mut known = lock().await?;
        if !r.dry_run && blocks_on {
            loop {
                if let Some(slot) = known.take_open() {
                    return Ok(Claimed {
                        slot,
                        taken_over: 0,
                    });
                }
                if !known.worth_waiting(r.shape.hosts) {
                    break;
                }
                // Counted until dropped, even if this admission is (its caller gone).
                let waiter = known.wait();
                let made = known.made.clone();
                let notified = made.notified();
                drop(known);
                let waited = tokio::time::timeout(remaining(), notified).await;
                known = lock().await?;
                drop(waiter);
                waited.map_err(|_| WorldError::Timeout)?;
            }
        }
        if !known.fresh() {
            let at = Instant::now();
            let judged = self.list_claims(r, remaining()).await?;
            known.update(judged, at);
        }
        let mut settled = false;
        let mut taken_over = 0;
        for lost in 1.. {
            // Another of our pods may have opened a block meanwhile.
            if lost > 1
                && !r.dry_run
                && let Some(slot) = known.take_open()
            {
                return Ok(Claimed { slot, taken_over });
            }
            let slot = indices::next_slot(&known.taken, r.shape.hosts);
            if r.dry_run {
                return Ok(Claimed { slot, taken_over });
            }
            if !settled && indices::overflows(slot, r.shape) {
                // Our blocks on their way or still handing out may have given hosts to
                // pods that never come: wait (without the group's lock, which their
                // makers and sealers need) until they are made and sealed, then judge.
                // No list meanwhile: once they settle, the judging lists afresh.
                if known.blocks_unsettled() {
                    if remaining().is_zero() {
                        break;
                    }
                    drop(known);
                    tokio::time::sleep(WAIT_POLL.min(remaining())).await;
                    known = lock().await?;
                    continue;
                }
                settled = true;
                taken_over = self.settle_gaps(r, &mut known, deadline).await?;
            }
            let spread = spread_of(&r.admission_uid, lost);
            let ends = (self.side(), spread);
            let won = match next_claim(&known.taken, &known.blocks, r.shape, blocks_on, ends) {
                Next::Slot(slot) => {
                    let won = self
                        .try_create(&Self::claim_object(r, slot), remaining())
                        .await?
                        .is_some();
                    known.taken.insert(slot);
                    won.then_some(slot)
                }
                Next::Open(replica) => {
                    let asked = Instant::now();
                    // Ours or someone's: its hosts are taken either way.
                    known
                        .taken
                        .extend((0..r.shape.hosts).map(|host| Slot { replica, host }));
                    known.blocks.insert(replica);
                    // Made without the group's lock: our other pods meanwhile open the
                    // next replicas' blocks, so a burst is not one create at a time.
                    known.making.insert(replica, r.shape.hosts);
                    drop(known);
                    // Made and booked by a task of its own: if this admission is dropped
                    // (its caller gone), the block still stops counting as on its way
                    // and the pods waiting for it still look again.
                    let opening = block::open(
                        self.client.clone(),
                        (r.clone(), replica),
                        self.block_open_for(),
                        queue.clone(),
                        deadline,
                    );
                    let slot = tokio::spawn(opening)
                        .await
                        .map_err(|e| WorldError::Api(format!("making a block claim: {e}")))??;
                    if let Some(slot) = slot {
                        return Ok(Claimed { slot, taken_over });
                    }
                    known = lock().await?;
                    // Lost to another webhook replica: the other end of the group has
                    // come this far, and what we know of it is older than this burst.
                    // One list now instead of a string of creates lost to its blocks.
                    if known.listed.is_none_or(|t| t < asked) {
                        let at = Instant::now();
                        known.update(self.list_claims(r, remaining()).await?, at);
                    }
                    None
                }
                Next::Gate(replica) => {
                    let gate = block::block_object(r, replica, Some(0));
                    if self.try_create(&gate, remaining()).await?.is_none() {
                        // Someone's block: what it hands out shows in a list.
                        let at = Instant::now();
                        known.update(self.list_claims(r, remaining()).await?, at);
                    }
                    known.blocks.insert(replica);
                    None
                }
            };
            if let Some(slot) = won {
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
