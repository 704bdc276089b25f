//! What follows on the in-memory world once the API server stores an admitted object:
//! the very provisioners the server runs look at it, as the watches would wake them.

use serde_json::{Value, json};

use super::controller::{Controller, Cx, Memo};
use super::make_clusters::MakeClusters;
use super::make_groups::MakeGroups;
use crate::config::Config;
use crate::domain::labels::{self, Meta};
use crate::metrics::Metrics;
use crate::world::MemoryWorld;
use crate::world::background::Key;
use crate::world::memory::key as memory_key;

impl MemoryWorld {
    /// Stores `admitted` as the API server would (a pod gets a uid) and runs the
    /// provisioner its watch would wake: a rewritten RayJob's shared cluster, a labelled
    /// pod's PodGroup. Returns what that made. The in-memory world never waits, so the
    /// provisioner's look runs to its end here.
    pub fn store(&self, admitted: &Value, config: &Config) -> Option<Value> {
        let mut stored = admitted.clone();
        let namespace = stored["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = stored["metadata"]["name"].as_str().unwrap_or_default();
        let key: Key = (namespace.to_string(), name.to_string());
        let (metrics, memo) = (Metrics::default(), Memo::default());
        let cx = Cx {
            world: self,
            config,
            metrics: &metrics,
            memo: &memo,
        };
        let before = self.created();
        if admitted["kind"] == "Pod" {
            // The pod watch shows only the pods this installation labelled.
            let grouped = labels::get(admitted, Meta::Labels, labels::POD_GROUPED);
            if grouped != Some(config.instance.as_str()) {
                return None;
            }
            stored["metadata"]["uid"] = json!(format!("uid-of-{}", key.1));
            self.stored.lock().expect("not poisoned").push(stored);
            futures::executor::block_on(MakeGroups.reconcile(&cx, &key)).ok()?;
        } else {
            let cluster = labels::selected_cluster(admitted)?;
            let cluster = (key.0.clone(), cluster.to_string());
            self.stored.lock().expect("not poisoned").push(stored);
            futures::executor::block_on(MakeClusters.reconcile(&cx, &cluster)).ok()?;
        }
        let before: Vec<_> = before.iter().map(memory_key).collect();
        let after = self.created();
        after.into_iter().find(|o| !before.contains(&memory_key(o)))
    }
}
