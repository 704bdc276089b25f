//! The [`World`] of a running server: reflector caches and API calls through kube.

mod background;
mod caches;
pub(crate) mod calls;
mod claims;
mod cluster_reads;
mod event_lookups;
pub mod events;
mod hedge;
mod job_index;
mod pending;
pub mod resources;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DynamicObject, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

use crate::domain::cluster::ClusterInfo;
use crate::domain::labels;
use crate::world::{Claimed, Created, IndexRequest, World, WorldError};
use calls::{bounded, is_already_exists, to_world_error};
use claims::{GroupKey, KnownClaims};
use job_index::JobIndex;
pub use resources::*;

pub struct KubeWorld {
    /// Admission's calls.
    client: Client,
    /// The watches' and the controllers' calls (on the background runtime).
    background: Client,
    clusters: Option<Store<DynamicObject>>,
    namespaces: Option<Store<Namespace>>,
    /// One queue per worker group: this replica's claims for a group go one at a time, so
    /// they never race each other (races with other replicas are settled by the API server).
    group_queues: std::sync::Mutex<HashMap<GroupKey, Arc<tokio::sync::Mutex<KnownClaims>>>>,
    /// Active jobs per shared cluster, and the stored rewritten jobs themselves.
    jobs: Option<(Arc<JobIndex>, Store<DynamicObject>)>,
    /// Stored pods whose PodGroup rayshare makes.
    pods: Option<Store<Pod>>,
    /// How long an index claim counts without its pod (`indices.claimInFlightSeconds`).
    claim_in_flight: Duration,
    /// How long a pod waits on claims in flight before taking them over
    /// (`indices.claimTakeoverMs`).
    claim_takeover: Duration,
    events: Option<events::EventSink>,
    /// Admission's reads of clusters the cache does not hold, shared.
    cluster_reads: cluster_reads::ClusterReads,
    /// The shared clusters' Ray dashboards (the job stopper's calls).
    dashboard: crate::world::ray::Dashboard,
    /// Groups made at admission whose pods the pod watch has not shown stored yet.
    unconfirmed: Arc<std::sync::Mutex<crate::domain::unconfirmed::Unconfirmed>>,
    /// Whether this replica leads the reconcilers, once an election runs: the end of a
    /// group its index blocks are opened from (`domain::indices::next::Side`).
    leading: std::sync::OnceLock<tokio::sync::watch::Receiver<bool>>,
    /// PodGroups made here, for the provisioner's create of the same group
    /// (`domain::made_here`).
    made_here: std::sync::Mutex<crate::domain::made_here::MadeHere>,
}

impl KubeWorld {
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The client of the watches and the controllers.
    pub fn background_client(&self) -> &Client {
        &self.background
    }

    /// Follows the reconcilers' leader election (set once; later calls change nothing).
    pub fn follow_leadership(&self, leading: tokio::sync::watch::Receiver<bool>) {
        let _ = self.leading.set(leading);
    }

    /// Creates the object: its resourceVersion when this call made it, `None` when it
    /// exists already.
    async fn try_create(
        &self,
        object: &Value,
        timeout: Duration,
    ) -> Result<Option<String>, WorldError> {
        try_create(&self.client, object, timeout).await
    }
}

fn api_for(client: &Client, object: &Value) -> Result<Api<DynamicObject>, WorldError> {
    let ar = match object["kind"].as_str() {
        Some("RayCluster") => ray_cluster_resource(),
        Some("PodGroup") => pod_group_resource(),
        Some("Lease") => lease_resource(),
        other => {
            return Err(WorldError::Api(format!(
                "rayshare cannot create kind {other:?}"
            )));
        }
    };
    let ns = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    Ok(Api::namespaced_with(client.clone(), ns, &ar))
}

/// Creates the object: its resourceVersion when this call made it, `None` when it exists
/// already. A free function, so a task of its own can make it (`claims`).
async fn try_create(
    client: &Client,
    object: &Value,
    timeout: Duration,
) -> Result<Option<String>, WorldError> {
    let api = api_for(client, object)?;
    let dynamic: DynamicObject =
        serde_json::from_value(object.clone()).map_err(|e| WorldError::Api(e.to_string()))?;
    match bounded(timeout, api.create(&PostParams::default(), &dynamic)).await? {
        Ok(made) => Ok(Some(made.metadata.resource_version.unwrap_or_default())),
        Err(e) if is_already_exists(&e) => Ok(None),
        Err(e) => Err(to_world_error(e)),
    }
}

