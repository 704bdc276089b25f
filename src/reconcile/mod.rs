//! Background work. The provisioners (`provision`, `group_provision`) run on every
//! replica and create what stored objects need (idempotent: the API server's name
//! uniqueness settles races). The rest run on the leader only (see `leader`): they delete
//! what rayshare created for objects that never appeared or are gone, reclaim idle
//! clusters, stop the Ray jobs of deleted RayJobs and tell the RayJobs a suspended shared
//! cluster cut off. Every one of them runs in the same
//! loop (`runner`): wake-ups and resyncs, per-key backoff, a span per look, pass metrics.

pub(crate) mod clusters;
pub(crate) mod cut_off;
pub(crate) mod group_provision;
pub(crate) mod index_claims;
pub(crate) mod leader;
pub(crate) mod pod_groups;
pub(crate) mod provision;
pub(crate) mod runner;
pub(crate) mod stop_jobs;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Preconditions};
use kube::core::ApiResource;

use crate::cause::Cause;
use crate::config::Config;
use crate::metrics::{KindLabel, Metrics};
use crate::world::kube::KubeWorld;
pub use crate::world::kube::calls::{is_conflict, is_forbidden, is_not_found, reason};

pub const LEASE_NAME: &str = "rayshare-reconciler";

pub struct Election {
    pub namespace: String,
    pub identity: String,
    /// How long a leader's lease lasts without renewal (takeover time after a crash).
    pub lease: Duration,
}

/// (namespace, name) of what a provisioner should look at.
pub type Key = (String, String);

/// A resync interval that does not burst after a slow look.
pub fn resync_every(period: Duration) -> tokio::time::Interval {
    let mut resync = tokio::time::interval(period);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    resync
}

/// Lists in pages of 500, handing each item to `each` as its page arrives, so a large
/// cluster is never fetched (or held) in one piece.
pub async fn for_each_page<T, F, Fut>(
    params: ListParams,
    mut page: F,
    mut each: impl FnMut(T),
) -> Result<(), kube::Error>
where
    F: FnMut(ListParams) -> Fut,
    Fut: Future<Output = Result<kube::core::ObjectList<T>, kube::Error>>,
    T: Clone,
{
    let mut params = params.limit(500);
    loop {
        let list = page(params.clone()).await?;
        list.items.into_iter().for_each(&mut each);
        match list.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(()),
        }
        // A long pass shares its runtime with the watches and the lease renewal.
        tokio::task::yield_now().await;
    }
}

/// Every item, collected (for lists that stay small: rayshare's own objects).
pub async fn list_all<T, F, Fut>(params: ListParams, page: F) -> Result<Vec<T>, kube::Error>
where
    F: FnMut(ListParams) -> Fut,
    Fut: Future<Output = Result<kube::core::ObjectList<T>, kube::Error>>,
    T: Clone,
{
    let mut items = Vec::new();
    for_each_page(params, page, |item| items.push(item)).await?;
    Ok(items)
}

/// All objects' metadata matching `params`, page by page.
pub async fn list_metadata<K>(
    api: &Api<K>,
    params: ListParams,
) -> Result<Vec<kube::core::PartialObjectMeta<K>>, kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug + kube::Resource,
{
    list_all(params, |p| async move { api.list_metadata(&p).await }).await
}

/// Deletes an object only if it is still exactly the one we looked at (uid and
/// resourceVersion preconditions: a concurrent refresh makes the delete fail).
pub async fn delete_exact(
    client: &Client,
    resource: &ApiResource,
    object: &ObjectMeta,
    kind: &'static str,
    reason: &str,
    metrics: &Metrics,
) {
    let (Some(ns), Some(name)) = (&object.namespace, &object.name) else {
        return;
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, resource);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: object.uid.clone(),
            resource_version: object.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => {
            tracing::info!(kind, namespace = %ns, name = %name, reason, "deleted");
            metrics.deleted.get_or_create(&KindLabel { kind }).inc();
        }
        Err(e) if is_not_found(&e) || is_conflict(&e) => {}
        Err(e) => {
            tracing::warn!(kind, namespace = %ns, name = %name, error = %e, "delete failed");
            metrics.error(Cause::ReconcileDelete);
        }
    }
}

/// The reconcilers' tasks, and the one holding the lease.
#[derive(Default)]
pub struct Reconcilers {
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
    leader: Option<(
        tokio::sync::watch::Sender<bool>,
        tokio::task::JoinHandle<()>,
    )>,
}

impl Reconcilers {
    /// At shutdown: stops every reconciler (a draining replica no longer acts as leader),
    /// then gives the lease up, so another replica leads at once, not when it expires.
    pub async fn stop(self) {
        for task in self.tasks {
            task.abort();
        }
        if let Some((stop, task)) = self.leader {
            let _ = stop.send(true);
            let mut task = task;
            if tokio::time::timeout(RELEASE_TIMEOUT, &mut task)
                .await
                .is_err()
            {
                task.abort();
            }
        }
    }
}

/// Longest a shutdown waits for the lease to be given up.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(3);

