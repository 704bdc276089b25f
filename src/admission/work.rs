//! One request's accumulated changes, and what every feature's effects share.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::AdmissionRequest;
use crate::cause::Cause;
use crate::config::Config;
use crate::domain::cluster::ClusterInfo;
use crate::metrics::{KindLabel, Metrics};
use crate::world::{World, WorldError};

/// Accumulates one request's changes; each feature either applies fully or not at all.
pub(super) struct Work<'a, W: World> {
    pub(super) req: &'a AdmissionRequest,
    pub(super) cfg: &'a Config,
    pub(super) world: &'a W,
    pub(super) metrics: Option<&'a Metrics>,
    pub(super) namespace: String,
    pub(super) original: &'a Value,
    /// The object as changed so far; `None` while unchanged (no copy, no diff).
    pub(super) changed: Option<Value>,
    pub(super) warnings: Vec<String>,
    pub(super) ensured: Vec<Value>,
    pub(super) failure: Option<(Cause, bool)>,
    pub(super) deadline: Instant,
}

impl<W: World> Work<'_, W> {
    pub(super) fn object(&self) -> &Value {
        self.changed.as_ref().unwrap_or(self.original)
    }

    pub(super) fn count(
        &self,
        family: fn(
            &Metrics,
        ) -> &prometheus_client::metrics::family::Family<
            KindLabel,
            prometheus_client::metrics::counter::Counter,
        >,
        kind: &'static str,
    ) {
        if let Some(m) = self.metrics {
            family(m).get_or_create(&KindLabel { kind }).inc();
        }
    }

    /// Records a failure: a warning, a metric, and (when `deny`) a denial. What rayshare
    /// refused to do on a review's word alone (a namespace it does not serve, too many
    /// groups awaiting their pods) is never a denial: a real pod must not be lost to it.
    pub(super) fn fail(&mut self, cause: Cause, message: String, deny: bool) {
        let deny = deny && !matches!(cause, Cause::NotServed | Cause::UnconfirmedBound);
        tracing::warn!(uid = %self.req.uid, cause = cause.as_str(), %message, "rayshare could not do its job");
        if let Some(m) = self.metrics {
            m.error(cause);
        }
        self.warnings.push(message);
        if self.failure.is_none() || deny {
            self.failure = Some((cause, deny));
        }
    }

    /// The RayCluster `name` as the API server has it now, for a name the cache does not
    /// know (yet). A read only; a failure is logged and counted here, the caller decides.
    pub(super) async fn read_cluster(
        &self,
        name: &str,
        timeout_ms: u64,
    ) -> Result<Option<ClusterInfo>, WorldError> {
        let timeout = self.budget(timeout_ms);
        let read = self
            .world
            .fetch_cluster(&self.namespace, name, timeout)
            .await;
        if let Err(e) = &read {
            tracing::warn!(uid = %self.req.uid, error = %e, cluster = %name, "cannot read the RayCluster");
            if let Some(m) = self.metrics {
                m.error(e.cause());
            }
        }
        read
    }

    /// Whether the request's namespace is one the webhook is called for, as rayshare's
    /// own namespace watch shows it: the review's word is not enough for a side effect.
    pub(super) fn served_namespace(&self) -> bool {
        self.world
            .namespace_served(&self.namespace, &self.cfg.served_namespaces)
    }

    /// A call's timeout: its own bound, within what is left of the request's budget
    /// (so the answer reaches the API server before its webhook timeout).
    pub(super) fn budget(&self, timeout_ms: u64) -> Duration {
        let left = self.deadline.saturating_duration_since(Instant::now());
        Duration::from_millis(timeout_ms).min(left)
    }
}
