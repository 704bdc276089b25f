//! PodGroups under the real Volcano: its scheduler, controller-manager and webhook-manager
//! (volcano.sh/volcano v1.10.0, built from the Go module proxy by
//! tests/tools/build-volcano.sh; its webhooks registered as Volcano's chart registers them)
//! on the harness's control plane, with kube-controller-manager and kwok's fake nodes
//! (tests/kuberay/world/, without its kube-scheduler stand-in for Volcano). A test binary
//! of its own: the other worlds keep the stand-in.

#[path = "../e2e/harness/mod.rs"]
#[allow(dead_code)] // shared with the e2e tests, which use all of it
mod harness;
#[path = "../kuberay/world/mod.rs"]
#[allow(dead_code)] // shared with the KubeRay tests
mod world;

mod admission_groups;
mod cluster;
mod scheduling;
mod volcano_groups;
mod webhook;
