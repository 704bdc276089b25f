//! What a group's claims mean for the next one (pure: the claim loop's decisions).

use std::collections::BTreeSet;
use std::time::Duration;

use kube::api::DynamicObject;
use kube::core::PartialObjectMeta;

use crate::domain::indices::Slot;
use crate::world::WorkerGroup;

/// One claim Lease, as the claim logic reads it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Claim {
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    pub slot: Slot,
    /// The RayCluster that owns it (its uid).
    pub owner: Option<String>,
    pub age: Duration,
}

impl Claim {
    pub(crate) fn read(o: &PartialObjectMeta<DynamicObject>) -> Option<Self> {
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
            age: crate::world::kube::calls::age(m),
        })
    }
}

/// What a group's claims mean for the next claim.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Judged {
    pub taken: BTreeSet<Slot>,
    /// Claims no pod holds yet, inside the in-flight window.
    pub unheld: Vec<Claim>,
    /// Claims no pod holds, past the in-flight window: to delete.
    pub stale: Vec<Claim>,
}

/// The claims in flight inside the replicas KubeRay makes for the group.
pub(crate) fn inside(unheld: &[Claim], shape: WorkerGroup) -> Vec<Claim> {
    unheld
        .iter()
        .filter(|c| c.slot.replica < shape.replicas)
        .cloned()
        .collect()
}

/// Those of `doubted` still waiting for their pods, as last listed.
pub(crate) fn still_unheld(doubted: &[Claim], unheld: &[Claim]) -> Vec<Claim> {
    unheld
        .iter()
        .filter(|c| doubted.iter().any(|d| d.uid == c.uid))
        .cloned()
        .collect()
}

/// Sorts a group's claims: another cluster's (same name, other uid) do not count; a claim
/// counts while a live pod holds its slot or while its pod may still be on its way.
pub(crate) fn judge(
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
        if held.contains(&claim.slot) {
            judged.taken.insert(claim.slot);
        } else if claim.age < in_flight {
            judged.taken.insert(claim.slot);
            judged.unheld.push(claim.clone());
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
    fn claims_waiting_for_pods_are_known_as_such() {
        let claims = [
            claim(0, 0, "c1", 1),
            claim(0, 1, "c1", 1),
            claim(3, 0, "c1", 1),
        ];
        let judged = judge(&claims, "c1", &slots(&[(0, 0)]), IN_FLIGHT);
        let unheld: Vec<Slot> = judged.unheld.iter().map(|c| c.slot).collect();
        assert_eq!(
            unheld,
            slots(&[(0, 1), (3, 0)]).into_iter().collect::<Vec<_>>()
        );
        // Only those inside the replicas KubeRay makes hold up a pod that would overflow.
        let shape = WorkerGroup {
            hosts: 2,
            replicas: 2,
        };
        let doubted = inside(&judged.unheld, shape);
        assert_eq!(doubted.len(), 1);
        assert_eq!(
            doubted[0].slot,
            Slot {
                replica: 0,
                host: 1
            }
        );
        // A doubt is resolved once its claim is held (or gone), whatever else is in flight.
        assert_eq!(still_unheld(&doubted, &judged.unheld), doubted);
        let later = [claim(0, 2, "c1", 0)];
        assert!(still_unheld(&doubted, &later).is_empty());
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
            crate::domain::indices::next_slot(&judged.taken, 2),
            Slot {
                replica: 1,
                host: 0
            }
        );
        assert_eq!(judged.stale.len(), 1);
    }
}
