//! One loop for the keyed reconcilers, in kube-runtime's `Controller` shape on rayshare's
//! own caches: keys come from the caches' wake-ups and, on each resync, from every key
//! the reconciler names; several keys are looked at at once, each by one `reconcile`; a
//! key whose look failed is retried with its own backoff (1 s doubling to 5 min) rather
//! than at the next resync; every look runs in a span, every pass is counted.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::Instrument;

use super::{Key, resync_every};
use crate::cause::Cause;
use crate::metrics::{KindLabel, Metrics};

/// Longest wait before a failed key is looked at again.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// A reconciler of keyed objects (namespace, name).
pub trait Reconciler: Send + Sync + 'static {
    /// As named in `rayshare_reconcile_passes{kind}`, in logs and spans.
    fn kind(&self) -> &'static str;

    /// Every key a resync looks at.
    fn all(&self) -> Vec<Key>;

    /// Brings what rayshare made for `key` to where it should be; an error is retried
    /// with backoff.
    fn reconcile(&self, key: &Key) -> impl Future<Output = Result<(), Failure>> + Send;

    /// After each pass (the provisioners also count `rayshare_provision_passes`).
    fn passed(&self, _metrics: &Metrics) {}
}

/// A look that failed: its cause (for `rayshare_errors_total`) and the error.
#[derive(Debug)]
pub struct Failure {
    pub cause: Cause,
    pub error: Box<dyn std::error::Error + Send + Sync>,
}

/// When and how a reconciler runs.
pub struct Schedule {
    pub resync: Duration,
    /// Keys looked at at once.
    pub concurrency: usize,
    /// Passes only while this says the replica leads (`None`: on every replica); a new
    /// leader looks at every key at once.
    pub leading: Option<watch::Receiver<bool>>,
    /// Longest wait before a failed key is looked at again (at most [`MAX_BACKOFF`]).
    pub max_backoff: Duration,
}

impl Schedule {
    /// On every replica, `concurrency` keys at once (the provisioners).
    pub fn every_replica(resync: Duration, concurrency: usize, max_backoff: Duration) -> Self {
        Self {
            resync,
            concurrency,
            leading: None,
            max_backoff,
        }
    }

    /// While this replica leads, one key at a time.
    pub fn while_leading(resync: Duration, leading: watch::Receiver<bool>) -> Self {
        Self {
            resync,
            concurrency: 1,
            leading: Some(leading),
            max_backoff: MAX_BACKOFF,
        }
    }
}

/// Runs `reconciler` on its own task. A woken key starts as soon as fewer than
/// `concurrency` looks are under way, whatever else is running: waiting for a whole
/// batch to end held a new config's cluster behind another's create. A key is never
/// looked at twice at once; woken during its look, it is looked at again after it.
pub fn spawn<R: Reconciler>(
    reconciler: Arc<R>,
    schedule: Schedule,
    mut wakeups: Option<UnboundedReceiver<Key>>,
    metrics: Arc<Metrics>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Schedule {
            resync,
            concurrency,
            mut leading,
            max_backoff,
        } = schedule;
        let mut resync = resync_every(resync);
        let mut backoff = Backoff::up_to(max_backoff);
        let mut queued: BTreeSet<Key> = BTreeSet::new();
        // Keys under way, and those woken meanwhile (looked at again once done).
        let mut running: BTreeSet<Key> = BTreeSet::new();
        let mut again: BTreeSet<Key> = BTreeSet::new();
        let mut looks = FuturesUnordered::new();
        let mut looked_since_pass = false;
        loop {
            let leads = leading.as_ref().is_none_or(|l| *l.borrow());
            if !leads {
                queued.clear();
                again.clear();
            }
            while looks.len() < concurrency.max(1) {
                let Some(key) = queued.pop_first() else { break };
                if backoff.waiting(&key) {
                    continue;
                }
                running.insert(key.clone());
                let reconciler = &reconciler;
                let span = tracing::info_span!("reconcile", kind = reconciler.kind(), namespace = %key.0, name = %key.1);
                looks.push(
                    async move {
                        let result = reconciler.reconcile(&key).await;
                        (key, result)
                    }
                    .instrument(span),
                );
            }
            let retry_at = backoff.next_due();
            let woken: BTreeSet<Key> = tokio::select! {
                Some((key, result)) = looks.next(), if !looks.is_empty() => {
                    running.remove(&key);
                    looked_since_pass = true;
                    match result {
                        Ok(()) => backoff.clear(&key),
                        Err(failure) => {
                            let wait = backoff.failed(&key);
                            tracing::warn!(kind = reconciler.kind(), namespace = %key.0, name = %key.1, error = %failure.error, retry_in = ?wait, "reconcile failed");
                            metrics.error(failure.cause);
                        }
                    }
                    again.take(&key).into_iter().collect()
                }
                keys = next_keys(&mut wakeups, &mut resync, || reconciler.all()) => {
                    let Some(keys) = keys else { return };
                    // A resync with nothing to look at is a pass too: an idle reconciler
                    // is not a stalled one (RayshareReconcilerStalled).
                    looked_since_pass |= keys.is_empty() && leads;
                    keys
                }
                _ = tokio::time::sleep_until(retry_at.unwrap_or_else(Instant::now)), if retry_at.is_some() => {
                    backoff.due()
                }
                changed = became_leader(&mut leading) => {
                    if changed.is_err() { return }
                    let keys: BTreeSet<Key> = reconciler.all().into_iter().collect();
                    looked_since_pass |= keys.is_empty();
                    keys
                }
            };
            for key in woken {
                if running.contains(&key) {
                    again.insert(key);
                } else {
                    queued.insert(key);
                }
            }
            // A pass: every key woken so far has been looked at.
            if looked_since_pass && looks.is_empty() && queued.is_empty() {
                looked_since_pass = false;
                metrics
                    .reconcile_passes
                    .get_or_create(&KindLabel {
                        kind: reconciler.kind(),
                    })
                    .inc();
                reconciler.passed(&metrics);
            }
        }
    })
}

