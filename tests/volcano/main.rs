//! PodGroups under the real Volcano: its scheduler, controller-manager and webhook-manager
//! (volcano.sh/volcano v1.10.0, built from the Go module proxy by
//! tests/tools/build-volcano.sh; its webhooks registered as Volcano's chart registers them)
//! on the harness's control plane, with kube-controller-manager and kwok's fake nodes
//! (tests/kit/src/world/, without its kube-scheduler stand-in for Volcano). A test binary
//! of its own: the other worlds keep the stand-in.

use rayshare_testkit::volcano as cluster;
use rayshare_testkit::{harness, world};

mod admission_groups;
mod scheduling;
mod volcano_groups;
mod webhook;
