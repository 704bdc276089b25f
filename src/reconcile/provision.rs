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

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::Value;

use crate::cause::Cause;
use crate::config::Config;
use crate::domain::cluster::ClusterInfo;
use crate::domain::events::{self, Event, ObjectRef, Regarding};
use crate::domain::labels;
use crate::domain::labels::Meta;
use crate::domain::reclaim;
use crate::domain::shared_cluster::provision::Refusal;
use crate::domain::shared_cluster::provision::{jobs_to_wake, wake_patch};
use crate::domain::shared_cluster::provision_step::{Seen, Step, created, step};
use crate::metrics::{KindLabel, Metrics};
use crate::world::kube::{KubeWorld, ray_cluster_resource, ray_job_resource};

use super::runner::{self, Failure, Reconciler, Schedule};
use super::{Key, is_conflict, is_not_found, reason};

/// Every stored job is looked at again this often (a create that failed, a missed event).
const RESYNC: Duration = Duration::from_secs(30);
/// A cluster this replica made is not made again before the cache shows it.
const MADE_RECENTLY: Duration = Duration::from_secs(10);
/// A cluster whose create failed (a quota, a policy) is tried again at most this long
/// after the last try: its jobs wait for it, and the quota may free at any moment.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Clusters looked at (and made) at once: a burst of new configs waits for one round
/// trip, not one per config. A cluster is never looked at twice at once (the runner).
const IN_FLIGHT: usize = 8;

fn timeout(config: &Config) -> Duration {
    Duration::from_millis(config.shared_clusters.create_timeout_ms)
}

/// The shared-cluster provisioner, as the runner drives it: every replica, several
/// clusters at once.
struct Provisioner {
    world: Arc<KubeWorld>,
    config: Arc<Config>,
    metrics: Arc<Metrics>,
    /// Clusters this replica made a moment ago (not made again before the cache shows them).
    made: std::sync::Mutex<HashMap<Key, Instant>>,
}

pub fn spawn(
    world: Arc<KubeWorld>,
    config: Arc<Config>,
    metrics: Arc<Metrics>,
    wakeups: tokio::sync::mpsc::UnboundedReceiver<Key>,
) -> tokio::task::JoinHandle<()> {
    let schedule = Schedule::every_replica(RESYNC, IN_FLIGHT, MAX_BACKOFF);
    let provisioner = Provisioner {
        world,
        config,
        metrics: metrics.clone(),
        made: Default::default(),
    };
    runner::spawn(Arc::new(provisioner), schedule, Some(wakeups), metrics)
}

impl Reconciler for Provisioner {
    fn kind(&self) -> &'static str {
        "SharedClusterProvision"
    }

    fn all(&self) -> Vec<Key> {
        selected_clusters(&self.world).into_iter().collect()
    }

    async fn reconcile(&self, key: &Key) -> Result<(), Failure> {
        look(&self.world, &self.config, &self.metrics, key, &self.made).await
    }

    fn passed(&self, metrics: &Metrics) {
        metrics.provision_passes.inc();
    }
}

fn selected_clusters(world: &KubeWorld) -> BTreeSet<Key> {
    world
        .stored_jobs()
        .iter()
        .filter_map(|job| {
            let cluster = labels::selected_cluster(&job.data)?;
            Some((job.namespace()?, cluster.to_string()))
        })
        .collect()
}

/// The stored, active jobs that select the cluster `key`, oldest first.
fn active_jobs(world: &KubeWorld, (ns, name): &Key) -> Vec<Value> {
    let mut jobs: Vec<Value> = world
        .stored_jobs()
        .iter()
        .filter(|j| j.namespace().as_deref() == Some(ns))
        .filter(|j| labels::selected_cluster(&j.data) == Some(name.as_str()))
        .filter_map(|j| serde_json::to_value(j.as_ref()).ok())
        .filter(|j| !reclaim::is_terminal(j))
        .collect();
    jobs.sort_by_key(created);
    jobs
}

async fn look(
    world: &KubeWorld,
    config: &Config,
    metrics: &Metrics,
    key: &Key,
    made: &std::sync::Mutex<HashMap<Key, Instant>>,
) -> Result<(), Failure> {
    let jobs = active_jobs(world, key);
    let (ns, name) = key;
    let cluster = world
        .cached_cluster(ns, name)
        .map(|c| ClusterInfo::from_value(&serde_json::to_value(c.as_ref()).unwrap_or_default()));
    let seen = Seen {
        jobs: &jobs,
        cluster: cluster.as_ref(),
        went_idle: world.went_idle(ns, name),
        made_recently: {
            let mut made = made.lock().expect("not poisoned");
            made.retain(|_, at| at.elapsed() < MADE_RECENTLY);
            made.contains_key(key)
        },
    };
    match step(&seen, config, Timestamp::now()) {
        Step::Nothing => {}
        Step::Stamp(patch) => stamp(world, config, metrics, key, &patch).await,
        Step::Refused(refused) => tell_refused(world, metrics, name, &refused),
        Step::Make {
            cluster,
            first_job,
            refused,
        } => {
            tell_refused(world, metrics, name, &refused);
            if make(world, config, metrics, key, &jobs, cluster, &first_job).await? {
                let mut made = made.lock().expect("not poisoned");
                made.insert(key.clone(), Instant::now());
            }
        }
    }
    Ok(())
}

