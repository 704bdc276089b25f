//! Tells the RayJobs a suspended shared cluster cut off (leader only): Kueue suspends a
//! cluster it preempts or that is deactivated, KubeRay deletes its pods, and the Ray job
//! of every RayJob running there goes with them, while KubeRay may go on showing the job
//! Running. Each such job gets one Warning Event and is counted
//! (`domain::shared_cluster::job_life::suspended_under` says which). Its own loop, not the job
//! stopper's: a look here reads only the caches and never fails, so no dashboard backoff
//! delays it. The memo holds the RayJobs (by uid) told already.

use std::collections::{BTreeSet, HashSet};

use serde_json::{Value, json};

use super::controller::{Controller, Cx, Plan, key_of};
use super::runner::Failure;
use crate::config::Config;
use crate::domain::events::{self, Event, ObjectRef, Reason, Regarding};
use crate::domain::shared_cluster::job_life;
use crate::world::Background;
use crate::world::background::Key;

pub struct Suspended;

impl<W: Background> Controller<W> for Suspended {
    const KIND: &'static str = "SharedClusterSuspended";

    fn plan(config: &Config) -> Option<Plan> {
        let every = config.shared_clusters.stop_jobs.interval_seconds;
        Plan::while_leading(config.shared_clusters.enabled, every)
    }

    fn new(_: &Config) -> Self {
        Self
    }

    fn keys(&self, cx: &Cx<'_, W>) -> Vec<Key> {
        let clusters = cx.world.shared_clusters(&cx.config.instance);
        let suspended: BTreeSet<Key> = clusters
            .iter()
            .filter(|c| c["spec"]["suspend"] == true)
            .map(key_of)
            .collect();
        // Forget the jobs that are gone.
        let jobs = cx.world.stored_jobs(None);
        let live: HashSet<&str> = jobs
            .iter()
            .filter_map(|j| j["metadata"]["uid"].as_str())
            .collect();
        cx.memo.keep(|uid| live.contains(uid));
        suspended.into_iter().collect()
    }

    async fn reconcile(&self, cx: &Cx<'_, W>, (ns, name): &Key) -> Result<(), Failure> {
        let Some(cluster) = cx.world.cached_cluster(ns, name) else {
            return Ok(());
        };
        let jobs = cx.world.stored_jobs(Some(ns));
        for job in job_life::suspended_under(&cluster, &jobs) {
            tell(cx, name, job);
        }
        Ok(())
    }
}

fn tell<W: Background>(cx: &Cx<'_, W>, cluster: &str, job: &Value) {
    // A watched object carries no apiVersion/kind of its own.
    let mut job = job.clone();
    job["apiVersion"] = json!("ray.io/v1");
    job["kind"] = json!("RayJob");
    let Some(target) = ObjectRef::of(&job) else {
        return;
    };
    if !cx.memo.note(target.uid.clone()) {
        return;
    }
    tracing::warn!(namespace = %target.namespace, job = %target.name, cluster, "a shared cluster was suspended under a running job");
    cx.metrics.jobs_cut_off.inc();
    cx.world.record(Event {
        regarding: Regarding::Stored(target),
        warning: true,
        reason: Reason::SharedClusterSuspended,
        action: "Watch",
        note: events::suspended_under(cluster),
    });
}

#[cfg(test)]
#[path = "suspended/tests.rs"]
mod tests;
