//! rayshare: a Kubernetes mutating admission webhook that puts RayJobs with identical
//! cluster configs on shared RayClusters, gives Volcano pods their own PodGroups, and
//! gives multi-host Ray worker pods unique replica/host indices.
//!
//! Functional core: `domain` (pure rules, importing only `config`'s plain types).
//! `admission` runs them for one request against a `world::World`; the controllers of
//! `reconcile` run them in the background against a `world::Background`. Imperative
//! shell: `world::kube` (caches, calls, index claims; both ports), `http` (server, TLS,
//! router, admin), `app` (the whole server). See ARCHITECTURE.md.

pub mod admission;
pub mod app;
pub mod cause;
pub mod check;
pub mod cli;
pub mod config;
pub mod docs;
pub mod domain;
pub mod drain;
pub(crate) mod health;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod offline;
pub mod placeholder;
pub mod process_metrics;
pub(crate) mod reconcile;
pub mod status;
pub mod version;
pub mod world;
