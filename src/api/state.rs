use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::config::Config;
use crate::metrics::Metrics;

/// What the handlers share.
pub struct AppState<W> {
    pub config: Arc<Config>,
    pub world: Arc<W>,
    pub metrics: Arc<Metrics>,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Bound on reading a request body (slow clients must not pin a worker).
    pub body_timeout: Duration,
}

/// Readiness inputs, flipped by the shell and read by `/readyz`.
#[derive(Debug, Default)]
pub struct Health {
    pub certs_loaded: AtomicBool,
    pub caches_synced: AtomicBool,
    pub draining: AtomicBool,
}

impl Health {
    /// `Err` names what is missing.
    pub fn ready(&self) -> Result<(), &'static str> {
        if self.draining.load(Ordering::Acquire) {
            Err("draining")
        } else if !self.certs_loaded.load(Ordering::Acquire) {
            Err("certificates not loaded")
        } else if !self.caches_synced.load(Ordering::Acquire) {
            Err("caches not synced")
        } else {
            Ok(())
        }
    }
}
