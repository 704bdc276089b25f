//! Index claims: one Lease per (cluster, group, slot), made through the API server.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Preconditions};
use kube::core::PartialObjectMeta;
use serde_json::{Value, json};

use super::KubeWorld;
use super::calls::{bounded, to_world_error};
use super::resources::lease_resource;
use crate::domain::indices::{self, Slot};
use crate::domain::labels;
use crate::domain::labels::INDEX_CLAIM;
use crate::world::{IndexRequest, WorldError};

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
    async fn taken_slots(
        &self,
        r: &IndexRequest,
        timeout: Duration,
    ) -> Result<BTreeSet<Slot>, WorldError> {
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
        for stale in judged.stale.iter().filter(|_| !r.dry_run) {
            // Only exactly the claim we judged: a fresh claim of the slot survives.
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(stale.uid.clone()),
                    resource_version: Some(stale.resource_version.clone()),
                }),
                ..DeleteParams::default()
            };
            let _ = bounded(left(), leases.delete(&stale.name, &params)).await;
        }
        Ok(judged.taken)
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

/// One claim Lease, as the claim logic reads it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Claim {
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    pub slot: Slot,
    /// The RayCluster that owns it (its uid).
    pub owner: Option<String>,
    pub age: Duration,
}

impl Claim {
    fn read(o: &PartialObjectMeta<DynamicObject>) -> Option<Self> {
        let m = &o.metadata;
        Some(Self {
            name: m.name.clone()?,
            uid: m.uid.clone().unwrap_or_default(),
            resource_version: m.resource_version.clone().unwrap_or_default(),
            slot: Slot::of_labels(m.labels.as_ref()?)?,
            owner: m
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.kind == "RayCluster")
                .map(|o| o.uid.clone()),
            age: super::calls::age(m),
        })
    }
}

/// What a group's claims mean for the next claim.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Judged {
    pub taken: BTreeSet<Slot>,
    /// Claims no pod holds, past the in-flight window: to delete.
    pub stale: Vec<Claim>,
}

/// Sorts a group's claims: another cluster's (same name, other uid) do not count; a claim
/// counts while a live pod holds its slot or while its pod may still be on its way.
pub(super) fn judge(
    claims: &[Claim],
    cluster_uid: &str,
    held: &BTreeSet<Slot>,
    in_flight: Duration,
) -> Judged {
    let mut judged = Judged::default();
    for claim in claims {
        let other_cluster = !cluster_uid.is_empty()
            && claim
                .owner
                .as_deref()
                .is_some_and(|owner| owner != cluster_uid);
        if other_cluster {
            continue;
        }
        if held.contains(&claim.slot) || claim.age < in_flight {
            judged.taken.insert(claim.slot);
        } else {
            judged.stale.push(claim.clone());
        }
    }
    judged
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn claim(replica: u32, host: u32, owner: &str, age_s: u64) -> Claim {
        Claim {
            name: format!("c-{replica}-{host}"),
            uid: format!("u-{replica}-{host}"),
            resource_version: "1".into(),
            slot: Slot { replica, host },
            owner: (!owner.is_empty()).then(|| owner.to_string()),
            age: Duration::from_secs(age_s),
        }
    }

    fn slots(list: &[(u32, u32)]) -> BTreeSet<Slot> {
        list.iter()
            .map(|&(replica, host)| Slot { replica, host })
            .collect()
    }

    const IN_FLIGHT: Duration = Duration::from_secs(10);

    #[rstest]
    #[case::held_by_a_pod(claim(0, 1, "c1", 300), &[(0, 1)], &[(0, 1)], 0)]
    #[case::pod_on_its_way(claim(0, 1, "c1", 2), &[], &[(0, 1)], 0)]
    #[case::pod_gone(claim(1, 2, "c1", 300), &[], &[], 1)]
    #[case::earlier_cluster(claim(0, 0, "old", 300), &[(0, 0)], &[], 0)]
    #[case::owner_unknown(claim(0, 0, "", 2), &[], &[(0, 0)], 0)]
    fn claims_are_judged(
        #[case] c: Claim,
        #[case] held: &[(u32, u32)],
        #[case] taken: &[(u32, u32)],
        #[case] stale: usize,
    ) {
        let judged = judge(&[c], "c1", &slots(held), IN_FLIGHT);
        assert_eq!(judged.taken, slots(taken));
        assert_eq!(judged.stale.len(), stale);
    }

    #[test]
    fn a_replaced_worker_finds_its_slot_free() {
        // Three replicas of two hosts; the pod of (1, 0) was deleted a moment ago.
        let claims: Vec<Claim> = (0..3)
            .flat_map(|r| (0..2).map(move |h| claim(r, h, "c1", 120)))
            .collect();
        let held = slots(&[(0, 0), (0, 1), (1, 1), (2, 0), (2, 1)]);
        let judged = judge(&claims, "c1", &held, IN_FLIGHT);
        assert_eq!(
            indices::next_slot(&judged.taken, 2),
            Slot {
                replica: 1,
                host: 0
            }
        );
        assert_eq!(judged.stale.len(), 1);
    }
}
