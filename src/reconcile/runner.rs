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

use crate::cause::Cause;
use crate::metrics::{KindLabel, Metrics};
use crate::world::background::Key;

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
            }
        }
    })
}

/// A resync interval that does not burst after a slow look.
fn resync_every(period: Duration) -> tokio::time::Interval {
    let mut resync = tokio::time::interval(period);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    resync
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
mod tests;
