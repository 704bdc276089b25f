use std::sync::Arc;
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
