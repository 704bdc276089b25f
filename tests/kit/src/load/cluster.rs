//! The local control plane (tests/controlplane) and what the benchmark puts into it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

pub fn resource_of(object: &Value) -> (ApiResource, &'static str) {
    let (ar, plural) = match object["kind"].as_str() {
        Some("Pod") => (GroupVersionKind::gvk("", "v1", "Pod"), "pods"),
        Some("RayJob") => (GroupVersionKind::gvk("ray.io", "v1", "RayJob"), "rayjobs"),
        Some("RayCluster") => (
            GroupVersionKind::gvk("ray.io", "v1", "RayCluster"),
            "rayclusters",
        ),
        other => panic!("no resource for kind {other:?}"),
    };
    (ApiResource::from_gvk_with_plural(&ar, plural), plural)
}

pub async fn client(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kube config");
    Client::try_from(config).expect("kube client")
}

async fn retry<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) if Instant::now() < deadline => {
                tracing_like(&format!("{what}: {e}; retrying"));
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

fn tracing_like(msg: &str) {
    eprintln!("  .. {msg}");
}

/// Installs the CRDs of `crd_dir` and waits until they are served.
pub async fn install_crds(client: &Client, crd_dir: &Path) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(crd_dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", crd_dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("CRD file");
        for doc in rayshare::offline::documents(&text).expect("CRD YAML") {
            let crd: CustomResourceDefinition = serde_json::from_value(doc).expect("a CRD");
            names.push(crd.name_any());
            match crds.create(&PostParams::default(), &crd).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => panic!("installing {}: {e}", path.display()),
            }
        }
    }
    for name in names {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let established = crds.get(&name).await.ok().and_then(|c| {
                let conds = c.status?.conditions?;
                Some(
                    conds
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True"),
                )
            });
            if established == Some(true) {
                break;
            }
            assert!(Instant::now() < deadline, "CRD {name} not established");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

pub use crate::harness::create_namespace;

/// Creates `object` in `namespace` (or dry-runs it) and returns what the API server
/// stored (or would store): defaulted, with managedFields.
pub async fn create(client: &Client, namespace: &str, object: &Value, dry_run: bool) -> Value {
    let mut object = object.clone();
    object["metadata"]["namespace"] = json!(namespace);
    let (ar, _) = resource_of(&object);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
    let obj: DynamicObject = serde_json::from_value(object.clone()).expect("dynamic object");
    let params = PostParams {
        dry_run,
        field_manager: Some("flytepropeller".into()),
    };
    let what = format!("creating {} in {namespace}", object["kind"]);
    let created = retry(&what, || api.create(&params, &obj)).await;
    serde_json::to_value(created).expect("serialisable")
}

/// Creates many objects, `concurrency` at a time; the number that failed.
pub async fn create_many(client: &Client, objects: Vec<Value>, concurrency: usize) -> usize {
    let results: Vec<bool> = stream::iter(objects)
        .map(|object| {
            let client = client.clone();
            async move {
                let ns = object["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("default")
                    .to_string();
                let (ar, _) = resource_of(&object);
                let api: Api<DynamicObject> = Api::namespaced_with(client, &ns, &ar);
                let obj: DynamicObject = serde_json::from_value(object).expect("dynamic object");
                for _ in 0..5 {
                    match api.create(&PostParams::default(), &obj).await {
                        Ok(_) => return true,
                        Err(kube::Error::Api(e)) if e.code == 409 => return true,
                        Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                    }
                }
                false
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    results.iter().filter(|ok| !**ok).count()
}

pub async fn get(client: &Client, namespace: &str, sample: &Value, name: &str) -> Value {
    let (ar, _) = resource_of(sample);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
    let obj = retry(&format!("getting {name}"), || api.get(name)).await;
    serde_json::to_value(obj).expect("serialisable")
}

/// kube-apiserver's request counters (`apiserver_request_total`), summed by
/// "VERB resource", WATCH excluded.
pub async fn api_requests(client: &Client) -> BTreeMap<String, f64> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("request");
    let text = match client.request_text(request).await {
        Ok(t) => t,
        Err(e) => {
            eprintln!("  .. cannot read apiserver metrics: {e}");
            return BTreeMap::new();
        }
    };
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{name}=\"")))
                .map(|v| v.trim_end_matches('"').to_string())
                .unwrap_or_default()
        };
        let mut verb = label("verb");
        if verb == "WATCH" || verb == "CONNECT" {
            continue;
        }
        // Lost races (a create of a name that exists) apart: they cost less than a write.
        if label("code") == "409" {
            verb.push_str(" 409");
        }
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        *out.entry(format!("{verb} {}", label("resource")))
            .or_insert(0.0) += value;
    }
    out
}

/// Requests that grew between two counter snapshots.
pub fn delta(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0.0);
            (d >= 0.5).then(|| (k.clone(), d.round() as u64))
        })
        .collect()
}

/// The calls rayshare's admission paths can make (the rest is background: leases of the
/// API server itself and rayshare's leader election, reconciler lists).
pub fn admission_calls(delta: &BTreeMap<String, u64>) -> u64 {
    delta
        .iter()
        .filter(|(k, _)| {
            k.ends_with(" rayclusters")
                || k.ends_with(" podgroups")
                || k.as_str() == "LIST leases"
                || k.starts_with("POST") && k.ends_with(" leases")
        })
        .map(|(_, v)| v)
        .sum()
}

/// The CRD directory tests/tools/crds.sh fills from the operators' Go modules (cached).
pub fn crds_from_modules(repo: &Path) -> PathBuf {
    let out = std::process::Command::new("bash")
        .arg(repo.join("tests/tools/crds.sh"))
        .output()
        .expect("running tests/tools/crds.sh");
    assert!(
        out.status.success(),
        "tests/tools/crds.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}
