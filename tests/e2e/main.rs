//! End-to-end tests through a real kube-apiserver (see harness.rs).

mod admission;
mod harness;
mod indices;
mod pod_groups;
mod shared_clusters;
