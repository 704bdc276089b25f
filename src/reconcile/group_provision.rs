//! Makes the Volcano PodGroups of stored pods, on every replica.
//!
//! Admission names the group on the pod and labels it; the group is made here from the
//! pod the API server stored (`domain::stored_pod_group`), so a forged review holds no
//! queue capacity. Creations are idempotent; a group left by an earlier pod of the same
//! name is brought up to date for the new one, never one a live pod still uses.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::cause::Cause;
use crate::config::Config;
use crate::domain::events::{self, Event, ObjectRef, Regarding};
use crate::domain::stored_pod_group::{self, Existing};
use crate::metrics::{KindLabel, Metrics};
use crate::world::kube::{KubeWorld, pod_group_resource};
use crate::world::{Created, World};

use super::Key;
use super::runner::{self, Failure, Reconciler, Schedule};

/// Stored pods are looked at again this often (a create that failed, a missed event).
const RESYNC: Duration = Duration::from_secs(30);
/// Creates in flight at once.
const IN_FLIGHT: usize = 16;

/// The PodGroup provisioner, as the runner drives it: every replica, several pods at
/// once (a burst of pods is a burst of creates).
struct GroupProvisioner {
    world: Arc<KubeWorld>,
    config: Arc<Config>,
    metrics: Arc<Metrics>,
    /// Pods (by uid) whose group is settled are not looked at again.
    done: Mutex<HashSet<String>>,
}

pub fn spawn(
    world: Arc<KubeWorld>,
    config: Arc<Config>,
    metrics: Arc<Metrics>,
    wakeups: UnboundedReceiver<Key>,
) -> tokio::task::JoinHandle<()> {
    let schedule = Schedule::every_replica(RESYNC, IN_FLIGHT, runner::MAX_BACKOFF);
    let provisioner = GroupProvisioner {
        world,
        config,
        metrics: metrics.clone(),
        done: Default::default(),
    };
    runner::spawn(Arc::new(provisioner), schedule, Some(wakeups), metrics)
}

impl Reconciler for GroupProvisioner {
    fn kind(&self) -> &'static str {
        "PodGroupProvision"
    }

    fn all(&self) -> Vec<Key> {
        let pods = self.world.stored_pods();
        let live: BTreeSet<String> = pods.iter().filter_map(|p| p.uid()).collect();
        self.done
            .lock()
            .expect("not poisoned")
            .retain(|uid| live.contains(uid));
        pods.iter()
            .filter_map(|p| Some((p.namespace()?, p.name_any())))
            .collect()
    }

    async fn reconcile(&self, (ns, name): &Key) -> Result<(), Failure> {
        let Some(pod) = self.world.stored_pod(ns, name) else {
            return Ok(());
        };
        let uid = pod.uid().unwrap_or_default();
        if self.done.lock().expect("not poisoned").contains(&uid) {
            return Ok(());
        }
        if look(&self.world, &self.config, &self.metrics, &pod).await {
            self.done.lock().expect("not poisoned").insert(uid);
        }
        Ok(())
    }

    fn passed(&self, metrics: &Metrics) {
        metrics.provision_passes.inc();
    }
}

/// `true` once the pod's group is settled (made, found, or refused for good).
async fn look(
    world: &KubeWorld,
    config: &Config,
    metrics: &Metrics,
    pod: &k8s_openapi::api::core::v1::Pod,
) -> bool {
    let Ok(value) = serde_json::to_value(pod) else {
        return true;
    };
    if stored_pod_group::pod_done(&value) {
        return true;
    }
    let ns = pod.namespace().unwrap_or_default();
    let queue = world.namespace_queue(&ns);
    let Some(group) = stored_pod_group::group_for(
        &value,
        queue.as_deref(),
        &config.pod_groups,
        &config.opt_out_annotation,
    ) else {
        return true;
    };
    let name = group["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let uid = pod.uid().unwrap_or_default();
    let timeout = Duration::from_millis(config.pod_groups.create_timeout_ms);
    // What the pod's owner sees: the group its pod is in, whichever step made it.
    let created = || {
        if let (Some(sink), Some(target)) = (world.events(), pod_ref(&value)) {
            let queue = group["spec"]["queue"].as_str().unwrap_or_default();
            let priority = group["spec"]["priorityClassName"].as_str();
            sink.record(Event {
                regarding: Regarding::Stored(target),
                warning: false,
                reason: "PodGroupCreated",
                action: "Provision",
                note: events::pod_group_created(&name, queue, priority),
            });
        }
    };
    match world.create(&group, timeout).await {
        Ok(Created::Created) => {
            tracing::info!(namespace = %ns, group = %name, pod = %pod.name_any(), "created PodGroup");
            created();
            metrics
                .created
                .get_or_create(&KindLabel { kind: "PodGroup" })
                .inc();
            true
        }
        Ok(Created::Exists(found)) => {
            let alive = |other: &str| {
                world
                    .stored_pods()
                    .iter()
                    .any(|p| p.uid().as_deref() == Some(other))
            };
            match stored_pod_group::existing(&found, &uid, alive) {
                Existing::Ours => true,
                Existing::TakeUp => {
                    let taken = adopt(world, metrics, false, &ns, &name, &group, timeout).await;
                    if taken {
                        created();
                    }
                    taken
                }
                Existing::Adopt => adopt(world, metrics, true, &ns, &name, &group, timeout).await,
                Existing::Foreign => {
                    tracing::warn!(namespace = %ns, group = %name, pod = %pod.name_any(), "a PodGroup of that name exists that is not this pod's; left alone");
                    metrics.error(Cause::NameConflict);
                    true
                }
            }
        }
        Err(e) => {
            tracing::warn!(namespace = %ns, group = %name, error = %e, "cannot create PodGroup (retried)");
            metrics.error(e.cause());
            false
        }
    }
}

/// A pod read from the watch has no apiVersion/kind of its own.
fn pod_ref(pod: &Value) -> Option<ObjectRef> {
    let mut pod = pod.clone();
    pod["apiVersion"] = json!("v1");
    pod["kind"] = json!("Pod");
    ObjectRef::of(&pod)
}

/// Brings rayshare's group, made at admission or left by an earlier pod of the same name,
/// up to date for the stored pod (the latter counted as a reuse).
async fn adopt(
    world: &KubeWorld,
    metrics: &Metrics,
    reused: bool,
    ns: &str,
    name: &str,
    group: &Value,
    timeout: Duration,
) -> bool {
    let patch = stored_pod_group::update_patch(group, Timestamp::now());
    let api: Api<DynamicObject> =
        Api::namespaced_with(world.client().clone(), ns, &pod_group_resource());
    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
    match tokio::time::timeout(timeout, api.patch(name, &params, &patch)).await {
        Ok(Ok(_)) => {
            if reused {
                metrics
                    .reused
                    .get_or_create(&KindLabel { kind: "PodGroup" })
                    .inc();
            }
            true
        }
        Ok(Err(e)) => {
            tracing::warn!(namespace = %ns, group = %name, error = %e, "cannot update PodGroup (retried)");
            metrics.error(Cause::ApiError);
            false
        }
        Err(_) => false,
    }
}