impl KubeWorld {
    /// One create, or the existing object; a PodGroup made here is read, not made again
    /// (`domain::made_here`).
    async fn create_once(&self, object: &Value, timeout: Duration) -> Result<Created, WorldError> {
        let deadline = Instant::now() + timeout;
        let kept = (object["kind"] == "PodGroup").then(|| {
            let meta = &object["metadata"];
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (text(&meta["namespace"]), text(&meta["name"]))
        });
        let made_here = || self.made_here.lock().expect("not poisoned");
        let api = api_for(&self.client, object)?;
        // Made here: a create would be refused, a read says whether it is still there.
        if let Some((ns, name)) = &kept
            && made_here()
                .take(ns, name, Instant::now())
                .is_some_and(|made| !made.is_null())
            && let Some(found) = bounded(timeout, api.get_opt(name))
                .await?
                .map_err(to_world_error)?
        {
            let found = serde_json::to_value(found).map_err(|e| WorldError::Api(e.to_string()))?;
            return Ok(Created::Exists(found));
        }
        if let Some((ns, name)) = &kept {
            made_here().intend(ns, name, Instant::now());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let dynamic: DynamicObject =
            serde_json::from_value(object.clone()).map_err(|e| WorldError::Api(e.to_string()))?;
        match bounded(left, api.create(&PostParams::default(), &dynamic)).await? {
            Ok(made) => {
                if let Some((ns, name)) = kept {
                    let version = made.metadata.resource_version.unwrap_or_default();
                    made_here().put(&ns, &name, json!(version), Instant::now());
                }
                return Ok(Created::Created);
            }
            Err(e) if is_already_exists(&e) => {}
            Err(e) => return Err(to_world_error(e)),
        }
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let left = deadline.saturating_duration_since(Instant::now());
        let existing = bounded(left, api_for(&self.client, object)?.get(name))
            .await?
            .map_err(to_world_error)?;
        let existing =
            serde_json::to_value(existing).map_err(|e| WorldError::Api(e.to_string()))?;
        Ok(Created::Exists(existing))
    }
}

impl World for KubeWorld {
    /// Creates the object (kind from its apiVersion/kind), or returns the existing one. A
    /// PodGroup's create (on a pod's admission path) not answered within half its bound is
    /// sent again (`hedge`).
    async fn create(&self, object: &Value, timeout: Duration) -> Result<Created, WorldError> {
        if object["kind"] != "PodGroup" {
            return self.create_once(object, timeout).await;
        }
        let again = || {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            tracing::info!(group = %name, after_ms = (timeout / 2).as_millis() as u64, "PodGroup create not answered yet: sent again");
            self.create_once(object, timeout)
        };
        hedge::first_ok(self.create_once(object, timeout), timeout / 2, again).await
    }

    async fn fetch_cluster(
        &self,
        namespace: &str,
        name: &str,
        timeout: Duration,
    ) -> Result<Option<ClusterInfo>, WorldError> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &ray_cluster_resource());
        let name_owned = name.to_string();
        let read = move || {
            async move {
                let found = bounded(timeout, api.get_opt(&name_owned))
                    .await?
                    .map_err(to_world_error)?;
                let info =
                    |c| ClusterInfo::from_value(&serde_json::to_value(c).unwrap_or_default());
                Ok(found.map(info))
            }
            .boxed()
        };
        let key = (namespace.to_string(), name.to_string());
        self.cluster_reads.get(key, read).await
    }

    fn active_jobs(&self, namespace: &str, cluster: &str) -> usize {
        self.jobs
            .as_ref()
            .map_or(0, |(j, _)| j.count(namespace, cluster))
    }

    fn note_admitted(&self, namespace: &str, cluster: &str, job: &str) {
        if let Some((j, _)) = &self.jobs {
            j.note(namespace, cluster, job);
        }
    }

    fn record(&self, event: crate::domain::events::Event) {
        if let Some(sink) = &self.events {
            sink.record(event);
        }
    }

    fn ray_cluster(&self, namespace: &str, name: &str) -> Option<ClusterInfo> {
        let store = self.clusters.as_ref()?;
        let key = ObjectRef::new_with(name, ray_cluster_resource()).within(namespace);
        let obj = store.get(&key)?;
        let meta = obj.meta();
        Some(ClusterInfo::from_value(&json!({
            "metadata": {
                "uid": meta.uid, "labels": meta.labels, "annotations": meta.annotations,
                "creationTimestamp": meta.creation_timestamp,
                "deletionTimestamp": meta.deletion_timestamp,
            },
            "spec": obj.data.get("spec"),
        })))
    }

    fn namespace_queue(&self, namespace: &str) -> Option<String> {
        let ns = self.namespaces.as_ref()?.get(&ObjectRef::new(namespace))?;
        ns.annotations().get(labels::QUEUE_NAME).cloned()
    }

    fn note_unconfirmed_group(&self, namespace: &str, group: &str) -> bool {
        let mut u = self.unconfirmed.lock().expect("not poisoned");
        u.try_note(namespace, group, Instant::now())
    }

    fn namespace_served(&self, namespace: &str, rule: &crate::config::ServedNamespaces) -> bool {
        let Some(ns) = self
            .namespaces
            .as_ref()
            .and_then(|s| s.get(&ObjectRef::new(namespace)))
        else {
            return false;
        };
        let labels = ns.labels().iter().map(|(k, v)| (k.as_str(), v.as_str()));
        rule.serves(namespace, labels)
    }

    async fn claim_slot(&self, r: &IndexRequest, timeout: Duration) -> Result<Claimed, WorldError> {
        self.claim(r, timeout).await
    }
}
