//! The start table: every controller, one row each. `start` runs the enabled ones,
//! each in its own task on its own plan; the caches wake each through its `trigger`; a
//! leader-only one passes only while this replica holds the lease (one task holds it).
//! Shutdown stops them as one list, then gives the lease up.

use std::sync::Arc;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::controller::{Bound, Controller, Plan, Runs};
use super::elector::{self, Election, RELEASE_TIMEOUT};
use super::make_clusters::MakeClusters;
use super::make_groups::MakeGroups;
use super::orphan_claims::OrphanClaims;
use super::orphan_groups::OrphanGroups;
use super::reclaim::Reclaim;
use super::runner::{self, Schedule};
use super::stop_jobs::StopJobs;
use super::suspended::Suspended;
use super::wake_on_ready::WakeOnReady;
use super::warm_ahead::WarmAhead;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::world::background::Key;
use crate::world::kube::KubeWorld;
use crate::world::watch::{Publish, WatchEvent};

/// One controller, as the table starts it.
pub struct Row {
    pub kind: &'static str,
    pub plan: fn(&Config) -> Option<Plan>,
    pub trigger: fn(&WatchEvent) -> Option<Key>,
    spawn: Spawn,
}

/// What the controller's context borrows.
type Shared = (Arc<KubeWorld>, Arc<Config>, Arc<Metrics>);
type Spawn = fn(Shared, Schedule, UnboundedReceiver<Key>) -> JoinHandle<()>;

fn row<C: Controller<KubeWorld>>() -> Row {
    Row {
        kind: C::KIND,
        plan: C::plan,
        trigger: C::trigger,
        spawn: |(world, config, metrics), schedule, wakeups| {
            let bound = Bound {
                controller: C::new(&config),
                world,
                config,
                metrics: metrics.clone(),
                memo: Default::default(),
            };
            runner::spawn(Arc::new(bound), schedule, Some(wakeups), metrics)
        },
    }
}

/// Every controller rayshare has.
pub fn table() -> [Row; 9] {
    [
        row::<MakeClusters>(),
        row::<MakeGroups>(),
        row::<Reclaim>(),
        row::<OrphanGroups>(),
        row::<OrphanClaims>(),
        row::<StopJobs>(),
        row::<Suspended>(),
        row::<WakeOnReady>(),
        row::<WarmAhead>(),
    ]
}

/// The running controllers, and the task holding the lease.
#[derive(Default)]
pub struct Started {
    tasks: Vec<JoinHandle<()>>,
    leader: Option<(watch::Sender<bool>, JoinHandle<()>)>,
    /// Holds the controllers' wake-up senders while they run, whichever watches run: a
    /// controller whose wake-ups all went would stop.
    publish: Option<Publish>,
}

impl Started {
    /// At shutdown: stops every controller (a draining replica no longer acts as leader
    /// or provisioner), then gives the lease up, so another replica leads at once, not
    /// when it expires.
    pub async fn stop(self) {
        let Self {
            tasks,
            leader,
            publish,
        } = self;
        for task in tasks {
            task.abort();
        }
        // The caches may still publish: to no one now.
        drop(publish);
        if let Some((stop, mut task)) = leader {
            let _ = stop.send(true);
            if tokio::time::timeout(RELEASE_TIMEOUT, &mut task)
                .await
                .is_err()
            {
                task.abort();
            }
        }
    }
}

/// A controller's trigger and where its wake-ups go.
type Wake = (fn(&WatchEvent) -> Option<Key>, UnboundedSender<Key>);

fn publisher(wakes: Vec<Wake>) -> Publish {
    Arc::new(move |event: &WatchEvent| {
        for (trigger, wake) in &wakes {
            if let Some(key) = trigger(event) {
                let _ = wake.send(key);
            }
        }
    })
}

