//! rayshare: a Kubernetes mutating admission webhook that puts RayJobs with identical
//! cluster configs on shared RayClusters, gives Volcano pods their own PodGroups, and
//! gives multi-host Ray worker pods unique replica/host indices.
//!
//! Functional core: `shared_cluster`, `pod_group`, `indices` (pure planners) and
//! `mutate` (one request, start to finish, against a `World`). Imperative shell: `api`,
//! `admin`, `server`, `tls`, `kube_world`, `reconcile`.

pub mod admin;
pub mod admission;
pub mod api;
pub mod certs;
pub mod cli;
pub mod config;
pub mod indices;
pub mod kube_world;
pub mod labels;
pub mod logging;
pub mod metrics;
pub mod mutate;
pub mod offline;
pub mod patch;
pub mod pod_group;
pub mod quantity;
pub mod reclaim;
pub mod reconcile;
pub mod server;
pub mod shared_cluster;
pub mod tls;
pub mod triage;
pub mod world;
