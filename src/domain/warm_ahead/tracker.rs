//! The arrivals of every config, bounded (pure state, no clock of its own): a tenant can
//! make configs without end (each new spec is one), so at most `max_configs` are
//! remembered. A new config past the cap evicts the stalest (the oldest last arrival) of
//! the namespace that holds the most, so one namespace making configs in a loop evicts
//! its own before anyone else's.
//!
//! With each config it keeps the template a member made ahead is built from
//! ([`super::ahead::template`]): Flyte deletes or ages out a finished task's RayJob, so
//! by the time a config's next burst is due its stored jobs are often gone. A template is
//! cut from a job the API server stored, never from a review, and goes with its config.

use std::collections::HashMap;

use serde_json::Value;

use super::rate::{Memory, Rate};

/// A config: (namespace, its pool's base name, which is the config's hash; see
/// [`super::inputs::arrival`]).
pub type ConfigKey = (String, String);

#[derive(Debug, Clone)]
pub struct Tracker {
    memory: Memory,
    max_configs: usize,
    configs: HashMap<ConfigKey, Rate>,
    /// Per config: the uid of the job the template was cut from, and the template.
    templates: HashMap<ConfigKey, (String, Value)>,
}

impl Tracker {
    pub fn new(memory: Memory, max_configs: usize) -> Self {
        Self {
            memory,
            max_configs: max_configs.max(1),
            configs: HashMap::new(),
            templates: HashMap::new(),
        }
    }

    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// A task of config `key` arrived at `at_ms` (its RayJob's creation).
    pub fn arrived(&mut self, key: &ConfigKey, at_ms: i64) {
        if let Some(rate) = self.configs.get_mut(key) {
            rate.record(at_ms, &self.memory);
            return;
        }
        if self.configs.len() >= self.max_configs {
            self.evict();
        }
        self.configs
            .insert(key.clone(), Rate::first(at_ms, &self.memory));
    }

    /// Keeps `job` (a stored job of config `key`, uid `uid`) as the config's template, cut
    /// to what a member is built from; only for a config remembered, and only when it is
    /// another job than the one kept (a pass sees the same newest job again and again).
    pub fn remember(&mut self, key: &ConfigKey, uid: &str, job: &Value) {
        if !self.configs.contains_key(key) {
            return;
        }
        if self.templates.get(key).is_some_and(|(kept, _)| kept == uid) {
            return;
        }
        let template = super::ahead::template(job);
        self.templates
            .insert(key.clone(), (uid.to_string(), template));
    }

    /// The template of config `key`, if a job of it was seen.
    pub fn template(&self, key: &ConfigKey) -> Option<&Value> {
        self.templates.get(key).map(|(_, t)| t)
    }

    pub fn rate(&self, key: &ConfigKey) -> Option<&Rate> {
        self.configs.get(key)
    }

    /// Every config remembered, with its arrivals.
    pub fn configs(&self) -> impl Iterator<Item = (&ConfigKey, &Rate)> {
        self.configs.iter()
    }

    pub fn len(&self) -> usize {
        self.configs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.configs.is_empty()
    }

    /// Drops the stalest config of the namespace with the most configs (ties: the
    /// namespace, then the config, that sort first).
    fn evict(&mut self) {
        let mut per_namespace: HashMap<&str, usize> = HashMap::new();
        for (ns, _) in self.configs.keys() {
            *per_namespace.entry(ns).or_default() += 1;
        }
        let Some((crowded, _)) = per_namespace
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
        else {
            return;
        };
        let crowded = crowded.to_string();
        let stalest = self
            .configs
            .iter()
            .filter(|((ns, _), _)| *ns == crowded)
            .min_by(|a, b| a.1.last_ms().cmp(&b.1.last_ms()).then(a.0.cmp(b.0)))
            .map(|(k, _)| k.clone());
        if let Some(key) = stalest {
            self.configs.remove(&key);
            self.templates.remove(&key);
        }
    }
}
