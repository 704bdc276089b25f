//! Shared clusters under the real Kueue controller manager (sigs.k8s.io/kueue v0.17.0,
//! built from the Go module proxy by tests/tools/build-kueue.sh, its webhooks registered
//! from its own manifests), with the real KubeRay operator, kube-scheduler,
//! kube-controller-manager and kwok's fake nodes (tests/kit/src/world/). A test binary of
//! its own: Kueue's webhooks see every RayJob and RayCluster of its control plane.

use rayshare_testkit::{harness, world};

mod kueue;
mod order;
mod sharing;
