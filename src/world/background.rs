//! What the controllers may ask of the outside, beside admission's [`World`]: the
//! stored objects the watches hold, bounded writes that say what became of them, and
//! lists of what the API server has now, and the Ray dashboards' job API. The server implements it with kube
//! (`world/kube/background.rs`), tests and `rayshare mutate` with [`super::MemoryWorld`];
//! both run the very same controllers.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::ray::DashboardError;
use super::{World, WorldError};
use crate::domain::shared_cluster::job_life::job_list::JobList;

/// (namespace, name) of what a controller looks at.
pub type Key = (String, String);

/// The kinds the controllers write or list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    RayCluster,
    RayJob,
    PodGroup,
    /// Index claims.
    Lease,
    Pod,
    /// Read only: a Ray cluster's dashboard token.
    Secret,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RayCluster => "RayCluster",
            Self::RayJob => "RayJob",
            Self::PodGroup => "PodGroup",
            Self::Lease => "Lease",
            Self::Pod => "Pod",
            Self::Secret => "Secret",
        }
    }

    pub fn of(object: &Value) -> Option<Self> {
        Some(match object["kind"].as_str()? {
            "RayCluster" => Self::RayCluster,
            "RayJob" => Self::RayJob,
            "PodGroup" => Self::PodGroup,
            "Lease" => Self::Lease,
            "Pod" => Self::Pod,
            "Secret" => Self::Secret,
            _ => return None,
        })
    }
}

/// What a write did, when the API server did not refuse it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Done,
    /// The object is not there (any more).
    Gone,
    /// A precondition no longer holds: the object changed since it was read.
    Changed,
}

/// Where a list looks and what it selects.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    pub kind: Kind,
    /// `None`: every namespace.
    pub namespace: Option<&'a str>,
    /// A label selector (`""`: everything).
    pub labels: &'a str,
}

pub trait Background: World {
    /// The stored RayJobs this installation rewrote, of one namespace (`None`: all), as
    /// the watch keeps them (selector, status, metadata).
    fn stored_jobs(&self, namespace: Option<&str>) -> Vec<Value>;
    /// The shared clusters some stored job selects.
    fn selected_clusters(&self) -> Vec<Key>;
    /// When a shared cluster's last active job ended or went, as the job watch saw it.
    fn went_idle(&self, namespace: &str, cluster: &str) -> Option<Timestamp>;
    /// A RayCluster as the cache has it (slimmed).
    fn cached_cluster(&self, namespace: &str, name: &str) -> Option<Value>;
    /// This installation's shared clusters, as the cache has them.
    fn shared_clusters(&self, instance: &str) -> Vec<Value>;
    /// The stored pods that want a PodGroup from rayshare: (namespace, name) and uid.
    fn stored_pods(&self) -> Vec<(Key, String)>;
    fn stored_pod(&self, namespace: &str, name: &str) -> Option<Value>;
    /// Whether this replica's admission made (or set out to make) PodGroup `name` within
    /// `podGroups.unconfirmedGraceSeconds`.
    fn admitted_here(&self, namespace: &str, name: &str) -> bool;

    /// One object as the API server has it now (`None`: not there).
    fn get(
        &self,
        kind: Kind,
        key: &Key,
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<Value>, WorldError>> + Send;
    /// The Ray jobs the dashboard at `base` lists (`token`: a dashboard in token mode).
    fn ray_jobs(
        &self,
        base: &str,
        token: Option<&str>,
    ) -> impl Future<Output = Result<JobList, DashboardError>> + Send;
    /// Stops Ray job `id`: `false` when it was over already.
    fn stop_ray_job(
        &self,
        base: &str,
        id: &str,
        token: Option<&str>,
    ) -> impl Future<Output = Result<bool, DashboardError>> + Send;
    /// Deletes the record of Ray job `id`: `false` when it was gone already.
    fn delete_ray_job(
        &self,
        base: &str,
        id: &str,
        token: Option<&str>,
    ) -> impl Future<Output = Result<bool, DashboardError>> + Send;
    /// Creates the object: as the API server stored it when this call made it, `None`
    /// when one of that name exists already.
    fn create_new(
        &self,
        object: &Value,
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<Value>, WorldError>> + Send;
    /// Merges `patch` into the object.
    fn patch(
        &self,
        kind: Kind,
        key: &Key,
        patch: &Value,
        timeout: Duration,
    ) -> impl Future<Output = Result<Written, WorldError>> + Send;
    /// Deletes the object only if it is still exactly the one read (uid and
    /// resourceVersion preconditions).
    fn delete_exact(
        &self,
        kind: Kind,
        object: &ObjectMeta,
        timeout: Duration,
    ) -> impl Future<Output = Result<Written, WorldError>> + Send;
    /// Hands every object's metadata in `scope` to `each` as its page arrives.
    fn for_each_metadata(
        &self,
        scope: Scope<'_>,
        each: &mut (dyn FnMut(ObjectMeta) + Send),
    ) -> impl Future<Output = Result<(), WorldError>> + Send;
    /// Every object's metadata in `scope`, as the API server has them now (for lists that
    /// stay small: rayshare's own objects).
    fn list_metadata(
        &self,
        scope: Scope<'_>,
    ) -> impl Future<Output = Result<Vec<ObjectMeta>, WorldError>> + Send {
        async move {
            let mut items = Vec::new();
            self.for_each_metadata(scope, &mut |m| items.push(m))
                .await?;
            Ok(items)
        }
    }
    /// Hands every object in `scope` to `each` as its page arrives (a large list is never
    /// held in one piece).
    fn for_each(
        &self,
        scope: Scope<'_>,
        each: &mut (dyn FnMut(Value) + Send),
    ) -> impl Future<Output = Result<(), WorldError>> + Send;
}
