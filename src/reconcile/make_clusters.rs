//! Makes the shared clusters that stored RayJobs select, on every replica.
//!
//! Admission only rewrites jobs; the cluster of a rewritten job is created here, from
//! the spec the *stored* job carries (`domain::shared_cluster::provision`), so nothing
//! happens on the word of an admission review alone. The same look, on each change of a
//! stored job and on each deletion of a shared cluster, also keeps the reclaim hand-off:
//! a cluster a stored job needs is stamped, unmarked, or made again.
//!
//! Every replica runs it (a new cluster must not wait for a leader): creations are
//! idempotent (AlreadyExists is success) and stamps are plain annotation writes.

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::controller::{Controller, Cx, Memo, Plan};
use super::runner::Failure;
use crate::cause::Cause;
use crate::config::Config;
use crate::domain::cluster::ClusterInfo;
use crate::domain::events::{self, Event, ObjectRef, Reason, Regarding};
use crate::domain::labels::{self, Meta};
use crate::domain::reclaim;
use crate::domain::shared_cluster::provision::{Refusal, jobs_to_wake, wake_patch};
use crate::domain::shared_cluster::provision_step::{Seen, Step, created, step};
use crate::metrics::KindLabel;
use crate::world::Background;
use crate::world::background::{Key, Kind, Written};
use crate::world::watch::{Change, WatchEvent};

/// A cluster this replica made is not made again before the cache shows it.
const MADE_RECENTLY: Duration = Duration::from_secs(10);

/// The shared-cluster provisioner: every replica, several clusters at once.
pub struct MakeClusters;

impl<W: Background> Controller<W> for MakeClusters {
    const KIND: &'static str = "SharedClusterProvision";

    fn plan(config: &Config) -> Option<Plan> {
        // Every stored job is looked at again each 30 s (a failed create, a missed event);
        // a burst of new configs waits for one round trip, not one per config (8 at once);
        // a cluster whose create failed (a quota, a policy) is tried again at most 10 s
        // after the last try: its jobs wait, and the quota may free.
        let on = config.shared_clusters.enabled;
        Plan::every_replica(on, Duration::from_secs(30), 8, Duration::from_secs(10))
    }

    fn trigger(event: &WatchEvent) -> Option<Key> {
        match event {
            // Stored or gone: make, stamp, or start the idle clock.
            WatchEvent::RayJob { cluster, .. } => Some(cluster.clone()),
            // A shared cluster gone: jobs still on it need it made again.
            WatchEvent::RayCluster {
                change: Change::Deleted,
                key,
                shared: true,
            } => Some(key.clone()),
            _ => None,
        }
    }

    fn new(_: &Config) -> Self {
        Self
    }

    fn keys(&self, cx: &Cx<'_, W>) -> Vec<Key> {
        cx.world.selected_clusters()
    }

    async fn reconcile(&self, cx: &Cx<'_, W>, key: &Key) -> Result<(), Failure> {
        let jobs = active_jobs(cx.world, key);
        let (ns, name) = key;
        let cluster = cx
            .world
            .cached_cluster(ns, name)
            .map(|c| ClusterInfo::from_value(&c));
        cx.memo.forget_older(MADE_RECENTLY);
        let seen = Seen {
            jobs: &jobs,
            cluster: cluster.as_ref(),
            went_idle: cx.world.went_idle(ns, name),
            made_recently: cx.memo.noted(&Memo::id(key)),
        };
        match step(&seen, cx.config, Timestamp::now()) {
            Step::Nothing => {}
            Step::Stamp(patch) => stamp(cx, key, &patch).await,
            Step::Refused(refused) => tell_refused(cx, name, &refused),
            Step::Make {
                cluster,
                first_job,
                refused,
            } => {
                tell_refused(cx, name, &refused);
                if make(cx, key, &jobs, cluster, &first_job).await? {
                    cx.memo.note(Memo::id(key));
                }
            }
        }
        Ok(())
    }
}

fn timeout(config: &Config) -> Duration {
    Duration::from_millis(config.shared_clusters.create_timeout_ms)
}

/// The stored, active jobs that select the cluster `key`, oldest first.
fn active_jobs(world: &impl Background, (ns, name): &Key) -> Vec<Value> {
    let mut jobs: Vec<Value> = world
        .stored_jobs(Some(ns))
        .into_iter()
        .filter(|j| labels::selected_cluster(j) == Some(name.as_str()))
        .filter(|j| !reclaim::is_terminal(j))
        .collect();
    jobs.sort_by_key(created);
    jobs
}

