//! Background work: the controllers. Each is one file that declares itself (kind, plan,
//! the watch events that wake it, the keys a resync looks at, a body over a context;
//! `controller`) and one row in the start table (`start`). The provisioners
//! (`make_clusters`, `make_groups`) run on every replica and make what stored objects
//! need; the rest run while this replica holds the lease (`elector`): the reclaimer
//! (`reclaim`), the orphan sweeps (`orphan_groups`, `orphan_claims`), the job stopper
//! (`stop_jobs`) and the warning for jobs a suspended cluster cut off (`suspended`).
//! All run in one loop (`runner`): wake-ups and resyncs, per-key backoff, a span per look,
//! pass metrics. `store` runs the provisioners on the in-memory world.

pub mod controller;
pub(crate) mod elector;
mod head;
pub(crate) mod make_clusters;
pub(crate) mod make_groups;
pub(crate) mod orphan_claims;
pub(crate) mod orphan_groups;
pub(crate) mod reclaim;
pub(crate) mod runner;
pub mod start;
pub(crate) mod stop_jobs;
mod store;
pub(crate) mod suspended;
#[cfg(test)]
mod testkit;
pub(crate) mod wake_on_ready;
pub(crate) mod warm_ahead;

pub use elector::Election;
