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
    /// Bytes of large request bodies, in KiB permits.
    pub buffered_kib: Arc<Semaphore>,
    /// A quarter of the bytes, kept for small bodies (every real pod, most RayJobs), so a
    /// flood of large ones cannot crowd them out.
    pub small_kib: Arc<Semaphore>,
    /// What the bodies held at once would become as trees (`admission::review::tree_cost`),
    /// in KiB permits: twice the bodies' bytes.
    pub trees_kib: Arc<Semaphore>,
    /// Admissions being worked on.
    pub admissions: Arc<Semaphore>,
}

/// A body declared no larger than this draws on the small bodies' share.
pub const SMALL_BODY: usize = 256 * 1024;

impl Limits {
    pub fn new(max_buffered_bytes: usize, max_in_flight: usize) -> Self {
        let kib = max_buffered_bytes.div_ceil(1024);
        Self {
            buffered_kib: Arc::new(Semaphore::new(kib - kib / 4)),
            small_kib: Arc::new(Semaphore::new(kib / 4)),
            trees_kib: Arc::new(Semaphore::new(2 * kib)),
            admissions: Arc::new(Semaphore::new(max_in_flight)),
        }
    }

    /// The share a body of the `declared` length draws on.
    pub fn budget_for(&self, declared: Option<usize>) -> &Arc<Semaphore> {
        match declared {
            Some(n) if n <= SMALL_BODY => &self.small_kib,
            _ => &self.buffered_kib,
        }
    }
}
