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

/// Replicas at a group's end claimed host by host: when a burst is split over several
/// webhook replicas, each ends it with a block half handed out, and a pod of the last
/// replica would wait for a maker to seal one.
pub(crate) const TAIL: u32 = 2;

/// Groups with fewer replicas claim host by host (behind a gate per replica).
pub(crate) const MIN_BLOCK_REPLICAS: u32 = 8;

/// How the next claim is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// A claim of this one slot: its replica has a block (sealed, or past the in-flight
    /// window), or the group's claims are per host.
    Slot(Slot),
    /// A block for this untouched replica; its maker hands out the hosts.
    Open(u32),
    /// A block handing out nothing, made first so per-host claims in this replica never
    /// meet a block made later by someone who had not seen them.
    Gate(u32),
}

/// Blocks are made among this many of the lowest untouched replicas, one picked by
/// `spread`: webhook replicas opening blocks at once then rarely race for the same one.
pub(crate) const SPREAD: usize = 4;

/// The next claim for a group's lowest free slot. `blocks_on`: the group has several
/// hosts per replica and an owner to take its block claims away with it. `spread`: any
/// number, different per request.
pub(crate) fn next_claim(
    taken: &BTreeSet<Slot>,
    blocks: &BTreeSet<u32>,
    shape: WorkerGroup,
    blocks_on: bool,
    spread: usize,
) -> Next {
    let slot = crate::domain::indices::next_slot(taken, shape.hosts);
    if !blocks_on || blocks.contains(&slot.replica) {
        return Next::Slot(slot);
    }
    let untouched = |replica: u32| {
        !blocks.contains(&replica)
            && taken
                .range(
                    Slot { replica, host: 0 }..=Slot {
                        replica,
                        host: u32::MAX,
                    },
                )
                .next()
                .is_none()
    };
    // A small group goes host by host throughout: its few writes cost little, and a
    // refused pod's hand-outs in a block of a small group are what leave gaps.
    let in_tail = |replica: u32| {
        shape.replicas > 0
            && (shape.replicas < MIN_BLOCK_REPLICAS
                || replica.saturating_add(TAIL) >= shape.replicas)
    };
    if !untouched(slot.replica) || in_tail(slot.replica) {
        return Next::Gate(slot.replica);
    }
    let candidates: Vec<u32> = (slot.replica..)
        .take_while(|&r| !in_tail(r))
        .filter(|&r| untouched(r))
        .take(SPREAD)
        .collect();
    Next::Open(candidates[spread % candidates.len()])
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

    const SHAPE: WorkerGroup = WorkerGroup {
        hosts: 4,
        replicas: 8,
    };

    #[rstest]
    #[case::first(&[], &[], true, Next::Open(0))]
    #[case::next_replica(&[(0, 0), (0, 1), (0, 2), (0, 3)], &[0], true, Next::Open(1))]
    // A hole in a sealed block: per host.
    #[case::hole(&[(0, 0), (0, 1)], &[0], true, Next::Slot(Slot { replica: 0, host: 2 }))]
    // Slots taken without a block (pods of an older rayshare): gate first.
    #[case::touched(&[(0, 0)], &[], true, Next::Gate(0))]
    #[case::touched_later(&[(0, 3)], &[], true, Next::Gate(0))]
    // The group's last replicas go host by host.
    #[case::tail(&slots_upto(6), &(0..6).collect::<Vec<_>>(), true, Next::Gate(6))]
    #[case::off(&[], &[], false, Next::Slot(Slot { replica: 0, host: 0 }))]
    fn next_claims(
        #[case] taken: &[(u32, u32)],
        #[case] blocks: &[u32],
        #[case] blocks_on: bool,
        #[case] next: Next,
    ) {
        let blocks: BTreeSet<u32> = blocks.iter().copied().collect();
        assert_eq!(
            next_claim(&slots(taken), &blocks, SHAPE, blocks_on, 0),
            next
        );
    }

    #[test]
    fn a_small_group_goes_host_by_host() {
        let small = WorkerGroup {
            hosts: 4,
            replicas: MIN_BLOCK_REPLICAS - 1,
        };
        let none = BTreeSet::new();
        assert_eq!(
            next_claim(&slots(&[]), &none, small, true, 0),
            Next::Gate(0)
        );
        let gated = BTreeSet::from([0]);
        assert_eq!(
            next_claim(&slots(&[]), &gated, small, true, 0),
            Next::Slot(Slot {
                replica: 0,
                host: 0
            })
        );
    }

    #[test]
    fn blocks_spread_over_the_lowest_untouched_replicas() {
        let blocks = BTreeSet::from([1]);
        let taken = slots(&[(1, 0), (1, 1), (1, 2), (1, 3)]);
        let picked: Vec<Next> = (0..5)
            .map(|spread| next_claim(&taken, &blocks, SHAPE, true, spread))
            .collect();
        // Replica 1 has its block; the tail (6, 7) goes host by host.
        let open = |r| Next::Open(r);
        assert_eq!(picked, [open(0), open(2), open(3), open(4), open(0)]);
        // Near the tail fewer are left to spread over.
        let taken = slots(&slots_upto(5));
        let blocks: BTreeSet<u32> = (0..5).collect();
        assert_eq!(next_claim(&taken, &blocks, SHAPE, true, 3), Next::Open(5));
    }

    fn slots_upto(replicas: u32) -> Vec<(u32, u32)> {
        (0..replicas)
            .flat_map(|r| (0..4).map(move |h| (r, h)))
            .collect()
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
