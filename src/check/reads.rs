//! The API reads `rayshare check` makes, each as kubectl would (objects as JSON values for
//! `domain::check`).

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::domain::check::dry_run::DryRun;
use crate::domain::check::operators::Served;
use crate::domain::check::service::{self, Proxied};

/// The sample the README verifies with: a Flyte-shaped RayJob.
const SAMPLE: &str = include_str!("../../deploy/samples/rayjob-run-a.yaml");

pub fn configurations(client: &Client) -> Api<MutatingWebhookConfiguration> {
    Api::all(client.clone())
}

pub fn deployments(client: &Client) -> Api<Deployment> {
    Api::all(client.clone())
}

pub fn namespaces(client: &Client) -> Api<Namespace> {
    Api::all(client.clone())
}

pub fn pods(client: &Client, namespace: &str) -> Api<Pod> {
    Api::namespaced(client.clone(), namespace)
}

/// Every object `api` lists with `selector`, as JSON.
pub async fn list_all<K>(api: Api<K>, selector: &str) -> Result<Vec<Value>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let list = api.list(&ListParams::default().labels(selector)).await?;
    Ok(list
        .items
        .iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect())
}

pub async fn service(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, kube::Error> {
    let api: Api<Service> = Api::namespaced(client.clone(), namespace);
    Ok(api
        .get_opt(name)
        .await?
        .and_then(|s| serde_json::to_value(s).ok()))
}

pub async fn endpoint_slices(
    client: &Client,
    namespace: &str,
    service: &str,
) -> Result<Vec<Value>, kube::Error> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
    let selector = format!("kubernetes.io/service-name={service}");
    list_all(api, &selector).await
}

/// Whether `api_version` serves `resource` (discovery).
pub async fn served_resource(client: &Client, api_version: &str, resource: &str) -> Served {
    match client.list_api_group_resources(api_version).await {
        Ok(list) if list.resources.iter().any(|r| r.name == resource) => Served::Yes,
        Ok(_) => Served::No,
        Err(kube::Error::Api(e)) if e.code == 404 => Served::No,
        Err(e) => Served::Unknown(e.to_string()),
    }
}

/// The API groups the server serves.
pub async fn groups(client: &Client) -> Result<Vec<String>, kube::Error> {
    let list = client.list_api_groups().await?;
    Ok(list.groups.into_iter().map(|g| g.name).collect())
}

/// GET `path` on the Service's `port` through the API server's service proxy.
pub async fn proxy(
    client: &Client,
    namespace: &str,
    name: &str,
    port: &str,
    path: &str,
) -> Proxied {
    let uri = format!("/api/v1/namespaces/{namespace}/services/{name}:{port}/proxy/{path}");
    let request = match axum::http::Request::get(uri).body(Vec::new()) {
        Ok(r) => r,
        Err(e) => return Proxied::Failed(e.to_string()),
    };
    match client.request_text(request).await {
        Ok(body) => Proxied::Answered { status: 200, body },
        Err(kube::Error::Api(e)) => service::proxied_error(e.code, &e.reason, &e.message),
        Err(e) => Proxied::Failed(e.to_string()),
    }
}

/// Creates the sample RayJob in `namespace` as a server-side dry run: every admission
/// webhook sees it, nothing is stored.
pub async fn dry_run_ray_job(client: &Client, namespace: &str) -> DryRun {
    let mut job: Value = match serde_norway::from_str(SAMPLE) {
        Ok(job) => job,
        Err(e) => {
            return DryRun::Refused {
                namespace: namespace.into(),
                message: format!("the built-in sample does not parse: {e}"),
            };
        }
    };
    job["metadata"]["name"] = Value::from("rayshare-check");
    job["metadata"]["namespace"] = Value::from(namespace);
    let object: DynamicObject = match serde_json::from_value(job) {
        Ok(o) => o,
        Err(e) => {
            return DryRun::Refused {
                namespace: namespace.into(),
                message: e.to_string(),
            };
        }
    };
    let resource = crate::world::kube::ray_job_resource();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let params = PostParams {
        dry_run: true,
        ..Default::default()
    };
    match api.create(&params, &object).await {
        Ok(created) => DryRun::Returned {
            namespace: namespace.into(),
            object: serde_json::to_value(created).unwrap_or_default(),
        },
        Err(kube::Error::Api(e))
            if e.code == 403
                && e.reason == "Forbidden"
                && !e.message.contains("admission webhook") =>
        {
            DryRun::Forbidden {
                namespace: namespace.into(),
            }
        }
        Err(e) => DryRun::Refused {
            namespace: namespace.into(),
            message: e.to_string(),
        },
    }
}
