use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

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
    pub limits: Limits,
}

/// What requests may hold at once, so a flood costs bounded memory and CPU.
#[derive(Clone)]
pub struct Limits {
    /// Request body bytes, in KiB permits.
    pub buffered_kib: Arc<Semaphore>,
    /// Admissions being worked on.
    pub admissions: Arc<Semaphore>,
}

impl Limits {
    pub fn new(max_buffered_bytes: usize, max_in_flight: usize) -> Self {
        Self {
            buffered_kib: Arc::new(Semaphore::new(max_buffered_bytes.div_ceil(1024))),
            admissions: Arc::new(Semaphore::new(max_in_flight)),
        }
    }
}
