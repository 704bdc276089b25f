//! What the load and bursts benchmarks share: a bare control plane with the CRDs
//! (`cluster`) and the probes of a process's CPU and memory (`sys`).

pub mod cluster;
pub mod sys;
