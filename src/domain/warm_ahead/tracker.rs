//! The arrivals of every config, bounded (pure state, no clock of its own): a tenant can
//! make configs without end (each new spec is one), so at most `max_configs` are
//! remembered. A new config past the cap evicts the stalest (the oldest last arrival) of
//! the namespace that holds the most, so one namespace making configs in a loop evicts
//! its own before anyone else's.

use std::collections::HashMap;

use super::rate::{Memory, Rate};

/// A config: (namespace, its pool's base name, which is the config's hash; see
/// [`super::inputs::arrival`]).
pub type ConfigKey = (String, String);

#[derive(Debug, Clone)]
pub struct Tracker {
    memory: Memory,
    max_configs: usize,
    configs: HashMap<ConfigKey, Rate>,
}

impl Tracker {
    pub fn new(memory: Memory, max_configs: usize) -> Self {
        Self {
            memory,
            max_configs: max_configs.max(1),
            configs: HashMap::new(),
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
        }
    }
}
