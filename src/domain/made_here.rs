//! Objects this replica made through the API server, noted (with their resourceVersion)
//! for the next create of the same object (pure; time is passed in).
//!
//! A PodGroup made at admission is created again by the provisioner once the pod is
//! stored; through the API server that is a create refused `AlreadyExists` (through
//! Volcano's PodGroup webhook and rayshare's own-objects policy), then a read. In a
//! burst the refused creates, one per pod beside admission's own, are load on the API
//! server that admission's creates wait behind. The provisioner's create finds the
//! group noted here instead, once, within `grace`, and only reads it (it may have gone
//! meanwhile: then it is made again); past the grace, or after a restart, it asks the API
//! server as before.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::Value;

#[derive(Debug)]
pub struct MadeHere {
    grace: Duration,
    cap: usize,
    /// (namespace, name) -> when it was made, and what was noted of it.
    made: HashMap<(String, String), (Instant, Value)>,
    /// Made in time order, for expiry and the cap; an entry taken earlier is skipped.
    order: VecDeque<(Instant, String, String)>,
}

impl MadeHere {
    pub fn new(grace: Duration, cap: usize) -> Self {
        Self {
            grace,
            cap,
            made: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Notes `object`, made now; the oldest goes when the cap is reached.
    pub fn put(&mut self, namespace: &str, name: &str, object: Value, now: Instant) {
        self.expire(now);
        while self.made.len() >= self.cap {
            let Some((at, ns, n)) = self.order.pop_front() else {
                break;
            };
            self.forget(at, ns, n);
        }
        let key = (namespace.to_string(), name.to_string());
        self.order.push_back((now, key.0.clone(), key.1.clone()));
        self.made.insert(key, (now, object));
    }

    /// Notes that this replica's admission is about to make the object (its create may
    /// yet fail or go unanswered): the provisioner leaves the pod's group to whichever
    /// replica admitted it (`holds`). An entry made already is kept.
    pub fn intend(&mut self, namespace: &str, name: &str, now: Instant) {
        let key = (namespace.to_string(), name.to_string());
        if !self.made.contains_key(&key) {
            self.put(namespace, name, Value::Null, now);
        }
    }

    /// Whether this replica made (or set out to make) the object within the grace.
    pub fn holds(&mut self, namespace: &str, name: &str, now: Instant) -> bool {
        self.expire(now);
        self.made
            .contains_key(&(namespace.to_string(), name.to_string()))
    }

    /// The object made here under that name within the grace, once (`Null`: set out to
    /// make, not known made).
    pub fn take(&mut self, namespace: &str, name: &str, now: Instant) -> Option<Value> {
        self.expire(now);
        let key = (namespace.to_string(), name.to_string());
        self.made.remove(&key).map(|(_, object)| object)
    }

    pub fn len(&self) -> usize {
        self.made.len()
    }

    pub fn is_empty(&self) -> bool {
        self.made.is_empty()
    }

    fn expire(&mut self, now: Instant) {
        while let Some((at, _, _)) = self.order.front() {
            if now.saturating_duration_since(*at) < self.grace {
                break;
            }
            let (at, ns, n) = self.order.pop_front().expect("looked at");
            self.forget(at, ns, n);
        }
    }

    /// Drops the entry noted at `at`, unless it was taken and put again since.
    fn forget(&mut self, at: Instant, namespace: String, name: String) {
        let key = (namespace, name);
        if self.made.get(&key).is_some_and(|(made, _)| *made == at) {
            self.made.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const GRACE: Duration = Duration::from_secs(10);

    #[test]
    fn found_once_within_the_grace() {
        let t0 = Instant::now();
        let mut made = MadeHere::new(GRACE, 8);
        made.put("ns", "a", json!({"rv": "1"}), t0);
        assert_eq!(made.take("ns", "b", t0), None);
        assert_eq!(made.take("other", "a", t0), None);
        let later = t0 + Duration::from_secs(1);
        assert_eq!(made.take("ns", "a", later), Some(json!({"rv": "1"})));
        assert_eq!(made.take("ns", "a", later), None);
        assert!(made.is_empty());
    }

    /// `first` made (as 1) at the returned time, `second` (as 2) `apart` seconds later.
    fn two_made(first: &str, second: &str, apart: u64) -> (Instant, MadeHere) {
        let t0 = Instant::now();
        let mut made = MadeHere::new(GRACE, 8);
        made.put("ns", first, json!(1), t0);
        made.put("ns", second, json!(2), t0 + Duration::from_secs(apart));
        (t0, made)
    }

    #[test]
    fn an_intent_is_held_and_taken_as_nothing_made() {
        let t0 = Instant::now();
        let mut made = MadeHere::new(GRACE, 8);
        made.intend("ns", "a", t0);
        assert!(made.holds("ns", "a", t0));
        assert!(!made.holds("ns", "b", t0));
        // Made after all: what was made replaces the intent; an intent never replaces it.
        made.put("ns", "a", json!(1), t0);
        made.intend("ns", "a", t0);
        assert_eq!(made.take("ns", "a", t0), Some(json!(1)));
        made.intend("ns", "c", t0);
        assert_eq!(made.take("ns", "c", t0), Some(Value::Null));
        made.intend("ns", "d", t0);
        assert!(!made.holds("ns", "d", t0 + GRACE), "gone after the grace");
    }

    #[test]
    fn gone_after_the_grace() {
        let (t0, mut made) = two_made("a", "b", 5);
        assert_eq!(made.take("ns", "a", t0 + GRACE), None);
        assert_eq!(made.len(), 1);
        assert_eq!(made.take("ns", "b", t0 + GRACE), Some(json!(2)));
    }

    #[test]
    fn the_oldest_goes_at_the_cap() {
        let t0 = Instant::now();
        let mut made = MadeHere::new(GRACE, 2);
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            made.put("ns", name, json!(i), t0 + Duration::from_millis(i as u64));
        }
        assert_eq!(made.len(), 2);
        assert_eq!(made.take("ns", "a", t0), None);
        assert_eq!(made.take("ns", "c", t0), Some(json!(2)));
    }

    #[test]
    fn made_again_counts_from_the_new_time() {
        let (t0, mut made) = two_made("a", "a", 8);
        // The first noting's expiry leaves the second in place.
        let at = t0 + GRACE + Duration::from_secs(1);
        assert_eq!(made.take("ns", "a", at), Some(json!(2)));
    }
}
