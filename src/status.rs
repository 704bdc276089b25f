//! `rayshare status`: lists the shared clusters, RayJobs, PodGroups and index claims
//! rayshare manages (with the user's kubeconfig, as kubectl would) and summarizes them
//! with `domain::status`.

use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::ApiResource;
use serde_json::Value;

use crate::domain::status::{self, Listed, Status};
use crate::world::kube::calls::list_all;
use crate::world::kube::{
    lease_resource, pod_group_resource, ray_cluster_resource, ray_job_resource,
};

/// Where to look.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// One namespace, or all.
    pub namespace: Option<String>,
    /// One installation's objects (its `rayshare.io/instance`): shared clusters, their
    /// RayJobs, PodGroups, index claims; or every installation's.
    pub instance: Option<String>,
}

/// A client the way kubectl makes one: `path`, else `$KUBECONFIG`, `~/.kube/config`,
/// or the in-cluster service account.
pub async fn client(
    path: Option<&std::path::Path>,
    context: Option<&str>,
) -> anyhow::Result<kube::Client> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let config = match path {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

async fn list(
    client: &kube::Client,
    resource: &ApiResource,
    scope: &Scope,
    selector: &str,
) -> Result<Vec<Value>, kube::Error> {
    let api: Api<DynamicObject> = match &scope.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let params = ListParams::default().labels(selector);
    match list_all(params, |p| {
        let api = &api;
        async move { api.list(&p).await }
    })
    .await
    {
        Ok(items) => Ok(items
            .into_iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .collect()),
        // The CRD is not installed (no KubeRay, no Volcano): nothing of that kind.
        Err(e) if crate::world::kube::calls::is_not_found(&e) => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Lists what rayshare manages in `scope` and summarizes it.
pub async fn status(
    client: &kube::Client,
    scope: &Scope,
    default_ttl_seconds: u64,
) -> Result<Status, kube::Error> {
    let selectors = status::selectors(scope.instance.as_deref());
    let (rc, rj, pg, lease) = (
        ray_cluster_resource(),
        ray_job_resource(),
        pod_group_resource(),
        lease_resource(),
    );
    let (clusters, jobs, pod_groups, claims) = tokio::try_join!(
        list(client, &rc, scope, &selectors.clusters),
        list(client, &rj, scope, &selectors.jobs),
        list(client, &pg, scope, &selectors.pod_groups),
        list(client, &lease, scope, &selectors.claims),
    )?;
    let listed = Listed {
        clusters,
        jobs,
        pod_groups,
        claims,
    };
    Ok(status::summarize(
        &listed,
        default_ttl_seconds,
        k8s_openapi::jiff::Timestamp::now(),
    ))
}
