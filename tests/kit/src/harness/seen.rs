//! A watch's record: what happened to the objects of one resource in one namespace, and
//! when it was seen, for bounds on a controller's timing without polling's granularity.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::TryStreamExt;
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};

/// What a watch on the objects of one namespace saw, and when, from its start on.
#[derive(Clone, Default)]
pub struct Seen(Arc<Mutex<Vec<Watched>>>);

/// When, which event (`ADDED`, `MODIFIED`, `DELETED`), and the object as it then was.
type Watched = (Instant, &'static str, DynamicObject);

impl Seen {
    /// Starts watching the objects of `api` (from the list's resourceVersion, so
    /// nothing made after this call is missed).
    pub async fn watch(api: &Api<DynamicObject>) -> Self {
        let rv = api
            .list(&ListParams::default())
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap();
        let events = api
            .watch(&WatchParams::default(), &rv)
            .await
            .expect("watching objects");
        let seen = Self::default();
        let log = seen.clone();
        tokio::spawn(async move {
            let mut events = std::pin::pin!(events);
            while let Ok(Some(event)) = events.try_next().await {
                let (kind, object) = match event {
                    WatchEvent::Added(o) => ("ADDED", o),
                    WatchEvent::Modified(o) => ("MODIFIED", o),
                    WatchEvent::Deleted(o) => ("DELETED", o),
                    _ => continue,
                };
                log.0.lock().unwrap().push((Instant::now(), kind, object));
            }
        });
        seen
    }

    /// The first `kind` event of object `name`: when, and the object as it was then.
    pub fn first(&self, kind: &str, name: &str) -> Option<(Instant, DynamicObject)> {
        let events = self.0.lock().unwrap();
        events
            .iter()
            .find(|(_, k, o)| *k == kind && o.metadata.name.as_deref() == Some(name))
            .map(|(at, _, o)| (*at, o.clone()))
    }
}
