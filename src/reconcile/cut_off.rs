//! Tells the RayJobs a suspended shared cluster cut off (leader only): Kueue suspends a
//! cluster it preempts or that is deactivated, KubeRay deletes its pods, and the Ray job
//! of every RayJob running there goes with them, while KubeRay may go on showing the job
//! Running. Each such job gets one Warning Event and is counted
//! (`domain::shared_cluster::job_life::cut_off` says which). Its own loop, not the job
//! stopper's: a look here reads only the caches and never fails, so no dashboard backoff
//! delays it.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::ResourceExt;
use serde_json::{Value, json};

use super::Key;
use super::runner::{self, Failure, Reconciler, Schedule};
use crate::config::Config;
use crate::domain::events::{self, Event, ObjectRef, Regarding};
use crate::domain::shared_cluster::job_life;
use crate::metrics::Metrics;
use crate::world::kube::KubeWorld;

struct CutOff {
    world: Arc<KubeWorld>,
    config: Arc<Config>,
    metrics: Arc<Metrics>,
    /// RayJobs (by uid) told already.
    told: Mutex<HashSet<String>>,
}

/// Looks at every suspended shared cluster each `every`, while this replica leads.
pub fn spawn(
    world: Arc<KubeWorld>,
    config: Arc<Config>,
    metrics: Arc<Metrics>,
    every: Duration,
    leading: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let schedule = Schedule::while_leading(every, leading);
    let cut_off = CutOff {
        world,
        config,
        metrics: metrics.clone(),
        told: Mutex::default(),
    };
    runner::spawn(Arc::new(cut_off), schedule, None, metrics)
}

impl Reconciler for CutOff {
    fn kind(&self) -> &'static str {
        "SharedClusterSuspended"
    }

    fn all(&self) -> Vec<Key> {
        let clusters = self.world.shared_clusters(&self.config.instance);
        let suspended: BTreeSet<Key> = clusters
            .iter()
            .filter(|c| c.data["spec"]["suspend"] == true)
            .map(|c| (c.namespace().unwrap_or_default(), c.name_any()))
            .collect();
        // Forget the jobs that are gone.
        let live: HashSet<String> = self
            .world
            .stored_jobs()
            .iter()
            .filter_map(|j| j.uid())
            .collect();
        self.told
            .lock()
            .expect("not poisoned")
            .retain(|uid| live.contains(uid));
        suspended.into_iter().collect()
    }

    async fn reconcile(&self, (ns, name): &Key) -> Result<(), Failure> {
        let Some(cluster) = self.world.cached_cluster(ns, name) else {
            return Ok(());
        };
        let cluster = serde_json::to_value(cluster.as_ref()).unwrap_or_default();
        let jobs: Vec<Value> = self
            .world
            .stored_jobs()
            .iter()
            .filter(|j| j.namespace().as_deref() == Some(ns))
            .filter_map(|j| serde_json::to_value(j.as_ref()).ok())
            .collect();
        for job in job_life::cut_off(&cluster, &jobs) {
            self.tell(name, job);
        }
        Ok(())
    }
}

impl CutOff {
    fn tell(&self, cluster: &str, job: &Value) {
        // A watched object carries no apiVersion/kind of its own.
        let mut job = job.clone();
        job["apiVersion"] = json!("ray.io/v1");
        job["kind"] = json!("RayJob");
        let Some(target) = ObjectRef::of(&job) else {
            return;
        };
        if !self
            .told
            .lock()
            .expect("not poisoned")
            .insert(target.uid.clone())
        {
            return;
        }
        tracing::warn!(namespace = %target.namespace, job = %target.name, cluster, "a shared cluster was suspended under a running job");
        self.metrics.jobs_cut_off.inc();
        if let Some(sink) = self.world.events() {
            sink.record(Event {
                regarding: Regarding::Stored(target),
                warning: true,
                reason: "SharedClusterSuspended",
                action: "Watch",
                note: events::job_cut_off(cluster),
            });
        }
    }
}
