//! The controllers' port ([`Background`]) on the reflector caches and the API server.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, Preconditions,
};
use kube::core::ApiResource;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::calls::{bounded, for_each_page, is_conflict, is_not_found};
use super::{KubeWorld, resources};
use crate::domain::labels;
use crate::domain::shared_cluster::job_life::job_list::JobList;
use crate::world::background::{Background, Key, Kind, Scope, Written};
use crate::world::ray::DashboardError;
use crate::world::{WorldError, kube::calls::to_world_error};

pub(crate) fn resource(kind: Kind) -> ApiResource {
    match kind {
        Kind::RayCluster => resources::ray_cluster_resource(),
        Kind::RayJob => resources::ray_job_resource(),
        Kind::PodGroup => resources::pod_group_resource(),
        Kind::Lease => resources::lease_resource(),
        Kind::Pod => ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
        Kind::Secret => ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
    }
}

fn api(client: &Client, kind: Kind, namespace: Option<&str>) -> Api<DynamicObject> {
    let ar = resource(kind);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// 404 and 409 are what became of the object, not failures.
fn written(result: Result<(), kube::Error>) -> Result<Written, WorldError> {
    match result {
        Ok(()) => Ok(Written::Done),
        Err(e) if is_not_found(&e) => Ok(Written::Gone),
        Err(e) if is_conflict(&e) => Ok(Written::Changed),
        Err(e) => Err(to_world_error(e)),
    }
}

fn value_of(object: &DynamicObject) -> Option<Value> {
    serde_json::to_value(object).ok()
}

impl Background for KubeWorld {
    fn stored_jobs(&self, namespace: Option<&str>) -> Vec<Value> {
        let Some((_, store)) = &self.jobs else {
            return Vec::new();
        };
        store
            .state()
            .iter()
            .filter(|j| namespace.is_none_or(|ns| j.namespace().as_deref() == Some(ns)))
            .filter_map(|j| value_of(j))
            .collect()
    }

    fn selected_clusters(&self) -> Vec<Key> {
        let Some((_, store)) = &self.jobs else {
            return Vec::new();
        };
        let mut keys: Vec<Key> = store
            .state()
            .iter()
            .filter_map(|job| {
                let cluster = labels::selected_cluster(&job.data)?;
                Some((job.namespace()?, cluster.to_string()))
            })
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    fn went_idle(&self, namespace: &str, cluster: &str) -> Option<Timestamp> {
        self.jobs.as_ref()?.0.went_idle(namespace, cluster)
    }

    fn cached_cluster(&self, namespace: &str, name: &str) -> Option<Value> {
        let key = ObjectRef::new_with(name, resources::ray_cluster_resource()).within(namespace);
        value_of(self.clusters.as_ref()?.get(&key)?.as_ref())
    }

    fn shared_clusters(&self, instance: &str) -> Vec<Value> {
        let Some(store) = &self.clusters else {
            return vec![];
        };
        store
            .state()
            .iter()
            .filter(|c| {
                let l = c.labels();
                l.contains_key(labels::SHARED_CLUSTER)
                    && l.get(labels::INSTANCE).map(String::as_str) == Some(instance)
            })
            .filter_map(|c| value_of(c))
            .collect()
    }

    fn stored_pods(&self) -> Vec<(Key, String)> {
        let Some(store) = &self.pods else {
            return Vec::new();
        };
        store
            .state()
            .iter()
            .filter_map(|p| Some(((p.namespace()?, p.name_any()), p.uid()?)))
            .collect()
    }

    fn admitted_here(&self, namespace: &str, name: &str) -> bool {
        let mut made = self.made_here.lock().expect("not poisoned");
        made.holds(namespace, name, std::time::Instant::now())
    }

    fn stored_pod(&self, namespace: &str, name: &str) -> Option<Value> {
        let pod = self
            .pods
            .as_ref()?
            .get(&ObjectRef::new(name).within(namespace))?;
        serde_json::to_value(pod.as_ref()).ok()
    }

    async fn get(
        &self,
        kind: Kind,
        (ns, name): &Key,
        timeout: Duration,
    ) -> Result<Option<Value>, WorldError> {
        let api = api(&self.background, kind, Some(ns));
        let found = bounded(timeout, api.get_opt(name)).await?;
        Ok(found.map_err(to_world_error)?.as_ref().and_then(value_of))
    }

    async fn ray_jobs(&self, base: &str, token: Option<&str>) -> Result<JobList, DashboardError> {
        self.dashboard.submissions(base, token).await
    }

    async fn stop_ray_job(
        &self,
        base: &str,
        id: &str,
        token: Option<&str>,
    ) -> Result<bool, DashboardError> {
        self.dashboard.stop(base, id, token).await
    }

    async fn delete_ray_job(
        &self,
        base: &str,
        id: &str,
        token: Option<&str>,
    ) -> Result<bool, DashboardError> {
        self.dashboard.delete(base, id, token).await
    }

    async fn create_new(
        &self,
        object: &Value,
        timeout: Duration,
    ) -> Result<Option<Value>, WorldError> {
        let kind =
            Kind::of(object).ok_or_else(|| WorldError::Api("no kind rayshare makes".into()))?;
        let ns = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        let dynamic: DynamicObject =
            serde_json::from_value(object.clone()).map_err(|e| WorldError::Api(e.to_string()))?;
        let api = api(&self.background, kind, Some(ns));
        match bounded(timeout, api.create(&PostParams::default(), &dynamic)).await? {
            Ok(made) => Ok(Some(value_of(&made).unwrap_or_default())),
            Err(e) if is_conflict(&e) => Ok(None),
            Err(e) => Err(to_world_error(e)),
        }
    }

    async fn patch(
        &self,
        kind: Kind,
        (ns, name): &Key,
        patch: &Value,
        timeout: Duration,
    ) -> Result<Written, WorldError> {
        let api = api(&self.background, kind, Some(ns));
        let (params, patch) = (PatchParams::default(), Patch::Merge(patch));
        let result = bounded(timeout, api.patch(name, &params, &patch)).await?;
        written(result.map(|_| ()))
    }

    async fn delete_exact(
        &self,
        kind: Kind,
        object: &ObjectMeta,
        timeout: Duration,
    ) -> Result<Written, WorldError> {
        let (Some(ns), Some(name)) = (&object.namespace, &object.name) else {
            return Ok(Written::Gone);
        };
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: object.uid.clone(),
                resource_version: object.resource_version.clone(),
            }),
            ..DeleteParams::default()
        };
        let api = api(&self.background, kind, Some(ns));
        let result = bounded(timeout, api.delete(name, &params)).await?;
        written(result.map(|_| ()))
    }

    async fn for_each_metadata(
        &self,
        scope: Scope<'_>,
        each: &mut (dyn FnMut(ObjectMeta) + Send),
    ) -> Result<(), WorldError> {
        let api = &api(&self.background, scope.kind, scope.namespace);
        let params = ListParams::default().labels(scope.labels);
        let page = |p: ListParams| async move { api.list_metadata(&p).await };
        for_each_page(params, page, |o| each(o.metadata))
            .await
            .map_err(to_world_error)
    }

    async fn for_each(
        &self,
        scope: Scope<'_>,
        each: &mut (dyn FnMut(Value) + Send),
    ) -> Result<(), WorldError> {
        let api = &api(&self.background, scope.kind, scope.namespace);
        let params = ListParams::default().labels(scope.labels);
        let page = |p: ListParams| async move { api.list(&p).await };
        let each = |o: DynamicObject| {
            if let Some(v) = value_of(&o) {
                each(v)
            }
        };
        for_each_page(params, page, each)
            .await
            .map_err(to_world_error)
    }
}
