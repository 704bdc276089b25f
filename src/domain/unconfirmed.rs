//! PodGroups made at admission that no stored pod has taken up yet (pure; time is passed
//! in). A review is no proof that its pod will be stored, so what a flood of forged
//! reviews can leave behind is capped per namespace and in all. A group leaves the count
//! when the watch shows its pod stored, or after the grace the orphan sweep gives it.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Unconfirmed groups one namespace may hold; a real burst's pods are seen stored within
/// a watch delay, so far fewer than this are ever unconfirmed at once.
pub const PER_NAMESPACE: usize = 1024;
/// Unconfirmed groups in all namespaces together.
pub const IN_ALL: usize = 4096;

#[derive(Debug)]
pub struct Unconfirmed {
    per_namespace: usize,
    in_all: usize,
    grace: Duration,
    /// (namespace, group) -> when it was noted.
    noted: HashMap<(String, String), Instant>,
    per_ns: HashMap<String, usize>,
    /// Noted in time order, for expiry; an entry whose group left earlier is skipped.
    order: VecDeque<(Instant, String, String)>,
}

impl Unconfirmed {
    pub fn new(grace: Duration) -> Self {
        Self::with_caps(grace, PER_NAMESPACE, IN_ALL)
    }

    pub fn with_caps(grace: Duration, per_namespace: usize, in_all: usize) -> Self {
        Self {
            per_namespace,
            in_all,
            grace,
            noted: HashMap::new(),
            per_ns: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Counts a group about to be made; `false` (nothing counted) when a cap is reached.
    /// Noting a group already counted is a no-op that succeeds (a retried admission).
    pub fn try_note(&mut self, namespace: &str, group: &str, now: Instant) -> bool {
        self.expire(now);
        let key = (namespace.to_string(), group.to_string());
        if self.noted.contains_key(&key) {
            return true;
        }
        let in_ns = self.per_ns.get(namespace).copied().unwrap_or(0);
        if in_ns >= self.per_namespace || self.noted.len() >= self.in_all {
            return false;
        }
        *self.per_ns.entry(key.0.clone()).or_default() += 1;
        self.order.push_back((now, key.0.clone(), key.1.clone()));
        self.noted.insert(key, now);
        true
    }

    /// The group's pod was stored: it no longer counts.
    pub fn confirm(&mut self, namespace: &str, group: &str) {
        if self
            .noted
            .remove(&(namespace.to_string(), group.to_string()))
            .is_some()
        {
            self.leave(namespace);
        }
    }

    /// How many groups count now.
    pub fn len(&self) -> usize {
        self.noted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.noted.is_empty()
    }

    fn expire(&mut self, now: Instant) {
        while let Some((at, _, _)) = self.order.front() {
            if now.saturating_duration_since(*at) < self.grace {
                break;
            }
            let (at, ns, group) = self.order.pop_front().expect("front exists");
            let key = (ns, group);
            // Only the entry this noting made (a group confirmed and noted again is newer).
            if self.noted.get(&key) == Some(&at) {
                self.noted.remove(&key);
                self.leave(&key.0);
            }
        }
    }

    fn leave(&mut self, namespace: &str) {
        if let Some(n) = self.per_ns.get_mut(namespace) {
            *n -= 1;
            if *n == 0 {
                self.per_ns.remove(namespace);
            }
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
    fn caps_per_namespace_and_in_all() {
        let t0 = Instant::now();
        let mut u = Unconfirmed::with_caps(Duration::from_secs(30), 2, 3);
        assert!(u.try_note("a", "g1", t0));
        assert!(u.try_note("a", "g2", t0));
        assert!(!u.try_note("a", "g3", t0), "namespace cap");
        assert!(u.try_note("b", "g1", t0));
        assert!(!u.try_note("c", "g1", t0), "overall cap");
        assert_eq!(u.len(), 3);
    }

    #[test]
    fn a_retried_admission_counts_once() {
        let t0 = Instant::now();
        let mut u = Unconfirmed::with_caps(Duration::from_secs(30), 1, 10);
        assert!(u.try_note("a", "g", t0));
        assert!(u.try_note("a", "g", t0));
        assert_eq!(u.len(), 1);
    }

    #[test]
    fn a_stored_pod_frees_its_groups_place() {
        let t0 = Instant::now();
        let mut u = Unconfirmed::with_caps(Duration::from_secs(30), 1, 10);
        assert!(u.try_note("a", "g1", t0));
        u.confirm("a", "g1");
        u.confirm("a", "never-noted");
        assert!(u.try_note("a", "g2", t0));
        assert_eq!(u.len(), 1);
    }

    #[test]
    fn groups_expire_after_the_grace() {
        let t0 = Instant::now();
        let mut u = Unconfirmed::with_caps(Duration::from_secs(30), 1, 10);
        assert!(u.try_note("a", "g1", t0));
        assert!(!u.try_note("a", "g2", at(t0, 29)));
        assert!(u.try_note("a", "g2", at(t0, 30)));
        assert_eq!(u.len(), 1);
    }

    #[test]
    fn a_group_confirmed_and_noted_again_expires_from_its_new_time() {
        let t0 = Instant::now();
        let mut u = Unconfirmed::with_caps(Duration::from_secs(30), 5, 10);
        assert!(u.try_note("a", "g", t0));
        u.confirm("a", "g");
        assert!(u.try_note("a", "g", at(t0, 20)));
        // The first noting's expiry must not drop the second.
        assert!(u.try_note("a", "other", at(t0, 31)));
        assert_eq!(u.len(), 2);
        assert!(u.try_note("a", "x", at(t0, 50)));
        assert_eq!(
            u.len(),
            2,
            "g (noted at 20) expired at 50; other and x remain"
        );
    }
}
