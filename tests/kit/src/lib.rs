//! rayshare's test kit: the worlds the integration tests and benchmarks run in, shared as
//! one crate instead of source files included by path.
//!
//! - `harness`: a real kube-apiserver + etcd, the real CRDs, `rayshare serve` registered
//!   through the chart's webhook configuration; one control plane per test binary.
//! - `world`: the cluster around it: kube-scheduler, kube-controller-manager, kwok's nodes
//!   and the real KubeRay operator.
//! - `volcano`: Volcano's scheduler, controller-manager and webhook-manager on that world.
//! - `load`: a bare control plane for the load benchmark, and the process probes
//!   (CPU, memory) the benchmarks read.
//! - `ports`: free local ports.

pub mod harness;
pub mod load;
pub mod ports;
pub mod volcano;
pub mod world;
