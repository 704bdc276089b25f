//! A config's recent pauses (pure): the last [`KEPT`] gaps between its episodes, each
//! remembered up to the rate's half-life.
//!
//! Why: the weighted rate reads silence as a falling rate, which is right for a config
//! that stopped and wrong for one that pauses. A config with a task every few minutes on
//! average also goes quiet for three or four times that now and then (arrivals at
//! random do), its rate decays below "due within the TTL" during such a spell, its member
//! is let go, and the task that ends the spell waits for a cold start: the tail of the
//! wait is made of exactly these tasks. Its own recent pauses say how long it has gone
//! quiet before and still come back.
//!
//! Why the longest of the last few: whatever the distribution of a config's pauses, the
//! next one is longer than all of the last `n` about once in `n + 1` (of `n + 1` pauses
//! drawn alike, any one is the longest as likely as any other). So keeping a member while
//! a config has been quiet for less than its longest recent pause misses about one pause
//! in [`KEPT`] + 1, with no distribution or tuning to trust.
//!
//! What bounds the cost: a pause counts at most the half-life (a longer silence is a stop:
//! the rate itself has halved by then), so a config that stops for good keeps its member
//! at most a half-life past its last task; and only a config whose rate said "due within
//! the TTL" at its last task is kept by its pauses, so one that comes twice a day (whose
//! pauses are hours: the time-of-day memory's case) is never kept by them.

use std::time::Duration;

/// Pauses remembered per config.
pub const KEPT: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Pauses {
    /// Seconds, a ring: `len` of them, the oldest at `next` once full.
    secs: [u32; KEPT],
    next: u8,
    len: u8,
}

impl Pauses {
    /// Remembers a pause of `gap_ms` (the oldest goes once [`KEPT`] are held).
    pub fn push(&mut self, gap_ms: i64) {
        let secs = u32::try_from(gap_ms.max(0) / 1000).unwrap_or(u32::MAX);
        self.secs[usize::from(self.next)] = secs;
        self.next = ((usize::from(self.next) + 1) % KEPT) as u8;
        self.len = (usize::from(self.len) + 1).min(KEPT) as u8;
    }

    /// The longest pause remembered (`None`: none yet).
    pub fn longest(&self) -> Option<Duration> {
        let held = &self.secs[..usize::from(self.len)];
        held.iter()
            .max()
            .map(|s| Duration::from_secs(u64::from(*s)))
    }

    /// Pauses remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        usize::from(self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_of_the_last_ones() {
        let mut p = Pauses::default();
        assert_eq!(p.longest(), None);
        p.push(90_000);
        p.push(30_500);
        assert_eq!(p.longest(), Some(Duration::from_secs(90)));
        assert_eq!(p.len(), 2);
        // KEPT more, all shorter: the 90 s one is forgotten.
        for _ in 0..KEPT {
            p.push(10_000);
        }
        assert_eq!(p.len(), KEPT);
        assert_eq!(p.longest(), Some(Duration::from_secs(10)));
    }

    #[test]
    fn odd_gaps_are_clamped() {
        let mut p = Pauses::default();
        p.push(-5);
        p.push(i64::MAX);
        assert_eq!(p.longest(), Some(Duration::from_secs(u64::from(u32::MAX))));
    }
}