/// What to look at next: the keys woken since the last look (a burst of events wakes a
/// key once), or on each `resync` tick every key `all` names (a create that failed, a
/// missed event). `None` once the wake-ups are gone.
async fn next_keys(
    wakeups: &mut Option<UnboundedReceiver<Key>>,
    resync: &mut tokio::time::Interval,
    all: impl FnOnce() -> Vec<Key>,
) -> Option<BTreeSet<Key>> {
    let mut keys = BTreeSet::new();
    let woken = async {
        match wakeups.as_mut() {
            Some(w) => w.recv().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        key = woken => { keys.insert(key?); }
        _ = resync.tick() => keys.extend(all()),
    }
    while let Some(k) = wakeups.as_mut().and_then(|w| w.try_recv().ok()) {
        keys.insert(k);
    }
    Some(keys)
}

/// A pass over everything of a kind, with no keys of its own (the leader's sweeps of
/// orphaned PodGroups and claims, idle clusters): one key, its kind.
pub struct Sweep<F> {
    pub kind: &'static str,
    pub pass: F,
}

impl<F, Fut> Reconciler for Sweep<F>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), kube::Error>> + Send,
{
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn all(&self) -> Vec<Key> {
        vec![(String::new(), self.kind.to_string())]
    }

    async fn reconcile(&self, _: &Key) -> Result<(), Failure> {
        (self.pass)().await.map_err(|e| Failure {
            cause: Cause::ReconcileList,
            error: Box::new(e),
        })
    }
}

/// Resolves when `leading` turns true (never without a receiver); `Err` once it is gone.
async fn became_leader(leading: &mut Option<watch::Receiver<bool>>) -> Result<(), ()> {
    let Some(leading) = leading else {
        return std::future::pending().await;
    };
    loop {
        leading.changed().await.map_err(|_| ())?;
        if *leading.borrow() {
            return Ok(());
        }
    }
}

/// Per key: failures in a row and, while a retry is pending, when it is due (1 s, 2 s,
/// 4 s, ... up to the cap).
struct Backoff {
    keys: HashMap<Key, (u32, Option<Instant>)>,
    cap: Duration,
}

impl Backoff {
    fn up_to(cap: Duration) -> Self {
        Self {
            keys: HashMap::new(),
            cap: cap.min(MAX_BACKOFF),
        }
    }

    fn waiting(&self, key: &Key) -> bool {
        self.keys
            .get(key)
            .and_then(|(_, at)| *at)
            .is_some_and(|at| Instant::now() < at)
    }

    fn failed(&mut self, key: &Key) -> Duration {
        let entry = self.keys.entry(key.clone()).or_insert((0, None));
        let wait = Duration::from_secs(1u64 << entry.0.min(9)).min(self.cap);
        *entry = (entry.0 + 1, Some(Instant::now() + wait));
        wait
    }

    fn clear(&mut self, key: &Key) {
        self.keys.remove(key);
    }

    /// The earliest pending retry.
    fn next_due(&self) -> Option<Instant> {
        self.keys.values().filter_map(|(_, at)| *at).min()
    }