/// Each job whose spec may not have the cluster made hears why.
fn tell_refused(world: &KubeWorld, metrics: &Metrics, cluster: &str, refused: &[(Value, Refusal)]) {
    for (job, why) in refused {
        let job_name = job["metadata"]["name"].as_str().unwrap_or_default();
        tracing::warn!(job = job_name, cluster, %why, "no shared cluster for this stored RayJob");
        metrics.error(Cause::ProvisionRefused);
        tell_jobs(
            world,
            std::slice::from_ref(job),
            cluster,
            &format!("this RayJob: {why}"),
        );
    }
}

/// Creates the cluster: whether it exists now; `Err` when the API server refused or did
/// not answer (retried with backoff).
async fn make(
    world: &KubeWorld,
    config: &Config,
    metrics: &Metrics,
    (ns, name): &Key,
    jobs: &[Value],
    cluster: Value,
    first_job: &str,
) -> Result<bool, Failure> {
    let digest = labels::get(&cluster, Meta::Annotations, labels::CONFIG_DIGEST)
        .unwrap_or_default()
        .to_string();
    let api: Api<DynamicObject> =
        Api::namespaced_with(world.client().clone(), ns, &ray_cluster_resource());
    let object: DynamicObject = match serde_json::from_value(cluster) {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(namespace = %ns, cluster = %name, error = %e, "shared cluster does not serialise");
            metrics.error(Cause::ProvisionRefused);
            return Ok(false);
        }
    };
    let started = Instant::now();
    match tokio::time::timeout(timeout(config), api.create(&PostParams::default(), &object)).await {
        Ok(Ok(created)) => {
            tracing::info!(namespace = %ns, cluster = %name, jobs = jobs.len(), "created shared cluster");
            wake(world, config, metrics, ns, jobs).await;
            let created = serde_json::to_value(created).unwrap_or_default();
            if let (Some(sink), Some(target)) = (world.events(), ObjectRef::of(&created)) {
                sink.record(Event {
                    regarding: Regarding::Stored(target),
                    warning: false,
                    reason: "Created",
                    action: "Provision",
                    note: events::cluster_created(&digest, first_job),
                });
            }
            metrics
                .created
                .get_or_create(&KindLabel { kind: "RayCluster" })
                .inc();
            metrics
                .provision_seconds
                .observe(started.elapsed().as_secs_f64());
            Ok(true)
        }
        Ok(Err(e)) if is_conflict(&e) => Ok(true),
        Ok(Err(e)) => {
            tell_jobs(world, jobs, name, &reason(&e));
            Err(Failure {
                cause: Cause::ProvisionCreate,
                error: format!("cannot create shared cluster: {e}").into(),
            })
        }
        Err(_) => {
            let why = "the API server did not answer in time";
            tell_jobs(world, jobs, name, why);
            Err(Failure {
                cause: Cause::ProvisionCreate,
                error: format!("cannot create shared cluster: {why}").into(),
            })
        }
    }
}

/// Touches each job that waited for the cluster just made, so KubeRay takes it up now
/// rather than after its retry delay (which grows with the wait, to 1,000 s).
async fn wake(world: &KubeWorld, config: &Config, metrics: &Metrics, ns: &str, jobs: &[Value]) {
    let made = Timestamp::now();
    let patch = wake_patch(made);
    let patch = Patch::Merge(&patch);
    let api: Api<DynamicObject> =
        Api::namespaced_with(world.client().clone(), ns, &ray_job_resource());
    let params = PatchParams::default();
    for job in jobs_to_wake(jobs, made) {
        let name = job["metadata"]["name"].as_str().unwrap_or_default();
        let call = api.patch(name, &params, &patch);
        match tokio::time::timeout(timeout(config), call).await {
            Ok(Ok(_)) => {
                tracing::info!(namespace = %ns, job = name, "woke a RayJob that waited for its cluster");
                metrics.jobs_woken.inc();
            }
            Ok(Err(e)) if is_not_found(&e) => {}
            Ok(Err(e)) => {
                tracing::warn!(namespace = %ns, job = name, error = %e, "cannot wake RayJob (KubeRay takes it up after its retry delay)");
                metrics.error(Cause::ProvisionWake);
            }
            Err(_) => metrics.error(Cause::ProvisionWake),
        }
    }
}

/// A warning Event on each job waiting for the cluster: KubeRay itself only says the
/// cluster is not found. Repeats fold into one series per job (see `EventSink`).
fn tell_jobs(world: &KubeWorld, jobs: &[Value], cluster: &str, why: &str) {
    let Some(sink) = world.events() else {
        return;
    };
    for target in jobs.iter().filter_map(ObjectRef::of) {
        sink.record(Event {
            regarding: Regarding::Stored(target),
            warning: true,
            reason: "SharedClusterNotMade",
            action: "Provision",
            note: events::cluster_not_made(cluster, why),
        });
    }
}

async fn stamp(
    world: &KubeWorld,
    config: &Config,
    metrics: &Metrics,
    (ns, name): &Key,
    patch: &Value,
) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(world.client().clone(), ns, &ray_cluster_resource());
    let (params, patch) = (PatchParams::default(), Patch::Merge(patch));
    match tokio::time::timeout(timeout(config), api.patch(name, &params, &patch)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) if is_not_found(&e) => {}
        Ok(Err(e)) => {
            tracing::warn!(namespace = %ns, cluster = %name, error = %e, "cannot stamp shared cluster");
            metrics.error(Cause::ProvisionStamp);
        }
        Err(_) => metrics.error(Cause::ProvisionStamp),
    }
}
