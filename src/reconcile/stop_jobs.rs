//! Stops the Ray jobs of RayJobs that are gone or over, on this installation's shared
//! clusters (leader only). See `domain::shared_cluster::job_life` for the rule.
//!
//! A deletion or end seen on the RayJob watch wakes a look at that job's cluster at once;
//! every cluster is looked at on each resync and when this replica becomes leader, so a
//! deletion missed while rayshare was down is still caught. A stop always follows a
//! fresh read of the RayJob from the API server, never the cache alone. Then the records
//! of finished Ray jobs whose RayJob is gone are deleted (`ray_table`).

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use super::controller::{Controller, Cx, Memo, Plan, Runs};
use super::head::{self, HeadError};
use super::runner::Failure;
use crate::cause::Cause;
use crate::config::Config;
use crate::domain::events::{self, Event, ObjectRef, Reason, Regarding};
use crate::domain::labels::select;
use crate::domain::shared_cluster::job_life::{self, StopReason, Submission, Verdict};
use crate::metrics::Metrics;
use crate::world::background::{Key, Kind, Scope};
use crate::world::watch::{Change, WatchEvent};
use crate::world::{Background, WorldError};

mod ray_table;

/// A Ray job still listed as running this long after its stop is stopped again.
const STOPPING_FOR: Duration = Duration::from_secs(60);
/// Ray jobs of one cluster judged (a RayJob read, maybe a stop) in one pass; the rest wait
/// for the next, so one head listing many running jobs cannot hold the stopper.
const SUSPECTS_PER_PASS: usize = 64;
/// One cluster's pass ends after this many dashboard timeouts, whatever its head does:
/// the stopper looks at one cluster at a time, and the others' jobs wait meanwhile.
const PASS_TIMEOUTS: u32 = 4;

/// The job stopper: leader only, one cluster at a time. Its memo holds the clusters
/// looked at (one that is gone takes its unattributed-jobs series along); `asked` the
/// submission ids this replica asked to stop, and when.
pub struct StopJobs {
    asked: Memo,
}

impl<W: Background> Controller<W> for StopJobs {
    const KIND: &'static str = "RayJobStop";

    fn plan(config: &Config) -> Option<Plan> {
        let cfg = &config.shared_clusters.stop_jobs;
        (config.shared_clusters.enabled && cfg.enabled).then_some(Plan {
            resync: Duration::from_secs(cfg.interval_seconds),
            runs: Runs::WhileLeading,
        })
    }

    fn trigger(event: &WatchEvent) -> Option<Key> {
        match event {
            // A job deleted or over: its Ray job may still run on the cluster.
            WatchEvent::RayJob {
                change: Change::Deleted,
                cluster,
                ..
            }
            | WatchEvent::RayJob {
                change: Change::Applied,
                cluster,
                over: true,
            } => Some(cluster.clone()),
            _ => None,
        }
    }

    fn new(_: &Config) -> Self {
        Self {
            asked: Memo::default(),
        }
    }

    fn keys(&self, cx: &Cx<'_, W>) -> Vec<Key> {
        let keys: BTreeSet<Key> = cx
            .world
            .shared_clusters(&cx.config.instance)
            .iter()
            .map(|c| {
                let field = |f: &str| c["metadata"][f].as_str().unwrap_or_default().to_string();
                (field("namespace"), field("name"))
            })
            .collect();
        let ids: BTreeSet<String> = keys.iter().map(Memo::id).collect();
        for gone in cx.memo.keep(|id| ids.contains(id)) {
            if let Some((ns, name)) = gone.split_once('/') {
                let key = (ns.to_string(), name.to_string());
                cx.metrics.ray_jobs_unattributed.remove(&series(&key));
            }
        }
        keys.into_iter().collect()
    }

    async fn reconcile(&self, cx: &Cx<'_, W>, key: &Key) -> Result<(), Failure> {
        self.asked.forget_older(STOPPING_FOR);
        let look = Look {
            world: cx.world,
            config: cx.config,
            metrics: cx.metrics,
            asked: &self.asked,
        };
        cx.memo.note(Memo::id(key));
        let deadline =
            Duration::from_millis(cx.config.shared_clusters.stop_jobs.timeout_ms) * PASS_TIMEOUTS;
        let pass = tokio::time::timeout(deadline, look.cluster(key)).await;
        pass.unwrap_or(Err(HeadError::Slow(deadline)))
            .map_err(|e| Failure {
                cause: e.cause(),
                error: Box::new(e),
            })
    }
}

/// The cluster's series of the unattributed-jobs gauge.
fn series((ns, name): &Key) -> crate::metrics::ClusterLabels {
    crate::metrics::ClusterLabels {
        cluster_namespace: ns.clone(),
        cluster: name.clone(),
    }
}

