//! rayshare: a Kubernetes mutating admission webhook that puts RayJobs with identical
//! cluster configs on shared RayClusters, gives Volcano pods their own PodGroups, and
//! gives multi-host Ray worker pods unique replica/host indices.
//!
//! Functional core: `domain` (pure planners per feature, importing nothing from the
//! shell). `admission` runs them for one request against a `world::World` (what the caches
//! know). Imperative shell: `http` (server, TLS, router, admin), `world::kube` (caches,
//! calls, index claims), `reconcile` (provisioners that make what stored objects need,
//! and the leader's reconcilers). See ARCHITECTURE.md.

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
pub mod world;

// Paths the integration tests and benchmarks use.
pub use domain::{indices, labels, pod_group, shared_cluster};
pub use http::{certs, tls};
