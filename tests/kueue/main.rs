//! Shared clusters under the real Kueue controller manager (sigs.k8s.io/kueue v0.17.0,
//! built from the Go module proxy by tests/tools/build-kueue.sh, its webhooks registered
//! from its own manifests), with the real KubeRay operator, kube-scheduler,
//! kube-controller-manager and kwok's fake nodes (tests/kuberay/world/). A test binary of
//! its own: Kueue's webhooks see every RayJob and RayCluster of its control plane.

#[path = "../e2e/harness/mod.rs"]
#[allow(dead_code)] // shared with the e2e tests, which use all of it
mod harness;
#[path = "../kuberay/world/mod.rs"]
#[allow(dead_code)] // shared with the KubeRay tests
mod world;

mod kueue;
mod order;
mod sharing;