/// Runs the enabled reconcilers, each in its own task on its own schedule, a pass only
/// while this replica leads (one task holds the lease). `stops` wakes the job stopper
/// (`None`: it does not run).
pub fn spawn_all(
    world: Arc<KubeWorld>,
    client: Client,
    config: Arc<Config>,
    metrics: Arc<Metrics>,
    election: Election,
    stops: Option<tokio::sync::mpsc::UnboundedReceiver<Key>>,
) -> Reconcilers {
    let stops = stops.filter(|_| config.shared_clusters.stop_jobs.enabled);
    let every = |enabled: bool, secs: u64| enabled.then(|| Duration::from_secs(secs.max(1)));
    let schedules = [
        every(
            config.pod_groups.enabled,
            config.pod_groups.reconcile_interval_seconds,
        ),
        every(
            config.indices.enabled,
            config.indices.reconcile_interval_seconds,
        ),
        every(
            config.reclaim.enabled && config.shared_clusters.enabled,
            config.reclaim.interval_seconds,
        ),
    ];
    if schedules.iter().all(Option::is_none) && stops.is_none() && !config.shared_clusters.enabled {
        return Reconcilers::default();
    }
    let (leading_tx, leading) = tokio::sync::watch::channel(false);
    world.follow_leadership(leading.clone());
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let leader = tokio::spawn(lead(
        client.clone(),
        election,
        leading_tx,
        metrics.clone(),
        stop,
    ));
    let mut tasks = Vec::new();
    if config.shared_clusters.enabled {
        let every = Duration::from_secs(config.shared_clusters.stop_jobs.interval_seconds.max(1));
        let (w, c, m) = (world.clone(), config.clone(), metrics.clone());
        tasks.push(cut_off::spawn(w, c, m, every, leading.clone()));
    }
    if let Some(stops) = stops {
        let (c, m) = (config.clone(), metrics.clone());
        tasks.push(stop_jobs::spawn(
            world.clone(),
            client.clone(),
            c,
            m,
            stops,
            leading.clone(),
        ));
    }
    // The leader's sweeps, each a pass over everything of its kind.
    let [pod_groups, index_claims, clusters] = schedules;
    let schedule = |every| runner::Schedule::while_leading(every, leading.clone());
    let ctx = (client, config, metrics.clone(), world);
    if let Some(every) = pod_groups {
        let ctx = ctx.clone();
        let pass = move || {
            let (client, config, metrics, _) = ctx.clone();
            async move {
                let cfg = &config.pod_groups;
                pod_groups::pass(&client, cfg, &config.instance, &metrics).await
            }
        };
        tasks.push(sweep("PodGroup", pass, schedule(every), &metrics));
    }
    if let Some(every) = index_claims {
        let ctx = ctx.clone();
        let pass = move || {
            let (client, config, metrics, _) = ctx.clone();
            async move { index_claims::pass(&client, &config.indices, &config.instance, &metrics).await }
        };
        tasks.push(sweep("IndexClaim", pass, schedule(every), &metrics));
    }
    if let Some(every) = clusters {
        let pass = move || {
            let (client, config, metrics, world) = ctx.clone();
            async move { clusters::pass(&client, &config, &metrics, world.events()).await }
        };
        tasks.push(sweep("RayCluster", pass, schedule(every), &metrics));
    }
    Reconcilers {
        tasks,
        leader: Some((stop_tx, leader)),
    }
}

/// Runs `pass` as a sweep named `kind` (its name in `rayshare_reconcile_passes`).
fn sweep<F, Fut>(
    kind: &'static str,
    pass: F,
    schedule: runner::Schedule,
    metrics: &Arc<Metrics>,
) -> tokio::task::JoinHandle<()>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), kube::Error>> + Send,
{
    let sweep = Arc::new(runner::Sweep { kind, pass });
    runner::spawn(sweep, schedule, None, metrics.clone())
}

/// Holds (or tries to take) the lease, telling the reconcilers whether they lead. A
/// standby watches the lease, so one given up is taken at once; `stop` gives it up.
async fn lead(
    client: Client,
    election: Election,
    leading: tokio::sync::watch::Sender<bool>,
    metrics: Arc<Metrics>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};

    let elector = leader::Elector::new(
        client.clone(),
        &election.namespace,
        LEASE_NAME,
        &election.identity,
        election.lease,
    );
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client, &election.namespace);
    let only_ours = watcher::Config::default().fields(&format!("metadata.name={LEASE_NAME}"));
    let changes = watcher(leases, only_ours).default_backoff();
    let mut changes = std::pin::pin!(changes);
    let mut tick = tokio::time::interval(election.lease / 3);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            // The holder renewed or released it: a standby looks now.
            Some(_) = changes.next(), if !*leading.borrow() => {}
            _ = stop.changed() => {
                leading.send_replace(false);
                metrics.set_leading(false);
                match tokio::time::timeout(RELEASE_TIMEOUT, elector.release()).await {
                    Ok(Ok(())) => tracing::info!("reconciler lease released"),
                    Ok(Err(e)) => tracing::warn!(error = %e, "cannot release the reconciler lease"),
                    Err(_) => tracing::warn!("releasing the reconciler lease timed out"),
                }
                return;
            }
        }
        // Bounded well inside the lease: a hung call must end this replica's lead before
        // another replica may take the expired lease.
        let attempt = tokio::time::timeout(election.lease / 3, elector.try_lead()).await;
        let (now_leading, error) = match attempt {
            Ok(Ok(leading)) => (leading, None),
            Ok(Err(e)) => (false, Some(e.to_string())),
            Err(_) => (false, Some("timed out".to_string())),
        };
        if let Some(error) = error {
            tracing::warn!(%error, "leader election failed");
            metrics.error(Cause::LeaderElection);
        }
        leading.send_if_modified(|l| {
            let changed = *l != now_leading;
            if changed {
                tracing::info!(leading = now_leading, "reconciler leadership changed");
                metrics.set_leading(now_leading);
            }
            *l = now_leading;
            changed
        });
    }
}
