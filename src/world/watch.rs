//! What the watches tell: typed events, published as the caches take them in. Which
//! controller wakes for which event is the controller's own business (its `trigger`).

use std::sync::Arc;

use super::background::Key;

/// What became of a watched object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Seen on a (re)list.
    Listed,
    /// Created or changed.
    Applied,
    Deleted,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// A RayJob this installation rewrote, and the shared cluster it selects; `over`
    /// once it finished or failed.
    RayJob {
        change: Change,
        cluster: Key,
        over: bool,
    },
    /// Any RayCluster; `shared` when it is a shared cluster.
    RayCluster {
        change: Change,
        key: Key,
        shared: bool,
    },
    /// A pod this installation labelled for its PodGroup.
    Pod { change: Change, key: Key },
}

/// Where the caches publish what they see.
pub type Publish = Arc<dyn Fn(&WatchEvent) + Send + Sync>;