/// Starts the world (its caches publishing to the controllers' triggers), then every
/// controller `config` enables.
pub fn start(
    world: impl FnOnce(Publish) -> Arc<KubeWorld>,
    config: Arc<Config>,
    metrics: Arc<Metrics>,
    election: Election,
) -> (Arc<KubeWorld>, Started) {
    let enabled: Vec<(Row, Plan)> = table()
        .into_iter()
        .filter_map(|row| Some(((row.plan)(&config)?, row)))
        .map(|(plan, row)| (row, plan))
        .collect();
    let mut wakes = Vec::new();
    let mut receivers = Vec::new();
    for (row, _) in &enabled {
        let (tx, rx) = unbounded_channel();
        wakes.push((row.trigger, tx));
        receivers.push(rx);
    }
    let publish = publisher(wakes);
    let world = world(publish.clone());
    let leads = enabled
        .iter()
        .any(|(_, plan)| plan.runs == Runs::WhileLeading);
    let mut started = Started {
        publish: Some(publish),
        ..Started::default()
    };
    let (leading_tx, leading) = watch::channel(false);
    // Which end of a group the index blocks are opened from follows the lease.
    world.follow_leadership(leading.clone());
    if leads {
        let (stop_tx, stop) = watch::channel(false);
        let client = world.background_client().clone();
        let lead = elector::lead(client, election, leading_tx, metrics.clone(), stop);
        started.leader = Some((stop_tx, tokio::spawn(lead)));
    }
    for ((row, plan), wakeups) in enabled.into_iter().zip(receivers) {
        let schedule = match plan.runs {
            Runs::EveryReplica {
                concurrency,
                max_backoff,
            } => Schedule::every_replica(plan.resync, concurrency, max_backoff),
            Runs::WhileLeading => Schedule::while_leading(plan.resync, leading.clone()),
        };
        tracing::debug!(kind = row.kind, "controller started");
        let shared = (world.clone(), config.clone(), metrics.clone());
        started.tasks.push((row.spawn)(shared, schedule, wakeups));
    }
    (world, started)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Alerts and the dashboard select on these (`rayshare_reconcile_passes_total{kind}`).
    #[test]
    fn the_kinds_stay_what_the_alerts_know() {
        let kinds = table().map(|row| row.kind);
        let known = [
            "SharedClusterProvision",
            "PodGroupProvision",
            "RayCluster",
            "PodGroup",
            "IndexClaim",
            "RayJobStop",
            "SharedClusterSuspended",
            "SharedClusterReady",
            "SharedClusterWarm",
        ];
        assert_eq!(kinds, known);
    }

    /// Each event wakes each controller its trigger names, with the key it names.
    #[test]
    fn the_publisher_wakes_the_controllers_an_event_concerns() {
        let rows = table();
        let mut receivers = Vec::new();
        let wakes = rows
            .iter()
            .map(|row| {
                let (tx, rx) = unbounded_channel();
                receivers.push((row.kind, rx));
                (row.trigger, tx)
            })
            .collect();
        let publish = publisher(wakes);
        let cluster = ("ns".to_string(), "c".to_string());
        publish(&WatchEvent::RayJob {
            change: crate::world::watch::Change::Deleted,
            cluster: cluster.clone(),
            over: false,
        });
        let woken: Vec<_> = receivers
            .iter_mut()
            .filter_map(|(kind, rx)| Some((*kind, rx.try_recv().ok()?)))
            .collect();
        let expected = [
            ("SharedClusterProvision", cluster.clone()),
            ("RayJobStop", cluster),
        ];
        assert_eq!(woken, expected);
    }

    #[test]
    fn the_default_config_starts_every_controller_but_none_when_all_is_off() {
        let config = Config::default();
        let on: Vec<_> = table()
            .into_iter()
            .filter(|row| (row.plan)(&config).is_some())
            .map(|row| row.kind)
            .collect();
        assert_eq!(on.len(), 8, "{on:?}");
        let mut off = Config::default();
        off.shared_clusters.enabled = false;
        off.pod_groups.enabled = false;
        off.indices.enabled = false;
        assert!(table().iter().all(|row| (row.plan)(&off).is_none()));
    }
}
