//! rayshare: a Kubernetes mutating admission webhook that puts RayJobs with identical
//! cluster configs on shared RayClusters, gives Volcano pods their own PodGroups, and
//! gives multi-host Ray worker pods unique replica/host indices.
//!
//! Functional core: `shared_cluster`, `pod_group`, `indices` (pure planners) and
//! `mutate` (one request, start to finish, against a `World`). Imperative shell: `api`,
//! `admin`, `server`, `tls`, `kube_world`, `reconcile`.

pub mod admission;
pub mod cli;
pub mod config;
pub mod domain;
pub mod health;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod offline;
pub mod reconcile;
pub mod world;

// Paths the integration tests and benchmarks use.
pub use domain::{indices, labels, pod_group, shared_cluster};
pub use http::{certs, tls};
