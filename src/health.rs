//! Readiness, shared by the admin port, the server loop and the caches.

use std::sync::atomic::{AtomicBool, Ordering};

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
