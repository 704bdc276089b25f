//! Keeps opted-in configs' shared clusters warm ahead of demand (leader only, while
//! `warmAhead.enabled`; `domain::warm_ahead` decides). Each pass feeds the arrivals the
//! stored-job cache shows (each job once, oldest first) to the tracker, builds every
//! namespace's pools from the caches, and carries the plan out: a member made ahead is
//! built from the config's newest stored job (or, once its jobs are gone, the template
//! the tracker cut from one) as the cluster maker builds one
//! (`warm_ahead::ahead`), a member kept gets the `rayshare.io/kept-warm` annotation with
//! why (the reclaimer keeps it), a member let go loses it (the idle TTL applies again).

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::controller::{CALL_TIMEOUT, Controller, Cx, Plan};
use super::runner::Failure;
use crate::cause::Cause;
use crate::config::Config;
use crate::domain::labels::{self, Meta};
use crate::domain::warm_ahead::{self, Limits, Memory, PoolPlan, Tracker, ahead, inputs, pools};
use crate::metrics::KindLabel;
use crate::world::Background;
use crate::world::background::{Key, Kind, Written};
use crate::world::watch::{Change, WatchEvent};

pub struct WarmAhead {
    tracker: Mutex<Tracker>,
}

impl<W: Background> Controller<W> for WarmAhead {
    const KIND: &'static str = "SharedClusterWarm";

    fn plan(config: &Config) -> Option<Plan> {
        let on = config.warm_ahead.enabled && config.shared_clusters.enabled;
        Plan::while_leading(on, config.reclaim.interval_seconds)
    }

    /// A job stored: an arrival, looked at now rather than at the next resync.
    fn trigger(event: &WatchEvent) -> Option<Key> {
        match event {
            WatchEvent::RayJob {
                change: Change::Applied,
                ..
            } => Some((String::new(), <Self as Controller<W>>::KIND.to_string())),
            _ => None,
        }
    }

    fn new(config: &Config) -> Self {
        let memory = Memory::from_config(config);
        let max_configs = config.warm_ahead.max_configs as usize;
        Self {
            tracker: Mutex::new(Tracker::new(memory, max_configs)),
        }
    }

    async fn reconcile(&self, cx: &Cx<'_, W>, _: &Key) -> Result<(), Failure> {
        let mut jobs = cx.world.stored_jobs(None);
        jobs.sort_by(|a, b| created(a).cmp(created(b)));
        let clusters = cx.world.shared_clusters(&cx.config.instance);
        let now = Timestamp::now().as_millisecond();
        let limits = Limits::from_config(cx.config);
        let (plans, pools) = {
            let mut tracker = self.tracker.lock().expect("not poisoned");
            for job in &jobs {
                let uid = job["metadata"]["uid"].as_str().unwrap_or_default();
                if cx.memo.note(uid)
                    && let Some((config, at)) = inputs::arrival(job)
                {
                    tracker.arrived(&config, at);
                }
            }
            let live: HashSet<&str> = jobs
                .iter()
                .filter_map(|j| j["metadata"]["uid"].as_str())
                .collect();
            cx.memo.keep(|uid| live.contains(uid));
            let pools = pools::pools(&tracker, &jobs, &clusters, cx.config, now);
            for (config, job) in &pools.newest_job {
                let uid = job["metadata"]["uid"].as_str().unwrap_or_default();
                tracker.remember(config, uid, job);
            }
            let plans: Vec<(String, PoolPlan, Option<Value>)> = pools
                .by_namespace
                .iter()
                .flat_map(|(ns, p)| {
                    warm_ahead::plan(p, &limits).into_iter().map(|plan| {
                        let config = (ns.clone(), plan.digest.clone());
                        let template = tracker.template(&config).cloned();
                        (ns.clone(), plan, template)
                    })
                })
                .collect();
            (plans, pools)
        };
        for (ns, plan, template) in &plans {
            // The newest stored job, or once every job of the config is gone, its template.
            for place in &plan.create {
                let config = (ns.clone(), plan.digest.clone());
                let Some(job) = pools.newest_job.get(&config).copied().or(template.as_ref()) else {
                    continue;
                };
                make_ahead(cx, ns, job, *place).await;
            }
            for (name, reason) in &plan.keep {
                let why = (reason.label(), reason.describe());
                annotate(cx, &clusters, (ns, name), Some(why)).await;
            }
            for name in &plan.let_go {
                annotate(cx, &clusters, (ns, name), None).await;
            }
        }
        Ok(())
    }
}

fn created(job: &Value) -> &str {
    job["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap_or_default()
}

/// Makes the member at `place` of `job`'s pool (AlreadyExists: made already).
async fn make_ahead<W: Background>(cx: &Cx<'_, W>, ns: &str, job: &Value, place: u32) {
    let cluster = match ahead::cluster_ahead(job, place, &cx.config.shared_clusters) {
        Ok(cluster) => cluster,
        Err(why) => {
            tracing::info!(namespace = %ns, place, %why, "no cluster to make ahead from this config's job");
            return;
        }
    };
    let name = cluster["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let timeout = Duration::from_millis(cx.config.shared_clusters.create_timeout_ms);
    match cx.world.create_new(&cluster, timeout).await {
        Ok(Some(_)) => {
            tracing::info!(namespace = %ns, cluster = %name, "made a shared cluster ahead of demand");
            let kind = "RayCluster";
            cx.metrics.created.get_or_create(&KindLabel { kind }).inc();
        }
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(namespace = %ns, cluster = %name, error = %e, "cannot make a shared cluster ahead of demand");
            cx.metrics.error(Cause::ProvisionCreate);
        }
    }
}

/// Sets (or, with `None`, removes) the kept-warm label (why in a word, for selectors:
/// `-l rayshare.io/kept-warm`) and annotation (why in words, as of when the reason was
/// set) of member `name`, when the cache shows another reason.
async fn annotate<W: Background>(
    cx: &Cx<'_, W>,
    clusters: &[Value],
    (ns, name): (&str, &str),
    why: Option<(&str, String)>,
) {
    let cached = clusters
        .iter()
        .find(|c| c["metadata"]["namespace"] == ns && c["metadata"]["name"] == name);
    let shown = |meta| cached.and_then(|c| labels::get(c, meta, labels::KEPT_WARM));
    let (word, words) = why.as_ref().map(|(w, s)| (*w, s.as_str())).unzip();
    // The words hold numbers that move every pass ("next expected in 28s"): rewritten
    // only when the reason changes, not on each pass.
    if shown(Meta::Labels) == word && shown(Meta::Annotations).is_some() == words.is_some() {
        return;
    }
    let patch = json!({"metadata": {
        "labels": {labels::KEPT_WARM: word},
        "annotations": {labels::KEPT_WARM: words},
    }});
    let key = (ns.to_string(), name.to_string());
    match cx
        .world
        .patch(Kind::RayCluster, &key, &patch, CALL_TIMEOUT)
        .await
    {
        Ok(Written::Done) => {
            tracing::info!(namespace = %ns, cluster = %name, kept = why.is_some(), reason = words.unwrap_or(""), "warm-ahead");
        }
        Ok(Written::Gone | Written::Changed) => {}
        Err(e) => {
            tracing::warn!(namespace = %ns, cluster = %name, error = %e, "cannot note a member kept warm");
            cx.metrics.error(Cause::ProvisionStamp);
        }
    }
}

#[cfg(test)]
#[path = "warm_ahead/tests.rs"]
mod tests;
