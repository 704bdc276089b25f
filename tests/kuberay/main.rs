//! End-to-end tests through the real KubeRay operator, real scheduling and simulated
//! nodes: the harness's control plane (tests/e2e/harness/) plus the cluster around it
//! (world/). A test binary of its own, so the API-server-only tests do not pay for it.

#[path = "../e2e/harness/mod.rs"]
#[allow(dead_code)] // shared with the e2e tests and the demo
mod harness;
#[allow(dead_code)] // shared with the demo
mod world;

mod modes;
mod multi_host;
mod reclaim;
mod shared_clusters;
mod slot_reuse;
mod volcano;
mod wake;
