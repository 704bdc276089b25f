//! Makes the Volcano PodGroups of stored pods, on every replica.
//!
//! Admission names the group on the pod and labels it; the group is made here from the
//! pod the API server stored (`domain::stored_pod_group`), so a forged review holds no
//! queue capacity. Creations are idempotent; a group left by an earlier pod of the same
//! name is brought up to date for the new one, never one a live pod still uses.

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::controller::{Controller, Cx, Plan};
use super::runner::{self, Failure};
use crate::cause::Cause;
use crate::config::Config;
use crate::domain::events::{self, Event, ObjectRef, Reason, Regarding};
use crate::domain::stored_pod_group::{self, Existing};
use crate::domain::time;
use crate::metrics::KindLabel;
use crate::world::background::{Key, Kind, Written};
use crate::world::watch::{Change, WatchEvent};
use crate::world::{Background, Created, WorldError};

/// The PodGroup provisioner: every replica, several pods at once (a burst of pods is a
/// burst of creates). A pod (by uid) whose group is settled is not looked at again.
pub struct MakeGroups;

impl<W: Background> Controller<W> for MakeGroups {
    const KIND: &'static str = "PodGroupProvision";

    fn plan(config: &Config) -> Option<Plan> {
        // Stored pods are looked at again each 30 s (a failed create, a missed event).
        let on = config.pod_groups.enabled;
        Plan::every_replica(on, Duration::from_secs(30), 16, runner::MAX_BACKOFF)
    }

    fn trigger(event: &WatchEvent) -> Option<Key> {
        match event {
            WatchEvent::Pod {
                change: Change::Listed | Change::Applied,
                key,
            } => Some(key.clone()),
            _ => None,
        }
    }

    fn new(_: &Config) -> Self {
        Self
    }

    fn keys(&self, cx: &Cx<'_, W>) -> Vec<Key> {
        let pods = cx.world.stored_pods();
        let live: HashSet<&str> = pods.iter().map(|(_, uid)| uid.as_str()).collect();
        cx.memo.keep(|uid| live.contains(uid));
        pods.into_iter().map(|(key, _)| key).collect()
    }

    async fn reconcile(&self, cx: &Cx<'_, W>, (ns, name): &Key) -> Result<(), Failure> {
        let Some(pod) = cx.world.stored_pod(ns, name) else {
            return Ok(());
        };
        let uid = pod["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if cx.memo.noted(&uid) {
            return Ok(());
        }
        if look(cx, &pod, ns, &uid).await {
            cx.memo.note(uid);
        }
        Ok(())
    }
}

/// `true` once the pod's group is settled (made, found, or refused for good).
async fn look<W: Background>(cx: &Cx<'_, W>, pod: &Value, ns: &str, uid: &str) -> bool {
    if stored_pod_group::pod_done(pod) {
        return true;
    }
    let config = &cx.config;
    let queue = cx.world.namespace_queue(ns);
    let cfg = &config.pod_groups;
    let opt_out = &config.opt_out_annotation;
    let Some(group) = stored_pod_group::group_for(pod, queue.as_deref(), cfg, opt_out) else {
        return true;
    };
    let name = group["metadata"]["name"].as_str().unwrap_or_default();
    let pod_name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let age = time::parse_time(&pod["metadata"]["creationTimestamp"])
        .map(|created| time::elapsed(Timestamp::now(), created));
    let admitted_here = cx.world.admitted_here(ns, name);
    if stored_pod_group::leave_to_admitter(cfg, admitted_here, age) {
        // Not settled here: the next pass looks again, past the grace if need be.
        tracing::trace!(namespace = %ns, group = %name, pod = %pod_name, "left to the replica that admitted it");
        return false;
    }
    let timeout = Duration::from_millis(cfg.create_timeout_ms);
    let group_key = (ns.to_string(), name.to_string());
    // What the pod's owner sees: the group its pod is in, whichever step made it.
    let created = || {
        if let Some(target) = pod_ref(pod) {
            let queue = group["spec"]["queue"].as_str().unwrap_or_default();
            let priority = group["spec"]["priorityClassName"].as_str();
            cx.world.record(Event {
                regarding: Regarding::Stored(target),
                warning: false,
                reason: Reason::PodGroupCreated,
                action: "Provision",
                note: events::pod_group_created(name, queue, priority),
            });
        }
    };
    // Another replica's pod, past the grace: most likely its admitter took the group up
    // already, which one read says (a create would be refused, then read).
    if stored_pod_group::made_elsewhere(cfg, admitted_here) {
        match cx.world.get(Kind::PodGroup, &group_key, timeout).await {
            Ok(Some(found)) => {
                return take_up(cx, &found, uid, &group_key, (&group, timeout), created).await;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(namespace = %ns, group = %name, error = %e, "cannot read PodGroup (retried)");
                cx.metrics.error(e.cause());
                return false;
            }
        }
    }
    match cx.world.create(&group, timeout).await {
        Ok(Created::Created) => {
            tracing::info!(namespace = %ns, group = %name, pod = %pod_name, "created PodGroup");
            created();
            let kind = "PodGroup";
            cx.metrics.created.get_or_create(&KindLabel { kind }).inc();
            true
        }
        Ok(Created::Exists(found)) => {
            take_up(cx, &found, uid, &group_key, (&group, timeout), created).await
        }
        Err(e) => {
            tracing::warn!(namespace = %ns, group = %name, error = %e, "cannot create PodGroup (retried)");
            cx.metrics.error(e.cause());
            false
        }
    }
}

/// What the provisioner does with a group of that name found in place: `true` once
/// settled.
async fn take_up<W: Background>(
    cx: &Cx<'_, W>,
    found: &Value,
    uid: &str,
    key: &Key,
    (group, timeout): (&Value, Duration),
    created: impl Fn(),
) -> bool {
    let live = cx.world.stored_pods();
    let alive = |other: &str| live.iter().any(|(_, uid)| uid == other);
    match stored_pod_group::existing(found, uid, alive) {
        Existing::Ours => true,
        Existing::TakeUp => {
            let taken = adopt(cx, false, key, group, timeout).await;
            if taken {
                created();
            }
            taken
        }
        Existing::Adopt => adopt(cx, true, key, group, timeout).await,
        Existing::Foreign => {
            tracing::warn!(namespace = %key.0, group = %key.1, "a PodGroup of that name exists that is not this pod's; left alone");
            cx.metrics.error(Cause::NameConflict);
            true
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
async fn adopt<W: Background>(
    cx: &Cx<'_, W>,
    reused: bool,
    key: &Key,
    group: &Value,
    timeout: Duration,
) -> bool {
    let patch = stored_pod_group::update_patch(group, Timestamp::now());
    match cx.world.patch(Kind::PodGroup, key, &patch, timeout).await {
        Ok(Written::Done) => {
            if reused {
                let kind = "PodGroup";
                cx.metrics.reused.get_or_create(&KindLabel { kind }).inc();
            }
            true
        }
        Err(WorldError::Timeout) => false,
        failed => {
            let error = failed.map_or_else(|e| e.reason(), |w| format!("{w:?}"));
            tracing::warn!(namespace = %key.0, group = %key.1, %error, "cannot update PodGroup (retried)");
            cx.metrics.error(Cause::ApiError);
            false
        }
    }
}

#[cfg(test)]
#[path = "make_groups/tests.rs"]
mod tests;
