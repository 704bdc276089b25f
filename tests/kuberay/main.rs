//! End-to-end tests through the real KubeRay operator, real scheduling and simulated
//! nodes: the harness's control plane (tests/kit/src/harness/) plus the cluster around it
//! (world/). A test binary of its own, so the API-server-only tests do not pay for it.

use rayshare_testkit::{harness, world};

mod modes;
mod multi_host;
mod reclaim;
mod shared_clusters;
mod slot_reuse;
mod volcano;
mod wake;
mod warm_ahead;
