//! Records Kubernetes Events (`events.k8s.io/v1`) in the background: admission and the
//! reconcilers queue them and never wait. Like client-go's recorder, repeats of an event
//! within minutes become one event with a growing series count (kube's `Recorder`), and
//! each object gets at most a burst of 25 events, then one per 5 minutes.
//!
//! An event about an object being admitted is recorded only once the API server shows
//! that object stored, created after the admission: a dry run, a denied request or a
//! forged review records nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::events::{EventType, Recorder, Reporter};
use kube::{Client, ResourceExt};

use super::event_lookups::EventLookups;
use crate::domain::events::{Event, ObjectRef, Regarding};
use crate::metrics::{Metrics, ReasonLabel};

/// Events waiting to be recorded, and as many more being looked for; more are dropped
/// (and counted). Bounded both ways: a flood of forged reviews, whose objects are never
/// stored and are each looked for over 10 s, cannot grow memory.
const QUEUE: usize = 4096;
/// API calls in flight (lookups and publishes); the waits between lookups hold none.
const CALLS: usize = 16;
/// One lookup or publish.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Tries to find an admitted object, this far apart (it is stored after every webhook).
const FIND_AFTER: [Duration; 3] = [
    Duration::from_secs(1),
    Duration::from_secs(3),
    Duration::from_secs(10),
];
/// Per object: burst, and one more token per refill period (client-go's spam filter).
const BURST: f64 = 25.0;
const REFILL: Duration = Duration::from_secs(300);
/// Objects the spam filter remembers before it starts over.
const REMEMBERED: usize = 10_000;

#[derive(Clone)]
pub struct EventSink {
    tx: tokio::sync::mpsc::Sender<(Event, Instant, Timestamp)>,
    metrics: Arc<Metrics>,
}

impl EventSink {
    /// Starts the recorder on the current runtime; `instance` names this replica.
    pub fn start(client: Client, instance: String, metrics: Arc<Metrics>) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<(Event, Instant, Timestamp)>(QUEUE);
        let reporter = Reporter {
            controller: "rayshare".into(),
            instance: Some(instance),
        };
        let recorder = Recorder::new(client.clone(), reporter);
        let filter = Arc::new(std::sync::Mutex::new(SpamFilter::default()));
        let calls = Arc::new(tokio::sync::Semaphore::new(CALLS));
        let tasks = Arc::new(tokio::sync::Semaphore::new(QUEUE));
        let lookups = Arc::new(EventLookups::default());
        let m = metrics.clone();
        tokio::spawn(async move {
            while let Some((event, at, wall)) = rx.recv().await {
                // While all tasks are busy the queue fills, and `record` drops.
                let Ok(task) = tasks.clone().acquire_owned().await else {
                    return;
                };
                let (client, recorder, filter, m) =
                    (client.clone(), recorder.clone(), filter.clone(), m.clone());
                let (calls, lookups) = (calls.clone(), lookups.clone());
                tokio::spawn(async move {
                    let _task = task;
                    let shared = (calls.as_ref(), lookups.as_ref());
                    let found = resolve(&client, shared, &event.regarding, at, wall).await;
                    let Some(target) = found else {
                        dropped(&m, "not_stored");
                        return;
                    };
                    if !filter.lock().expect("not poisoned").allow(&target.uid) {
                        dropped(&m, "rate_limited");
                        return;
                    }
                    let Ok(_call) = calls.acquire().await else {
                        return;
                    };
                    publish(&recorder, &event, &target, &m).await;
                });
            }
        });
        Self { tx, metrics }
    }

    pub fn record(&self, event: Event) {
        // A forged review may name anything; no stored object has a name this long, so
        // such an event could never find its object, and it must not hold queue memory.
        if event.regarding.names().any(|n| n.len() > MAX_NAME) {
            dropped(&self.metrics, "bad_name");
            return;
        }
        if self
            .tx
            .try_send((event, Instant::now(), Timestamp::now()))
            .is_err()
        {
            dropped(&self.metrics, "queue_full");
        }
    }
}

/// Longest namespace, name or label selector an event may point at.
const MAX_NAME: usize = 512;