    /// The keys whose retry is due, taken (their failure count stays).
    fn due(&mut self) -> BTreeSet<Key> {
        let now = Instant::now();
        let mut due = BTreeSet::new();
        for (key, (_, at)) in &mut self.keys {
            if at.is_some_and(|at| at <= now) {
                *at = None;
                due.insert(key.clone());
            }
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn key(name: &str) -> Key {
        ("ns".to_string(), name.to_string())
    }

    #[test]
    fn backoff_doubles_up_to_five_minutes_and_clears() {
        let mut b = Backoff::up_to(Duration::from_secs(3600));
        let waits: Vec<u64> = (0..12).map(|_| b.failed(&key("c")).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert!(b.waiting(&key("c")));
        b.clear(&key("c"));
        assert!(!b.waiting(&key("c")));
        assert_eq!(b.next_due(), None);
    }

    #[test]
    fn backoff_stops_at_its_cap() {
        let mut b = Backoff::up_to(Duration::from_secs(10));
        let waits: Vec<u64> = (0..6).map(|_| b.failed(&key("c")).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 10, 10]);
    }

    /// Fails `a` twice, then succeeds; `b` always succeeds.
    #[derive(Default)]
    struct Flaky {
        looks: Mutex<Vec<String>>,
    }

    impl Reconciler for Flaky {
        fn kind(&self) -> &'static str {
            "Test"
        }

        fn all(&self) -> Vec<Key> {
            vec![key("a"), key("b")]
        }

        async fn reconcile(&self, key: &Key) -> Result<(), Failure> {
            let mut looks = self.looks.lock().unwrap();
            looks.push(key.1.clone());
            let failures = looks.iter().filter(|k| *k == "a").count();
            if key.1 == "a" && failures <= 2 {
                return Err(Failure {
                    cause: Cause::ReconcileList,
                    error: "not yet".into(),
                });
            }
            Ok(())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_key_is_retried_on_its_own_backoff_not_at_the_resync() {
        let flaky = Arc::new(Flaky::default());
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let metrics = Arc::new(Metrics::default());
        let schedule = Schedule::every_replica(Duration::from_secs(3600), 4, MAX_BACKOFF);
        let task = spawn(flaky.clone(), schedule, Some(rx), metrics.clone());
        // The first resync tick looks at every key; then only `a`, at 1 s and 2 s later.
        tokio::time::sleep(Duration::from_secs(10)).await;
        let looks = flaky.looks.lock().unwrap().clone();
        assert_eq!(looks.iter().filter(|k| *k == "a").count(), 3, "{looks:?}");
        assert_eq!(looks.iter().filter(|k| *k == "b").count(), 1, "{looks:?}");
        // A wake-up looks at once.
        tx.send(key("b")).unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(flaky.looks.lock().unwrap().len(), 5);
        let text = metrics.encode();
        assert!(
            text.contains("rayshare_errors_total{cause=\"reconcile_list\"} 2"),
            "{text}"
        );
        task.abort();
    }

    /// `slow` takes a minute to look at; every look is recorded when it starts and ends.
    #[derive(Default)]
    struct Slow {
        looks: Mutex<Vec<String>>,
    }

    impl Reconciler for Slow {
        fn kind(&self) -> &'static str {
            "Test"
        }

        fn all(&self) -> Vec<Key> {
            vec![]
        }

        async fn reconcile(&self, key: &Key) -> Result<(), Failure> {
            self.looks.lock().unwrap().push(format!("{} start", key.1));
            if key.1 == "slow" {
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
            self.looks.lock().unwrap().push(format!("{} end", key.1));
            Ok(())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_woken_key_starts_at_once_beside_a_slow_one_and_never_twice_at_once() {
        let slow = Arc::new(Slow::default());
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let schedule = Schedule::every_replica(Duration::from_secs(3600), 4, MAX_BACKOFF);
        let task = spawn(
            slow.clone(),
            schedule,
            Some(rx),
            Arc::new(Metrics::default()),
        );
        tx.send(key("slow")).unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        tx.send(key("fast")).unwrap();
        tx.send(key("slow")).unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        let seen = slow.looks.lock().unwrap().clone();
        assert_eq!(seen, ["slow start", "fast start", "fast end"]);
        // Woken during its look: looked at once more, after it.
        tokio::time::sleep(Duration::from_secs(61)).await;
        let seen = slow.looks.lock().unwrap().clone();
        assert_eq!(seen[3..], ["slow end", "slow start"]);
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_follower_looks_at_nothing_until_it_leads() {
        let flaky = Arc::new(Flaky::default());
        let (_tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (lead, leading) = watch::channel(false);
        let schedule = Schedule::while_leading(Duration::from_secs(1), leading);
        let task = spawn(
            flaky.clone(),
            schedule,
            Some(rx),
            Arc::new(Metrics::default()),
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(flaky.looks.lock().unwrap().is_empty());
        lead.send(true).unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(flaky.looks.lock().unwrap().contains(&"b".to_string()));
        task.abort();
    }

    /// Nothing to look at (`Slow` names no keys): each resync is a pass, on a follower none.
    #[tokio::test(start_paused = true)]
    async fn an_idle_reconciler_counts_its_passes_and_an_idle_follower_none() {
        let passes = |m: &Metrics| {
            m.reconcile_passes
                .get_or_create(&KindLabel { kind: "Test" })
                .get()
        };
        let every = Duration::from_secs(10);
        let (idle, follower) = (Arc::new(Metrics::default()), Arc::new(Metrics::default()));
        let (lead, leading) = watch::channel(false);
        let schedule = Schedule::every_replica(every, 1, MAX_BACKOFF);
        let a = spawn(Arc::new(Slow::default()), schedule, None, idle.clone());
        let schedule = Schedule::while_leading(every, leading);
        let b = spawn(Arc::new(Slow::default()), schedule, None, follower.clone());
        tokio::time::sleep(Duration::from_secs(35)).await;
        assert_eq!((passes(&idle), passes(&follower)), (4, 0));
        lead.send(true).unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(passes(&follower), 1);
        a.abort();
        b.abort();
    }
}
