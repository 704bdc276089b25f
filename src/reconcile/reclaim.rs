//! The reclaimer (leader only): shared clusters that stayed idle past their TTL are
//! marked, left the quiet period, then deleted (see `crate::domain::reclaim` for the rule
//! and the hand-off with the provisioner that keeps jobs from being stranded); kept
//! clusters get their pool labels.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::controller::{CALL_TIMEOUT, Controller, Cx, Plan};
use super::head;
use super::runner::Failure;
use crate::cause::Cause;
use crate::config::Config;
use crate::domain::events::{self, Event, ObjectRef, Reason, Regarding};
use crate::domain::labels::{self, select};
use crate::domain::reclaim::Decision;
use crate::domain::reclaim::sweep::{self, Act, Beyond, ClusterKey, Look, Usage};
use crate::metrics::{ClusterLabels, KindLabel, StateLabel};
use crate::world::background::{Key, Kind, Scope, Written};
use crate::world::{Background, WorldError};

pub struct Reclaim;

impl<W: Background> Controller<W> for Reclaim {
    const KIND: &'static str = "RayCluster";

    fn plan(config: &Config) -> Option<Plan> {
        let on = config.reclaim.enabled && config.shared_clusters.enabled;
        Plan::while_leading(on, config.reclaim.interval_seconds)
    }

    fn new(_: &Config) -> Self {
        Self
    }

    async fn reconcile(&self, cx: &Cx<'_, W>, _: &Key) -> Result<(), Failure> {
        pass(cx).await.map_err(Failure::list)
    }
}

/// One pass; the runner retries a failed one with backoff.
async fn pass<W: Background>(cx: &Cx<'_, W>) -> Result<(), WorldError> {
    let (config, metrics) = (&cx.config, &cx.metrics);
    let mine = select::shared_clusters(&config.instance);
    let scope = Scope {
        kind: Kind::RayCluster,
        namespace: None,
        labels: &mine,
    };
    let clusters = cx.world.list_metadata(scope).await?;
    let mut usage: HashMap<ClusterKey, Usage> = HashMap::new();
    let jobs = Scope {
        kind: Kind::RayJob,
        namespace: None,
        labels: select::SHARED_CLUSTER_JOBS,
    };
    let mut count = |job: Value| sweep::count(&mut usage, &job);
    cx.world.for_each(jobs, &mut count).await?;

    let now = Timestamp::now();
    let mut states: HashMap<&'static str, i64> = HashMap::new();
    let mut active_jobs = Vec::new();
    for meta in &clusters {
        let key = (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        );
        let used = usage.remove(&key).unwrap_or_default();
        // Kept warm ahead of demand, while warm-ahead is on (a note left from before does
        // not pin a cluster once it is off).
        let kept_warm = config.warm_ahead.enabled.then(|| {
            let notes = meta.annotations.as_ref();
            notes.and_then(|a| a.get(labels::KEPT_WARM)).cloned()
        });
        let mut beyond = Beyond {
            kept_warm: kept_warm.flatten(),
            ..Beyond::default()
        };
        let Some(mut look) = sweep::judge_with(meta, used.clone(), &beyond, &config.reclaim, now)
        else {
            continue;
        };
        // About to mark or delete: ask the head whether it runs work no RayJob stands for.
        if look.marks_or_deletes() {
            beyond.head = head::heard(cx.world, config, &key).await;
            match sweep::judge_with(meta, used, &beyond, &config.reclaim, now) {
                Some(heard) => look = heard,
                None => continue,
            }
        }
        *states.entry(look.decision.state()).or_default() += 1;
        let (cluster_namespace, cluster) = look.key.clone();
        let series = ClusterLabels {
            cluster_namespace,
            cluster,
        };
        active_jobs.push((series, look.active as i64));
        carry_out(cx, &look).await;
    }
    // Replaced as a whole, so a reclaimed cluster's series goes with it.
    metrics.cluster_jobs.clear();
    for (labels, n) in active_jobs {
        metrics.cluster_jobs.get_or_create(&labels).set(n);
    }
    for state in ["busy", "idle", "expired"] {
        let n = states.get(state).copied().unwrap_or(0);
        metrics
            .shared_clusters
            .get_or_create(&StateLabel { state })
            .set(n);
    }
    Ok(())
}

/// Writes what the pass decided for one cluster.
async fn carry_out<W: Background>(cx: &Cx<'_, W>, look: &Look) {
    let key = &look.key;
    let (ns, name) = key;
    let merge = |patch: Value| async move {
        cx.world
            .patch(Kind::RayCluster, key, &patch, CALL_TIMEOUT)
            .await
    };
    let result = match &look.act {
        Act::Nothing => return,
        Act::DryRun(step) => {
            let reason = look.reason();
            tracing::info!(namespace = %ns, cluster = %name, %reason, ?step, "reclaim (dry run): nothing done");
            return;
        }
        Act::Labels(l) => {
            let patch = serde_json::json!({ "metadata": { "labels": l } });
            if let Err(e) = merge(patch).await {
                tracing::debug!(namespace = %ns, cluster = %name, error = %e, "cannot update the pool labels");
            }
            return;
        }
        Act::Patch(patch) => merge(patch.clone()).await,
        Act::Delete {
            uid,
            resource_version,
        } => {
            let exact = ObjectMeta {
                namespace: Some(ns.clone()),
                name: Some(name.clone()),
                uid: uid.clone(),
                resource_version: resource_version.clone(),
                ..ObjectMeta::default()
            };
            let deleted = cx
                .world
                .delete_exact(Kind::RayCluster, &exact, CALL_TIMEOUT);
            deleted.await
        }
    };
    let reason = look.reason();
    let deleted = matches!(look.act, Act::Delete { .. });
    match result {
        Ok(Written::Done) if deleted => {
            tracing::info!(namespace = %ns, cluster = %name, %reason, "reclaimed idle shared cluster");
            if let (Decision::Reclaim { idle_for }, Act::Delete { uid: Some(uid), .. }) =
                (&look.decision, &look.act)
            {
                cx.world.record(Event {
                    regarding: Regarding::Stored(ObjectRef {
                        api_version: "ray.io/v1".into(),
                        kind: "RayCluster".into(),
                        namespace: ns.clone(),
                        name: name.clone(),
                        uid: uid.clone(),
                    }),
                    warning: false,
                    reason: Reason::Reclaimed,
                    action: "Reclaim",
                    note: events::cluster_reclaimed(*idle_for, look.ttl),
                });
            }
            let kind = "RayCluster";
            cx.metrics.deleted.get_or_create(&KindLabel { kind }).inc();
        }
        Ok(Written::Done) => {
            tracing::info!(namespace = %ns, cluster = %name, %reason, "reclaim mark changed");
        }
        Ok(Written::Changed | Written::Gone) => {
            tracing::info!(namespace = %ns, cluster = %name, deleted, "not done: the cluster changed (a job was stored) or is gone");
        }
        Err(e) => {
            tracing::warn!(namespace = %ns, cluster = %name, error = %e, deleted, "reclaim call failed");
            cx.metrics.error(Cause::ReconcileDelete);
        }
    }
}

#[cfg(test)]
#[path = "reclaim/tests.rs"]
mod tests;
