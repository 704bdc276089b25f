//! Which claim a pod makes next (pure): a slot, a block to open, or a gate.

use std::collections::BTreeSet;

use crate::domain::cluster::WorkerGroup;
use crate::domain::indices::Slot;

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

/// Blocks are made among this many untouched replicas at the claimer's end of the group,
/// one picked by `spread`: webhook replicas at one end opening blocks at once then rarely
/// race for the same one.
pub(crate) const SPREAD: usize = 4;

/// The end of a group a webhook replica opens its blocks from. Two replicas in one burst
/// open blocks from opposite ends and meet once, in the middle, instead of racing for
/// the same block all along (measured before: 0.2 lost creates per pod of a 256-pod
/// slice on two replicas). The leader (or a replica that knows of no election) takes the
/// low end, so a replica alone keeps a group compact; the others the high end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Low,
    High,
}

/// The next claim for a group's lowest free slot. `blocks_on`: the group has several
/// hosts per replica and an owner to take its block claims away with it. `spread`: any
/// number, different per request. A block is opened from `side`'s end (the high end
/// only when the group's count is known).
pub(crate) fn next_claim(
    taken: &BTreeSet<Slot>,
    blocks: &BTreeSet<u32>,
    shape: WorkerGroup,
    blocks_on: bool,
    (side, spread): (Side, usize),
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
    let below_tail = slot.replica..shape.replicas.saturating_sub(TAIL);
    let candidates: Vec<u32> = match side {
        Side::High if shape.replicas > 0 => below_tail
            .rev()
            .filter(|&r| untouched(r))
            .take(SPREAD)
            .collect(),
        _ => (slot.replica..)
            .take_while(|&r| !in_tail(r))
            .filter(|&r| untouched(r))
            .take(SPREAD)
            .collect(),
    };
    Next::Open(candidates[spread % candidates.len()])
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    const SHAPE: WorkerGroup = of(8);

    fn slots(list: &[(u32, u32)]) -> BTreeSet<Slot> {
        list.iter()
            .map(|&(replica, host)| Slot { replica, host })
            .collect()
    }

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
            next_claim(&slots(taken), &blocks, SHAPE, blocks_on, (Side::Low, 0)),
            next
        );
    }

    #[test]
    fn a_small_group_goes_host_by_host() {
        let small = of(MIN_BLOCK_REPLICAS - 1);
        let none = BTreeSet::new();
        assert_eq!(
            next_claim(&slots(&[]), &none, small, true, (Side::High, 0)),
            Next::Gate(0)
        );
        let gated = BTreeSet::from([0]);
        assert_eq!(
            next_claim(&slots(&[]), &gated, small, true, (Side::High, 0)),
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
            .map(|spread| next_claim(&taken, &blocks, SHAPE, true, (Side::Low, spread)))
            .collect();
        // Replica 1 has its block; the tail (6, 7) goes host by host.
        let open = |r| Next::Open(r);
        assert_eq!(picked, [open(0), open(2), open(3), open(4), open(0)]);
        // Near the tail fewer are left to spread over.
        let taken = slots(&slots_upto(5));
        let blocks: BTreeSet<u32> = (0..5).collect();
        assert_eq!(
            next_claim(&taken, &blocks, SHAPE, true, (Side::Low, 3)),
            Next::Open(5)
        );
    }

    fn slots_upto(replicas: u32) -> Vec<(u32, u32)> {
        (0..replicas)
            .flat_map(|r| (0..4).map(move |h| (r, h)))
            .collect()
    }

    /// A group of `replicas` replicas of 4 hosts.
    const fn of(replicas: u32) -> WorkerGroup {
        WorkerGroup { hosts: 4, replicas }
    }

    #[test]
    fn the_high_end_opens_from_below_the_tail_down() {
        let big = of(64);
        let none = BTreeSet::new();
        let high = |taken: &BTreeSet<Slot>, blocks: &BTreeSet<u32>, spread| {
            next_claim(taken, blocks, big, true, (Side::High, spread))
        };
        // 62 and 63 are the tail, claimed host by host.
        let picked: Vec<Next> = (0..5).map(|s| high(&slots(&[]), &none, s)).collect();
        let open = |r| Next::Open(r);
        assert_eq!(picked, [open(61), open(60), open(59), open(58), open(61)]);
        // The ends meet: the low end took 0..30, the high end 33..61.
        let low: Vec<u32> = (0..31).chain(33..62).collect();
        let blocks: BTreeSet<u32> = low.iter().copied().collect();
        let taken = low
            .iter()
            .flat_map(|&r| (0..4).map(move |h| (r, h)))
            .collect::<Vec<_>>();
        let taken = slots(&taken);
        assert_eq!(high(&taken, &blocks, 0), open(32));
        assert_eq!(high(&taken, &blocks, 1), open(31));
        let low_end = next_claim(&taken, &blocks, big, true, (Side::Low, 0));
        assert_eq!(low_end, open(31));
    }

    #[test]
    fn the_high_end_needs_the_groups_count() {
        let unknown = of(0);
        let none = BTreeSet::new();
        let next = next_claim(&slots(&[]), &none, unknown, true, (Side::High, 0));
        assert_eq!(next, Next::Open(0));
    }
}