/// Each job whose spec may not have the cluster made hears why.
fn tell_refused<W: Background>(cx: &Cx<'_, W>, cluster: &str, refused: &[(Value, Refusal)]) {
    for (job, why) in refused {
        let job_name = job["metadata"]["name"].as_str().unwrap_or_default();
        tracing::warn!(job = job_name, cluster, %why, "no shared cluster for this stored RayJob");
        cx.metrics.error(Cause::ProvisionRefused);
        let why = format!("this RayJob: {why}");
        tell_jobs(cx.world, std::slice::from_ref(job), cluster, &why);
    }
}

/// Creates the cluster: whether it exists now; `Err` when the API server refused or did
/// not answer (retried with backoff).
async fn make<W: Background>(
    cx: &Cx<'_, W>,
    (ns, name): &Key,
    jobs: &[Value],
    cluster: Value,
    first_job: &str,
) -> Result<bool, Failure> {
    let digest = labels::get(&cluster, Meta::Annotations, labels::CONFIG_DIGEST)
        .unwrap_or_default()
        .to_string();
    let started = Instant::now();
    match cx.world.create_new(&cluster, timeout(cx.config)).await {
        Ok(Some(created)) => {
            tracing::info!(namespace = %ns, cluster = %name, jobs = jobs.len(), "created shared cluster");
            wake(cx, ns, jobs).await;
            if let Some(target) = ObjectRef::of(&created) {
                cx.world.record(Event {
                    regarding: Regarding::Stored(target),
                    warning: false,
                    reason: Reason::Created,
                    action: "Provision",
                    note: events::cluster_created(&digest, first_job),
                });
            }
            let kind = "RayCluster";
            cx.metrics.created.get_or_create(&KindLabel { kind }).inc();
            let took = started.elapsed().as_secs_f64();
            cx.metrics.provision_seconds.observe(took);
            Ok(true)
        }
        Ok(None) => Ok(true),
        Err(e) => {
            tell_jobs(cx.world, jobs, name, &e.reason());
            Err(Failure {
                cause: Cause::ProvisionCreate,
                error: format!("cannot create shared cluster: {}", e.reason()).into(),
            })
        }
    }
}

/// Touches each job that waited for the cluster just made, so KubeRay takes it up now
/// rather than after its retry delay (which grows with the wait, to 1,000 s).
async fn wake<W: Background>(cx: &Cx<'_, W>, ns: &str, jobs: &[Value]) {
    let made = Timestamp::now();
    wake_jobs(cx, ns, jobs_to_wake(jobs, made), &wake_patch(made)).await;
}

/// Writes `patch` (the wake annotation) on each of `jobs` in `ns`: a change KubeRay's
/// RayJob controller sees at once.
pub(super) async fn wake_jobs<'a, W: Background>(
    cx: &Cx<'_, W>,
    ns: &str,
    jobs: impl IntoIterator<Item = &'a Value>,
    patch: &Value,
) {
    for job in jobs {
        let name = job["metadata"]["name"].as_str().unwrap_or_default();
        let key = (ns.to_string(), name.to_string());
        let woke = cx
            .world
            .patch(Kind::RayJob, &key, patch, timeout(cx.config));
        match woke.await {
            Ok(Written::Done) => {
                tracing::info!(namespace = %ns, job = name, "woke a RayJob that waited for its cluster");
                cx.metrics.jobs_woken.inc();
            }
            Ok(Written::Gone) => {}
            Ok(Written::Changed) | Err(_) => {
                tracing::warn!(namespace = %ns, job = name, "cannot wake RayJob (KubeRay takes it up after its retry delay)");
                cx.metrics.error(Cause::ProvisionWake);
            }
        }
    }
}

/// A warning Event on each job waiting for the cluster: KubeRay itself only says the
/// cluster is not found. Repeats fold into one series per job (see `EventSink`).
fn tell_jobs(world: &impl Background, jobs: &[Value], cluster: &str, why: &str) {
    for target in jobs.iter().filter_map(ObjectRef::of) {
        world.record(Event {
            regarding: Regarding::Stored(target),
            warning: true,
            reason: Reason::SharedClusterNotMade,
            action: "Provision",
            note: events::cluster_not_made(cluster, why),
        });
    }
}

async fn stamp<W: Background>(cx: &Cx<'_, W>, key: &Key, patch: &Value) {
    let stamped = cx
        .world
        .patch(Kind::RayCluster, key, patch, timeout(cx.config));
    match stamped.await {
        Ok(Written::Done | Written::Gone) => {}
        Ok(Written::Changed) | Err(_) => {
            tracing::warn!(namespace = %key.0, cluster = %key.1, "cannot stamp shared cluster");
            cx.metrics.error(Cause::ProvisionStamp);
        }
    }
}

#[cfg(test)]
#[path = "make_clusters/tests.rs"]
mod tests;
