//! What a controller is: a kind, a plan (how often, on which replicas), the watch events
//! that wake it (each mapped to the key it looks at), the keys a resync looks at, and a
//! body that looks at one key through its context. The runner drives it; the start
//! table (`start.rs`) starts every enabled one.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::runner::Failure;
use crate::cause::Cause;
use crate::config::Config;
use crate::metrics::{KindLabel, Metrics};
use crate::world::WorldError;
use crate::world::background::{Background, Key, Kind, Written};
use crate::world::watch::WatchEvent;

/// Where a controller runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Runs {
    /// On every replica, `concurrency` keys at once, a failed key retried after at most
    /// `max_backoff`.
    EveryReplica {
        concurrency: usize,
        max_backoff: Duration,
    },
    /// While this replica holds the lease, one key at a time.
    WhileLeading,
}

/// How a controller runs: every key is looked at again each `resync`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    pub resync: Duration,
    pub runs: Runs,
}

impl Plan {
    /// On every replica, if `on`: every key again each `resync`, `concurrency` keys at once,
    /// a failed key retried after at most `max_backoff`.
    pub fn every_replica(
        on: bool,
        resync: Duration,
        concurrency: usize,
        max_backoff: Duration,
    ) -> Option<Self> {
        on.then_some(Self {
            resync,
            runs: Runs::EveryReplica {
                concurrency,
                max_backoff,
            },
        })
    }

    /// While this replica leads, every `secs` seconds (at least one), if `on`.
    pub fn while_leading(on: bool, secs: u64) -> Option<Self> {
        on.then_some(Self {
            resync: Duration::from_secs(secs.max(1)),
            runs: Runs::WhileLeading,
        })
    }
}

/// What a controller's body sees: the world, the config, the metrics, and the memo the
/// runner keeps for it.
pub struct Cx<'a, W> {
    pub world: &'a W,
    pub config: &'a Config,
    pub metrics: &'a Metrics,
    pub memo: &'a Memo,
}

pub trait Controller<W: Background>: Sized + Send + Sync + 'static {
    /// As named in `rayshare_reconcile_passes{kind}` (alerts use it), logs and spans.
    const KIND: &'static str;

    /// How it runs with `config`; `None`: switched off.
    fn plan(config: &Config) -> Option<Plan>;

    /// The key a watch event wakes (none by default: resyncs only).
    fn trigger(_event: &WatchEvent) -> Option<Key> {
        None
    }

    fn new(config: &Config) -> Self;

    /// Every key a resync looks at; by default one, its kind: a sweep, whose one look
    /// is a pass over everything of its kind.
    fn keys(&self, _cx: &Cx<'_, W>) -> Vec<Key> {
        vec![(String::new(), Self::KIND.to_string())]
    }

    /// Brings what rayshare made for `key` to where it should be; an error is retried
    /// with backoff.
    fn reconcile(
        &self,
        cx: &Cx<'_, W>,
        key: &Key,
    ) -> impl Future<Output = Result<(), Failure>> + Send;
}

/// The (namespace, name) of an object as a watch shows it.
pub fn key_of(object: &serde_json::Value) -> Key {
    let meta = &object["metadata"];
    let field = |f: &str| meta[f].as_str().unwrap_or_default().to_string();
    (field("namespace"), field("name"))
}

/// How long a sweep's write may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

impl<W: Background> Cx<'_, W> {
    /// Deletes an object only if it is still exactly the one the sweep read (a concurrent
    /// change makes the delete fail, and the object stays); counted under `kind`.
    pub async fn delete_exact(
        &self,
        what: Kind,
        object: &ObjectMeta,
        kind: &'static str,
        reason: &str,
    ) {
        let ns = object.namespace.as_deref().unwrap_or_default();
        let name = object.name.as_deref().unwrap_or_default();
        match self.world.delete_exact(what, object, CALL_TIMEOUT).await {
            Ok(Written::Done) => {
                tracing::info!(kind, namespace = %ns, name = %name, reason, "deleted");
                self.metrics
                    .deleted
                    .get_or_create(&KindLabel { kind })
                    .inc();
            }
            Ok(Written::Gone | Written::Changed) => {}
            Err(e) => {
                tracing::warn!(kind, namespace = %ns, name = %name, error = %e, "delete failed");
                self.metrics.error(Cause::ReconcileDelete);
            }
        }
    }
}

impl Failure {
    /// A sweep's list that failed.
    pub fn list(error: WorldError) -> Self {
        Self {
            cause: Cause::ReconcileList,
            error: Box::new(error),
        }
    }
}

/// What a controller remembers between looks: ids (a uid, a submission, a key's
/// `namespace/name`) and when each was noted.
#[derive(Default)]
pub struct Memo(Mutex<HashMap<String, Instant>>);

impl Memo {
    /// The id of a key.
    pub fn id((ns, name): &Key) -> String {
        format!("{ns}/{name}")
    }

    /// Notes `id` now: `false` if it was noted already.
    pub fn note(&self, id: impl Into<String>) -> bool {
        let mut ids = self.0.lock().expect("not poisoned");
        ids.insert(id.into(), Instant::now()).is_none()
    }

    pub fn noted(&self, id: &str) -> bool {
        self.0.lock().expect("not poisoned").contains_key(id)
    }

    /// Forgets every id noted `ttl` ago or earlier.
    pub fn forget_older(&self, ttl: Duration) {
        let mut ids = self.0.lock().expect("not poisoned");
        ids.retain(|_, at| at.elapsed() < ttl);
    }

    /// Keeps only the ids `live` still names; returns those forgotten.
    pub fn keep(&self, live: impl Fn(&str) -> bool) -> Vec<String> {
        let mut ids = self.0.lock().expect("not poisoned");
        let gone: Vec<String> = ids.keys().filter(|id| !live(id)).cloned().collect();
        for id in &gone {
            ids.remove(id);
        }
        gone
    }
}

/// A controller bound to what its context borrows, as the runner drives it.
pub struct Bound<C, W> {
    pub controller: C,
    pub world: Arc<W>,
    pub config: Arc<Config>,
    pub metrics: Arc<Metrics>,
    pub memo: Memo,
}

impl<C, W> Bound<C, W> {
    fn cx(&self) -> Cx<'_, W> {
        Cx {
            world: &self.world,
            config: &self.config,
            metrics: &self.metrics,
            memo: &self.memo,
        }
    }
}

impl<W: Background, C: Controller<W>> super::runner::Reconciler for Bound<C, W> {
    fn kind(&self) -> &'static str {
        C::KIND
    }

    fn all(&self) -> Vec<Key> {
        self.controller.keys(&self.cx())
    }

    async fn reconcile(&self, key: &Key) -> Result<(), Failure> {
        self.controller.reconcile(&self.cx(), key).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memo_forgets_what_is_gone_or_old() {
        let memo = Memo::default();
        assert!(memo.note("a"));
        assert!(!memo.note("a"));
        memo.note("b");
        assert_eq!(memo.keep(|id| id == "a"), ["b"]);
        assert!(memo.noted("a") && !memo.noted("b"));
        memo.forget_older(Duration::ZERO);
        assert!(!memo.noted("a"));
    }
}
