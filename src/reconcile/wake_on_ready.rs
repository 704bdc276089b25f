//! Wakes the RayJobs that waited for their shared cluster once it is *ready*, on every
//! replica. KubeRay holds a job in Initializing until its selected cluster is ready and
//! looks again only every 3 seconds; a shared cluster is not the job's own, so its
//! readiness wakes nothing in KubeRay. The made-wake (`make_clusters`) touches the jobs
//! when the cluster is created; this touches them again when KubeRay records it ready
//! (`domain::shared_cluster::wake` decides which, and writes the readiness's own time,
//! so a second look or a second replica writes nothing new).

use std::time::Duration;

use super::controller::{Controller, Cx, Plan, key_of};
use super::make_clusters::wake_jobs;
use super::runner::Failure;
use crate::config::Config;
use crate::domain::shared_cluster::wake::{
    jobs_to_wake_on_ready, ready_since, wake_on_ready_patch,
};
use crate::world::Background;
use crate::world::background::Key;
use crate::world::watch::{Change, WatchEvent};

pub struct WakeOnReady;

impl<W: Background> Controller<W> for WakeOnReady {
    const KIND: &'static str = "SharedClusterReady";

    fn plan(config: &Config) -> Option<Plan> {
        // A missed event: the jobs still wait at most KubeRay's own 3-second requeue, so
        // the resync is a backstop only.
        let on = config.shared_clusters.enabled;
        Plan::every_replica(on, Duration::from_secs(30), 4, Duration::from_secs(10))
    }

    fn trigger(event: &WatchEvent) -> Option<Key> {
        match event {
            WatchEvent::RayCluster {
                change: Change::Applied | Change::Listed,
                key,
                shared: true,
            } => Some(key.clone()),
            _ => None,
        }
    }

    fn new(_: &Config) -> Self {
        Self
    }

    /// The shared clusters that are ready now.
    fn keys(&self, cx: &Cx<'_, W>) -> Vec<Key> {
        let clusters = cx.world.shared_clusters(&cx.config.instance);
        clusters
            .iter()
            .filter(|c| ready_since(c).is_some())
            .map(key_of)
            .collect()
    }

    async fn reconcile(&self, cx: &Cx<'_, W>, (ns, name): &Key) -> Result<(), Failure> {
        let Some(cluster) = cx.world.cached_cluster(ns, name) else {
            return Ok(());
        };
        let Some(since) = ready_since(&cluster) else {
            return Ok(());
        };
        let jobs = cx.world.stored_jobs(Some(ns));
        let waiting = jobs_to_wake_on_ready(&cluster, &jobs, &cx.config.instance);
        wake_jobs(cx, ns, waiting, &wake_on_ready_patch(since)).await;
        Ok(())
    }
}

#[cfg(test)]
#[path = "wake_on_ready/tests.rs"]
mod tests;
