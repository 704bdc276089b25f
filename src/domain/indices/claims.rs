//! What a group's claims mean for the next one (pure: the claim loop's decisions, which
//! `world/kube/claims/` carries out; a claim is read from its Lease there, `read.rs`).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::domain::cluster::WorkerGroup;
use crate::domain::indices::{MAX_HOSTS, Slot};

/// What a block claim (a whole replica, see `block.rs`) says beyond its replica.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Span {
    pub hosts: u32,
    /// Set once its maker stopped handing out hosts: it handed out `0..assigned`.
    pub assigned: Option<u32>,
}

/// One claim Lease, as the claim logic reads it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Claim {
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    pub slot: Slot,
    /// The RayCluster that owns it (its uid).
    pub owner: Option<String>,
    /// The least it can be: its stamp is whole seconds.
    pub age: Duration,
    /// A block claim's hosts; `None` for a claim of one slot.
    pub span: Option<Span>,
}

impl Claim {
    /// A block of a group spans at most the group's hosts per replica: anyone may write
    /// a Lease in the namespace, and each host of a span is a slot to track on every list.
    pub(crate) fn within(mut self, hosts: u32) -> Self {
        if let Some(span) = self.span.as_mut() {
            span.hosts = span.hosts.min(hosts);
        }
        self
    }
}

/// What a group's claims mean for the next claim.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Judged {
    pub taken: BTreeSet<Slot>,
    /// Claims no pod holds yet, inside the in-flight window.
    pub unheld: Vec<Claim>,
    /// Claims no pod holds, past the in-flight window: to delete (never a block: it is
    /// what keeps its replica's per-host claims apart from its maker's).
    pub stale: Vec<Claim>,
    /// Replicas that have a block claim: their free hosts go to per-host claims.
    pub blocks: BTreeSet<u32>,
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
/// counts while a live pod holds its slot or while its pod may still be on its way. A
/// block counts for the hosts live pods hold and, in flight, for the hosts its maker may
/// have handed out (all of them until it says how many).
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
        if let Some(span) = claim.span {
            judge_block(claim, span, held, in_flight, &mut judged);
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

fn judge_block(
    claim: &Claim,
    span: Span,
    held: &BTreeSet<Slot>,
    in_flight: Duration,
    judged: &mut Judged,
) {
    let replica = claim.slot.replica;
    judged.blocks.insert(replica);
    let first = Slot { replica, host: 0 };
    let last = Slot {
        replica,
        host: u32::MAX,
    };
    judged.taken.extend(held.range(first..=last));
    if claim.age >= in_flight {
        return;
    }
    let handed_out = span
        .assigned
        .unwrap_or(span.hosts)
        .min(span.hosts)
        .min(MAX_HOSTS);
    let mut waiting = false;
    for host in 0..handed_out {
        let slot = Slot { replica, host };
        waiting |= !held.contains(&slot);
        judged.taken.insert(slot);
    }
    if waiting {
        judged.unheld.push(claim.clone());
    }
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
            span: None,
        }
    }

    fn block(replica: u32, hosts: u32, assigned: Option<u32>, age_s: u64) -> Claim {
        Claim {
            span: Some(Span { hosts, assigned }),
            name: format!("b-{replica}"),
            uid: format!("b-{replica}"),
            ..claim(replica, 0, "c1", age_s)
        }
    }

    #[rstest]
    // Its maker may still hand out any host.
    #[case::open(block(2, 4, None, 1), &[(2, 0)], &[(2, 0), (2, 1), (2, 2), (2, 3)], true)]
    #[case::open_and_full(block(2, 2, None, 1), &[(2, 0), (2, 1)], &[(2, 0), (2, 1)], false)]
    // Its maker stopped after two hosts: the others are free for per-host claims.
    #[case::sealed(block(2, 4, Some(2), 1), &[(2, 0)], &[(2, 0), (2, 1)], true)]
    #[case::sealed_and_held(block(2, 4, Some(2), 1), &[(2, 0), (2, 1)], &[(2, 0), (2, 1)], false)]
    // Taken over: only what live pods hold.
    #[case::taken_over(block(2, 4, Some(0), 1), &[(2, 3)], &[(2, 3)], false)]
    // Past the in-flight window: only what live pods hold.
    #[case::old(block(2, 4, None, 300), &[(2, 1)], &[(2, 1)], false)]
    #[case::old_and_empty(block(2, 4, None, 300), &[], &[], false)]
    fn blocks_are_judged(
        #[case] b: Claim,
        #[case] held: &[(u32, u32)],
        #[case] taken: &[(u32, u32)],
        #[case] waiting: bool,
    ) {
        let replica = b.slot.replica;
        let judged = judge(&[b], "c1", &slots(held), IN_FLIGHT);
        assert_eq!(judged.taken, slots(taken));
        assert_eq!(!judged.unheld.is_empty(), waiting);
        assert!(judged.stale.is_empty(), "a block is never released");
        assert_eq!(judged.blocks, BTreeSet::from([replica]));
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
    fn a_forged_block_is_bounded() {
        let judged = judge(&[block(0, u32::MAX, None, 1)], "c1", &slots(&[]), IN_FLIGHT);
        assert_eq!(judged.taken.len(), MAX_HOSTS as usize);
        // And by its group's hosts per replica, once read for that group.
        let forged = block(0, u32::MAX, None, 1).within(4);
        let judged = judge(&[forged], "c1", &slots(&[]), IN_FLIGHT);
        assert_eq!(judged.taken.len(), 4);
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