fn dropped(metrics: &Metrics, reason: &'static str) {
    metrics
        .events_dropped
        .get_or_create(&ReasonLabel { reason })
        .inc();
}

async fn publish(recorder: &Recorder, event: &Event, target: &ObjectRef, metrics: &Metrics) {
    let reference = ObjectReference {
        api_version: Some(target.api_version.clone()),
        kind: Some(target.kind.clone()),
        namespace: Some(target.namespace.clone()),
        name: Some(target.name.clone()),
        uid: Some(target.uid.clone()),
        ..Default::default()
    };
    let ev = kube::runtime::events::Event {
        type_: if event.warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: event.reason.as_str().into(),
        note: Some(event.note.clone()),
        action: event.action.into(),
        secondary: None,
    };
    let published = tokio::time::timeout(CALL_TIMEOUT, recorder.publish(&ev, &reference)).await;
    match published.unwrap_or_else(|_| Err(kube::Error::Service("timed out".into()))) {
        Ok(()) => {
            let reason = event.reason.as_str();
            metrics.events.get_or_create(&ReasonLabel { reason }).inc();
        }
        Err(e) => {
            tracing::debug!(error = %e, reason = event.reason.as_str(), object = %target.name, "cannot record an event");
            dropped(metrics, "api_error");
        }
    }
}

/// The stored object an event is about; for an admitted one, once it is stored.
async fn resolve(
    client: &Client,
    (calls, lookups): (&tokio::sync::Semaphore, &EventLookups),
    regarding: &Regarding,
    at: Instant,
    wall: Timestamp,
) -> Option<ObjectRef> {
    let (api_version, kind, namespace, name, selector) = match regarding {
        Regarding::Stored(r) => return Some(r.clone()),
        Regarding::Admitted {
            api_version,
            kind,
            namespace,
            name,
            selector,
        } => (*api_version, *kind, namespace, name, selector),
    };
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
    // Created after the admission (a second's slack for timestamps that are whole seconds).
    let fresh = |o: &PartialObjectMeta<DynamicObject>| {
        o.metadata
            .creation_timestamp
            .as_ref()
            .is_some_and(|t| t.0.as_second() + 1 >= wall.as_second())
    };
    // By name, else by a selector that only it matches.
    let by_name = match (name, selector) {
        (Some(name), _) => Ok(name),
        (None, Some(selector)) => Err(selector),
        (None, None) => return None,
    };
    for wait in FIND_AFTER {
        tokio::time::sleep_until(tokio::time::Instant::from_std(at + wait)).await;
        let _call = calls.acquire().await.ok()?;
        let lookup = async {
            match &by_name {
                // Its name and uid are all an event needs: metadata only, a fraction of
                // what a whole pod costs the API server to send (a slice has hundreds).
                Ok(name) => api.get_metadata_opt(name).await.ok().flatten(),
                Err(selector) => lookups.find(&api, (namespace, kind), selector).await,
            }
        };
        let found = tokio::time::timeout(CALL_TIMEOUT, lookup)
            .await
            .ok()
            .flatten();
        if let Some(o) = found.filter(fresh) {
            return Some(ObjectRef {
                api_version: api_version.into(),
                kind: kind.into(),
                namespace: namespace.clone(),
                name: o.name_any(),
                uid: o.uid()?,
            });
        }
    }
    None
}

/// Per object uid: tokens left and when last refilled.
#[derive(Default)]
struct SpamFilter(HashMap<String, (f64, Instant)>);

impl SpamFilter {
    fn allow(&mut self, uid: &str) -> bool {
        if self.0.len() >= REMEMBERED {
            self.0.clear();
        }
        let now = Instant::now();
        let (tokens, last) = self.0.entry(uid.to_string()).or_insert((BURST, now));
        let refill = now.duration_since(*last).as_secs_f64() / REFILL.as_secs_f64();
        *tokens = (*tokens + refill).min(BURST);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_gets_a_burst_then_waits() {
        let mut f = SpamFilter::default();
        let allowed = (0..40).filter(|_| f.allow("u1")).count();
        assert_eq!(allowed, 25);
        assert!(f.allow("u2"), "another object has its own budget");
    }
}
