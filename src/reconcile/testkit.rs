//! The controllers' glue on the in-memory world, as Linkerd's index tests do it: put
//! what the watches would show in the world, feed the controller an event or a resync,
//! and assert the writes, Events and metrics.

use serde_json::{Value, json};

use super::controller::{Controller, Cx, Memo};
use super::runner::Failure;
use crate::config::Config;
use crate::domain::shared_cluster::{Admitter, Plan, plan};
use crate::metrics::Metrics;
use crate::world::MemoryWorld;
use crate::world::background::Key;
use crate::world::watch::WatchEvent;

/// One controller's world, config, metrics and memo.
#[derive(Default)]
pub struct Kit {
    pub world: MemoryWorld,
    pub config: Config,
    pub metrics: Metrics,
    pub memo: Memo,
}

impl Kit {
    pub fn cx(&self) -> Cx<'_, MemoryWorld> {
        Cx {
            world: &self.world,
            config: &self.config,
            metrics: &self.metrics,
            memo: &self.memo,
        }
    }

    /// Every key a resync of `C` looks at.
    pub fn keys<C: Controller<MemoryWorld>>(&self, c: &C) -> Vec<Key> {
        c.keys(&self.cx())
    }

    /// One look of `C` at `key`, to its end (the in-memory world never waits; a
    /// controller may bound its look in time, hence the runtime's timers).
    pub fn look<C: Controller<MemoryWorld>>(&self, c: &C, key: &Key) -> Result<(), Failure> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        runtime.block_on(c.reconcile(&self.cx(), key))
    }

    /// What `event` wakes `C` for, looked at.
    pub fn feed<C: Controller<MemoryWorld>>(&self, c: &C, event: &WatchEvent) -> Option<Key> {
        let key = C::trigger(event)?;
        self.look(c, &key).expect("the look succeeds");
        Some(key)
    }

    /// Puts what a watch shows (a stored job or pod).
    pub fn show(&self, object: Value) {
        self.world.stored.lock().unwrap().push(object);
    }

    /// Puts an object the API server has (what a controller made or finds).
    pub fn have(&self, object: Value) {
        let key = crate::world::memory::key(&object);
        self.world.objects.lock().unwrap().insert(key, object);
    }

    pub fn objects(&self, kind: &str) -> Vec<Value> {
        let all = self.world.created();
        all.into_iter().filter(|o| o["kind"] == kind).collect()
    }

    pub fn reasons(&self) -> Vec<&'static str> {
        let events = self.world.events.lock().unwrap();
        events.iter().map(|e| e.reason.as_str()).collect()
    }

    /// The metrics as scraped.
    pub fn scrape(&self) -> String {
        self.metrics.encode()
    }
}

pub fn key(ns: &str, name: &str) -> Key {
    (ns.to_string(), name.to_string())
}

/// A stored RayJob as admission rewrote it (the sample `rayjob-run-a`), named `name`
/// in `ns`, created at `created`; and the shared cluster it selects.
pub fn rewritten_job(ns: &str, name: &str, created: &str) -> (Value, Key) {
    let sample: Value =
        serde_norway::from_str(include_str!("../../deploy/samples/rayjob-run-a.yaml")).unwrap();
    let by = Admitter {
        instance: "rayshare",
        request_uid: "00000000-0000-0000-0000-000000000001",
    };
    let shared = &Config::default().shared_clusters;
    let Ok(Plan::Rewrite(r)) = plan(&sample, ns, shared, "x", by) else {
        panic!("not rewritten");
    };
    let mut job = r.job;
    job["metadata"]["name"] = json!(name);
    job["metadata"]["namespace"] = json!(ns);
    job["metadata"]["uid"] = json!(format!("uid-{name}"));
    job["metadata"]["creationTimestamp"] = json!(created);
    // As admission labels it (the shell does, not the plan).
    job["metadata"]["labels"][crate::domain::labels::INSTANCE] = json!(by.instance);
    let cluster = job["spec"]["clusterSelector"]["ray.io/cluster"]
        .as_str()
        .unwrap()
        .to_string();
    (job, key(ns, &cluster))
}
