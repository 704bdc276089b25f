//! What this replica knows of a group's claims between lists, and the blocks it holds.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::block::OpenBlock;
use crate::domain::indices::Slot;
use crate::domain::indices::claims::{Claim, Judged};

/// What this replica knows of a group's claims: the slots taken at its last list, plus
/// those it found or made taken since. Trusted for a moment, so a burst of one group's
/// pods costs a create each rather than a list and a create; a slot released meanwhile
/// is at worst passed over (uniqueness never rests on it: the create does).
#[derive(Default)]
pub(crate) struct KnownClaims {
    pub(super) taken: BTreeSet<Slot>,
    /// Replicas with a block claim.
    pub(super) blocks: BTreeSet<u32>,
    /// Claims of the last list still waiting for their pods.
    pub(super) unheld: Vec<Claim>,
    pub(super) listed: Option<Instant>,
    /// The blocks this replica hands out hosts from, lowest replica first.
    pub(super) open: Vec<OpenBlock>,
    /// Blocks this replica is making (their creates in flight), and pods waiting for
    /// their hosts: a burst's pods wait for the blocks on their way rather than each
    /// making one, or overflowing the group while creates are in flight.
    /// (replica -> its hosts)
    pub(super) making: std::collections::BTreeMap<u32, u32>,
    waiting: Arc<AtomicU32>,
    pub(super) made: Arc<tokio::sync::Notify>,
}

/// A pod waiting for blocks on their way, counted while this lives.
pub(super) struct Waiting(Arc<AtomicU32>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How long a list of claims is trusted.
const CLAIMS_KNOWN_FOR: Duration = Duration::from_secs(1);

impl KnownClaims {
    pub(super) fn fresh(&self) -> bool {
        self.listed.is_some_and(|t| t.elapsed() < CLAIMS_KNOWN_FOR)
    }

    /// The group's claims as just listed (a block of ours still being made may be
    /// missing: its create settles who has it).
    pub(super) fn update(&mut self, judged: Judged, at: Instant) {
        self.taken = judged.taken;
        self.blocks = judged.blocks;
        self.unheld = judged.unheld;
        self.listed = Some(at);
        // Ours while we may hand out from them, and those on their way, whatever the
        // list said. One we may not hand out from any more is as the list says (sealed
        // by us or taken over, or all its hosts taken until we seal it).
        let now = tokio::time::Instant::now();
        let ours = self
            .open
            .iter()
            .filter(|b| b.usable(now))
            .map(|b| (b.replica, b.hosts));
        for (replica, hosts) in ours.chain(self.making.iter().map(|(r, h)| (*r, *h))) {
            self.blocks.insert(replica);
            self.taken
                .extend((0..hosts).map(|host| Slot { replica, host }));
        }
    }

    /// Blocks on their way will have a host for one more pod (their makers each take
    /// the first).
    pub(super) fn worth_waiting(&self, hosts: u32) -> bool {
        let making = u32::try_from(self.making.len()).unwrap_or(u32::MAX);
        self.waiting.load(Ordering::Relaxed) < making.saturating_mul(hosts.saturating_sub(1))
    }

    /// Counts a pod waiting for the blocks on their way until the guard is dropped.
    pub(super) fn wait(&self) -> Waiting {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        Waiting(self.waiting.clone())
    }

    /// Blocks of ours on their way, or open (handing out hosts, or past that but not yet
    /// closed by their sealer): until they are made, and sealed with what they handed
    /// out, the group is not known to be full (their hosts may have gone to pods that
    /// never come). Whoever waits for them must not hold the group's lock: the sealer
    /// needs it.
    pub(super) fn blocks_unsettled(&self) -> bool {
        !self.making.is_empty() || !self.open.is_empty()
    }

    /// A host from the lowest open block that may still hand one out.
    pub(super) fn take_open(&mut self) -> Option<Slot> {
        let now = tokio::time::Instant::now();
        self.open.iter_mut().find_map(|b| b.take(now))
    }

    pub(super) fn add_open(&mut self, block: OpenBlock) {
        let at = self.open.partition_point(|b| b.replica < block.replica);
        self.open.insert(at, block);
    }

    /// Takes open block `name` out of use; the hosts it did not hand out are free (for
    /// our own per-host claims at once, for others once it is sealed).
    pub(super) fn close(&mut self, name: &str) -> Option<OpenBlock> {
        let at = self.open.iter().position(|b| b.name == name)?;
        let block = self.open.remove(at);
        for host in block.next..block.hosts {
            self.taken.remove(&Slot {
                replica: block.replica,
                host,
            });
        }
        Some(block)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn open(replica: u32, asked_ago: Duration) -> OpenBlock {
        let now = tokio::time::Instant::now();
        let asked = now.checked_sub(asked_ago).unwrap_or(now);
        OpenBlock::new(
            replica,
            2,
            format!("b-{replica}"),
            "1".into(),
            Duration::from_secs(1),
            (asked, now),
        )
    }

    fn replicas(taken: &BTreeSet<Slot>) -> BTreeSet<u32> {
        taken.iter().map(|s| s.replica).collect()
    }

    #[test]
    fn a_list_keeps_our_usable_blocks_and_those_on_their_way() {
        let mut known = KnownClaims {
            open: vec![open(1, Duration::ZERO), open(2, Duration::from_secs(5))],
            ..KnownClaims::default()
        };
        known.making.insert(3, 2);
        known.update(Judged::default(), Instant::now());
        // Block 2 may hand out no more: what the list says of it stands (a takeover
        // must free its hosts even before our sealer closes it).
        assert_eq!(replicas(&known.taken), BTreeSet::from([1, 3]));
        assert_eq!(known.blocks, BTreeSet::from([1, 3]));
        assert!(known.worth_waiting(2));
        let waiter = known.wait();
        assert!(
            !known.worth_waiting(2),
            "one block on its way has one spare host"
        );
        drop(waiter);
        assert!(known.worth_waiting(2), "a waiter gone, dropped or not");
    }

    #[test]
    fn blocks_on_their_way_or_open_leave_the_group_unsettled() {
        let mut known = KnownClaims::default();
        assert!(!known.blocks_unsettled());
        known.making.insert(3, 2);
        assert!(known.blocks_unsettled(), "a block on its way");
        known.making.clear();
        known.open = vec![open(1, Duration::ZERO)];
        assert!(known.blocks_unsettled(), "a block still handing out");
        known.open = vec![open(1, Duration::from_secs(5))];
        assert!(
            known.blocks_unsettled(),
            "a block past its window, not yet closed by its sealer"
        );
        known.close("b-1");
        assert!(!known.blocks_unsettled(), "a block closed");
    }

    #[test]
    fn closing_a_block_frees_the_hosts_it_did_not_hand_out() {
        let mut known = KnownClaims {
            open: vec![open(0, Duration::ZERO)],
            ..KnownClaims::default()
        };
        known.update(Judged::default(), Instant::now());
        assert_eq!(
            known.take_open(),
            Some(Slot {
                replica: 0,
                host: 0
            })
        );
        let closed = known.close("b-0").expect("open");
        assert_eq!(closed.next, 1);
        assert_eq!(
            known.taken.iter().copied().collect::<Vec<_>>(),
            [Slot {
                replica: 0,
                host: 0
            }]
        );
        assert!(known.take_open().is_none());
    }
}
