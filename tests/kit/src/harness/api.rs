//! Talking to the API server: clients, creating objects and namespaces, waiting.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use super::*;

/// The chart's leader-election Role and its binding, in `namespace`: each test's replicas
/// elect their leader there, where the chart elects it in the release namespace.
pub async fn leader_role_in(client: &Client, namespace: &str) {
    // Rendered once per test binary, not once per test.
    static LEADER_RBAC: LazyLock<Vec<Value>> = LazyLock::new(|| {
        helm_template("templates/rbac.yaml", &[])
            .into_iter()
            .filter(|o| o["kind"] == "Role" || o["kind"] == "RoleBinding")
            .collect()
    });
    for object in LEADER_RBAC.iter() {
        let mut object = object.clone();
        object["metadata"]["namespace"] = json!(namespace);
        apply(client, &object).await;
    }
}

/// The CRD files of KubeRay and Volcano, from their Go modules (tests/tools/crds.sh).
pub fn crd_files() -> Vec<PathBuf> {
    let dir = run_script(&repo().join("tests/tools/crds.sh"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

pub async fn client(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// Creates any object given as JSON (kind resolved from apiVersion/kind by discovery).
pub async fn apply(client: &Client, object: &Value) -> DynamicObject {
    let api = dynamic_api(client, object).await;
    let obj: DynamicObject = serde_json::from_value(object.clone()).unwrap();
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating {}: {e}", object["metadata"]["name"]))
}

/// Creates a sample-based object in `namespace` (optionally as a dry run) and returns what
/// the API server stored (or would store), after every admission step.
pub async fn create_in(
    client: &Client,
    namespace: &str,
    mut object: Value,
    dry_run: bool,
) -> Value {
    object["metadata"]["namespace"] = json!(namespace);
    let api = dynamic_api(client, &object).await;
    let obj: DynamicObject = serde_json::from_value(object.clone()).unwrap();
    let params = PostParams {
        dry_run,
        ..Default::default()
    };
    let created = api
        .create(&params, &obj)
        .await
        .unwrap_or_else(|e| panic!("creating {}: {e}", object["metadata"]["name"]));
    serde_json::to_value(created).unwrap()
}

pub async fn dynamic_api(client: &Client, object: &Value) -> Api<DynamicObject> {
    let api_version = object["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, object["kind"].as_str().unwrap());
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
    match (caps.scope, object["metadata"]["namespace"].as_str()) {
        (kube::discovery::Scope::Namespaced, Some(ns)) => {
            Api::namespaced_with(client.clone(), ns, &ar)
        }
        _ => Api::all_with(client.clone(), &ar),
    }
}

pub fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

pub async fn create_namespace(client: &Client, name: &str, labels: &[(&str, &str)]) {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels}
    }))
    .unwrap();
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("creating namespace {name}: {e}"),
    }
}

/// Polls `check` until it yields, or panics after 60 s naming what it waited for.
pub async fn wait_for<T, F, Fut>(what: &str, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    wait_for_within(Duration::from_secs(60), what, check).await
}

/// [`wait_for`] with another deadline (for what a controller does on its own schedule).
pub async fn wait_for_within<T, F, Fut>(deadline: Duration, what: &str, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if started.elapsed() > deadline {
            panic!("timed out after {deadline:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
