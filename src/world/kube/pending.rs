//! Jobs admitted to a shared cluster that the watch has not shown yet: counted for a
//! while, at a cost that does not grow with how many there are (every admission asks,
//! and a burst, or a flood of forged reviews, admits many).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// How long an admitted job counts before the watch shows it.
pub const PENDING_FOR: Duration = Duration::from_secs(30);

/// Most admissions remembered per cluster; beyond this the oldest are forgotten early.
const MAX_PENDING: usize = 4096;

#[derive(Debug, Default)]
pub struct Pending {
    /// Named jobs, by when their latest admission was.
    named: HashMap<String, Instant>,
    /// Jobs with only a `generateName`: the watch's objects cannot be matched to them.
    unnamed: usize,
    /// Every admission, oldest first, to expire them in order.
    order: VecDeque<(Option<String>, Instant)>,
}

impl Pending {
    pub fn note(&mut self, job: &str, now: Instant) {
        let name = (!job.is_empty()).then(|| job.to_string());
        match &name {
            Some(name) => {
                self.named.insert(name.clone(), now);
            }
            None => self.unnamed += 1,
        }
        self.order.push_back((name, now));
        while self.order.len() > MAX_PENDING {
            self.forget_oldest();
        }
    }

    /// The watch shows `job`: it is counted there from now on.
    pub fn seen(&mut self, job: &str) {
        self.named.remove(job);
    }

    /// How many still count at `now`.
    pub fn count(&mut self, now: Instant) -> usize {
        while self
            .order
            .front()
            .is_some_and(|(_, at)| now.saturating_duration_since(*at) >= PENDING_FOR)
        {
            self.forget_oldest();
        }
        self.named.len() + self.unnamed
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Admissions remembered (what this costs in memory).
    pub fn len(&self) -> usize {
        self.order.len()
    }

    fn forget_oldest(&mut self) {
        match self.order.pop_front() {
            Some((None, _)) => self.unnamed = self.unnamed.saturating_sub(1),
            // Only if this was the name's latest admission and the watch has not shown it.
            Some((Some(name), at)) if self.named.get(&name) == Some(&at) => {
                self.named.remove(&name);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t0: Instant, secs: u64) -> Instant {
        t0 + Duration::from_secs(secs)
    }

    #[test]
    fn admissions_count_until_they_expire() {
        let (t0, mut p) = (Instant::now(), Pending::default());
        p.note("a", t0);
        p.note("", at(t0, 10));
        p.note("", at(t0, 10));
        assert_eq!(p.count(at(t0, 29)), 3);
        assert_eq!(p.count(at(t0, 30)), 2, "a expired");
        assert_eq!(p.count(at(t0, 40)), 0);
        assert!(p.is_empty());
    }

    #[test]
    fn a_name_counts_once_from_its_latest_admission() {
        let (t0, mut p) = (Instant::now(), Pending::default());
        p.note("a", t0);
        p.note("a", at(t0, 20));
        assert_eq!(p.count(at(t0, 1)), 1);
        assert_eq!(
            p.count(at(t0, 35)),
            1,
            "the first admission's expiry keeps the second"
        );
        assert_eq!(p.count(at(t0, 50)), 0);
    }

    #[test]
    fn a_job_the_watch_shows_no_longer_counts_here() {
        let (t0, mut p) = (Instant::now(), Pending::default());
        p.note("a", t0);
        p.note("b", t0);
        p.seen("a");
        assert_eq!(p.count(at(t0, 1)), 1);
        p.note("a", at(t0, 2));
        assert_eq!(p.count(at(t0, 3)), 2, "admitted again");
    }

    #[test]
    fn a_flood_is_bounded() {
        let (t0, mut p) = (Instant::now(), Pending::default());
        for i in 0..MAX_PENDING + 10 {
            p.note(&format!("forged-{i}"), t0);
        }
        assert_eq!(p.count(t0), MAX_PENDING);
        assert_eq!(p.order.len(), MAX_PENDING);
    }
}
