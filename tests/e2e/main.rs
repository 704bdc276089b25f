//! End-to-end tests through a real kube-apiserver (see harness/mod.rs).

use rayshare_testkit::harness;

mod admission;
mod chart;
mod check;
mod drain;
mod drain_instances;
mod events;
mod hostile;
mod indices;
mod least_privilege;
mod monitoring;
mod pod_groups;
mod ray_head;
mod ray_jobs;
mod ray_table;
mod reclaim;
mod security;
mod shared_clusters;
mod status;
mod tenant_isolation;
mod uninstall_hook;
mod warm_ahead;
