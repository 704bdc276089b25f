//! Kubernetes Events rayshare records, read back as `kubectl describe` shows them.

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};

use crate::harness::*;

/// (reason, note) of the events about object `name` in the test's namespace.
pub async fn events_on(env: &TestEnv, name: &str) -> Vec<(String, String)> {
    let events: Api<Event> = Api::namespaced(env.admin.clone(), &env.ns);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter(|e| e.reporting_controller.as_deref() == Some("rayshare"))
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

/// Waits for rayshare's event `reason` on object `name`; returns its note.
pub async fn wait_event(env: &TestEnv, name: &str, reason: &str) -> String {
    let what = format!("event {reason} on {name}");
    wait_for(&what, || async {
        events_on(env, name)
            .await
            .into_iter()
            .find(|(r, _)| r == reason)
            .map(|(_, note)| note)
    })
    .await
}