struct Look<'a, W> {
    world: &'a W,
    config: &'a Config,
    metrics: &'a Metrics,
    asked: &'a Memo,
}

impl<W: Background> Look<'_, W> {
    /// Reads the cluster's submissions and stops those whose RayJob is gone or over.
    async fn cluster(&self, key: &Key) -> Result<(), HeadError> {
        let (ns, name) = key;
        let series = series(key);
        // No cluster, or no head to ask: no count of its Ray jobs stands.
        let forget = || {
            self.metrics.ray_jobs_unattributed.remove(&series);
        };
        let Some(cluster) = self.world.cached_cluster(ns, name) else {
            forget();
            return Ok(());
        };
        // No head to ask (suspended: `suspended` tells its jobs; none running yet): the
        // next pass looks again.
        let Some(at) = head::reach(self.world, self.config, key, &cluster).await? else {
            forget();
            return Ok(());
        };
        let (base, auth) = (at.base, at.auth.as_deref());
        let list = self.world.ray_jobs(&base, auth).await?;
        if list.truncated {
            tracing::warn!(namespace = %ns, cluster = %name, max = job_life::job_list::MAX_JOBS, "the dashboard lists more jobs than rayshare reads; the first ones are judged");
        }
        let submissions = list.submissions;
        // The stored jobs of this namespace by token, as the watch knows them.
        let stored = self.world.stored_jobs(Some(ns));
        let known = job_life::by_token(stored, ns);
        let instance = &self.config.instance;
        let asked = |id: &str| self.asked.noted(id);
        let triage = job_life::triage(&submissions, &known, asked, instance, ns);
        if triage.suspects.len() > SUSPECTS_PER_PASS {
            tracing::info!(namespace = %ns, cluster = %name, suspects = triage.suspects.len(), judged = SUSPECTS_PER_PASS, "more Ray jobs to judge than one pass does; the rest next pass");
        }
        for (sub, token) in triage.suspects.into_iter().take(SUSPECTS_PER_PASS) {
            // The cache may lag (a job just created): ask the API server before acting.
            let owner = match self.owner(ns, token).await {
                Ok(owner) => owner,
                Err(e) => {
                    tracing::warn!(namespace = %ns, token, error = %e, "cannot read the RayJob of a Ray job; not stopping it");
                    self.metrics.error(Cause::ReconcileList);
                    continue;
                }
            };
            if let Verdict::Stop(reason) = job_life::verdict_of_all(sub, &owner, instance, ns) {
                self.stop(&base, auth, &cluster, sub, reason).await;
                self.asked.note(sub.id.clone());
            }
        }
        let unattributed = triage.unattributed;
        self.metrics
            .ray_jobs_unattributed
            .get_or_create(&series)
            .set(unattributed);
        self.clear_table(
            &base,
            auth,
            (ns.as_str(), name.as_str()),
            &submissions,
            &known,
        )
        .await;
        Ok(())
    }

    /// Every RayJob that carries the token, as the API server has them.
    async fn owner(&self, ns: &str, token: &str) -> Result<Vec<Value>, WorldError> {
        let selector = select::admitted_as(token);
        let scope = Scope {
            kind: Kind::RayJob,
            namespace: Some(ns),
            labels: &selector,
        };
        let mut jobs = Vec::new();
        self.world
            .for_each(scope, &mut |job| jobs.push(job))
            .await?;
        Ok(jobs)
    }

    async fn stop(
        &self,
        base: &str,
        token: Option<&str>,
        cluster_object: &Value,
        sub: &Submission,
        why: StopReason,
    ) {
        let reason = why.as_str();
        let meta = &cluster_object["metadata"];
        let ns = meta["namespace"].as_str().unwrap_or_default();
        let cluster = meta["name"].as_str().unwrap_or_default();
        match self.world.stop_ray_job(base, &sub.id, token).await {
            Ok(stopped) => {
                tracing::info!(namespace = %ns, cluster, submission = %sub.id, reason, stopped, "stopped the Ray job of a RayJob that is gone or over");
                if stopped {
                    self.metrics
                        .ray_jobs_stopped
                        .get_or_create(&crate::metrics::ReasonLabel { reason })
                        .inc();
                    if let Some(target) = ObjectRef::of(cluster_object) {
                        self.world.record(Event {
                            regarding: Regarding::Stored(target),
                            warning: false,
                            reason: Reason::StoppedRayJob,
                            action: "StopJob",
                            note: events::ray_job_stopped(&sub.id, why.describe()),
                        });
                    }
                }
            }
            Err(e) => {
                tracing::warn!(namespace = %ns, cluster, submission = %sub.id, reason, error = %e, "cannot stop a Ray job");
                self.metrics.error(Cause::RayJobStop);
            }
        }
    }
}

#[cfg(test)]
#[path = "stop_jobs/tests.rs"]
mod tests;
