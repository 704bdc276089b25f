//! What the mutations need from outside: cached knowledge and writes to the API server.
//!
//! The server implements it with kube (`world/kube/`); `rayshare mutate` and the
//! in-process tests with [`MemoryWorld`]. Both run the very same `admission::admit`.

use std::future::Future;
use std::time::Duration;

use serde_json::Value;

use crate::cause::Cause;
use crate::config::ServedNamespaces;
use crate::domain::indices::Slot;

pub mod background;
pub mod kube;
pub(crate) mod memory;
pub mod ray;
pub mod watch;

pub use background::Background;
pub use memory::MemoryWorld;

use crate::domain::cluster::ClusterInfo;
pub use crate::domain::cluster::WorkerGroup;
use crate::domain::events::Event;

#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    Created,
    /// An object of that name exists; here it is, as the API server has it.
    Exists(Value),
}

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum WorldError {
    #[error("API call timed out")]
    Timeout,
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("API server unreachable: {0}")]
    Unreachable(String),
    #[error("API error: {0}")]
    Api(String),
    #[error("conflict: {0}")]
    Conflict(String),
}

impl WorldError {
    /// What went wrong, as a person reads it (the API server's message where it gave one).
    pub fn reason(&self) -> String {
        match self {
            Self::Timeout => "the API server did not answer in time".into(),
            Self::Forbidden(m) | Self::Unreachable(m) | Self::Api(m) | Self::Conflict(m) => {
                m.clone()
            }
        }
    }

    pub fn cause(&self) -> Cause {
        match self {
            Self::Timeout => Cause::ApiTimeout,
            Self::Forbidden(_) => Cause::ApiForbidden,
            Self::Unreachable(_) => Cause::ApiUnreachable,
            Self::Api(_) => Cause::ApiError,
            Self::Conflict(_) => Cause::Conflict,
        }
    }
}

/// The slot a pod got, and how many claims whose pods never came it took over to keep
/// its group's replicas complete.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Claimed {
    pub slot: Slot,
    pub taken_over: usize,
}

/// A request for replica/host indices for one pod of a multi-host worker group.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexRequest {
    pub namespace: String,
    pub cluster: String,
    pub cluster_uid: String,
    pub group: String,
    pub shape: WorkerGroup,
    pub admission_uid: String,
    pub dry_run: bool,
    /// The installation admitting (its sweep releases only its own claims).
    pub instance: String,
}

pub trait World: Send + Sync + 'static {
    fn ray_cluster(&self, namespace: &str, name: &str) -> Option<ClusterInfo>;
    /// The RayCluster as the API server has it now (a read, for names the cache does not
    /// know yet: a cluster made a moment ago, maybe by someone else).
    fn fetch_cluster(
        &self,
        namespace: &str,
        name: &str,
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<ClusterInfo>, WorldError>> + Send;
    fn namespace_queue(&self, namespace: &str) -> Option<String>;
    /// Whether the namespace, as the watch shows it, is one the webhook is called for
    /// (`rule`). A namespace the watch has not shown is not.
    fn namespace_served(&self, namespace: &str, rule: &ServedNamespaces) -> bool;
    /// Counts a PodGroup admission is about to make before its pod is stored; `false`
    /// when the caps on such groups are reached (see `domain::unconfirmed`).
    fn note_unconfirmed_group(&self, namespace: &str, group: &str) -> bool;
    /// Active (non-terminal) RayJobs selecting the cluster, including ones this replica
    /// admitted that its cache has not seen yet.
    fn active_jobs(&self, namespace: &str, cluster: &str) -> usize;
    /// Records that a job was admitted onto a cluster.
    fn note_admitted(&self, namespace: &str, cluster: &str, job: &str);
    /// Queues a Kubernetes Event (recorded in the background, never awaited by admission).
    fn record(&self, event: Event);
    /// Creates the object, or returns the one of that name the API server has already.
    fn create(
        &self,
        object: &Value,
        timeout: Duration,
    ) -> impl Future<Output = Result<Created, WorldError>> + Send;
    /// Claims a free (replica, host) slot of a worker group through the API server.
    fn claim_slot(
        &self,
        request: &IndexRequest,
        timeout: Duration,
    ) -> impl Future<Output = Result<Claimed, WorldError>> + Send;
}
