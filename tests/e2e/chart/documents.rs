//! Rendered YAML documents, created as helm and kubectl send them (strict); the extra CRDs.

use std::process::{Command, Stdio};
use std::sync::LazyLock;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use kube::{Client, Resource as _};
use serde_json::{Value, json};

use crate::harness::*;

/// One YAML document: its text as rendered, and what it says.
pub(super) struct Doc {
    pub(super) yaml: String,
    pub(super) value: Value,
}

impl Doc {
    pub(super) fn describe(&self) -> String {
        format!(
            "{} {}",
            self.value["kind"].as_str().unwrap_or("?"),
            self.value["metadata"]["name"].as_str().unwrap_or("?")
        )
    }
}

/// Splits a multi-document YAML stream on its `---` lines (helm's separators; the chart's
/// block scalars are indented, so a `---` at column 0 is always one). Empty and
/// comment-only documents are dropped.
pub(super) fn split_documents(text: &str) -> Vec<Doc> {
    let mut chunks = vec![String::new()];
    for line in text.lines() {
        if line.trim_end() == "---" {
            chunks.push(String::new());
        } else {
            let chunk = chunks.last_mut().unwrap();
            chunk.push_str(line);
            chunk.push('\n');
        }
    }
    chunks
        .into_iter()
        .filter_map(|yaml| {
            let mut values = rayshare::offline::documents(&yaml).expect("valid YAML");
            assert!(values.len() <= 1, "unsplit document:\n{yaml}");
            values.pop().map(|value| Doc { yaml, value })
        })
        .collect()
}

/// The server's answer to a create.
pub(super) struct Created {
    pub(super) object: Value,
    pub(super) warnings: Vec<String>,
}

/// POSTs `doc` as YAML with `fieldValidation=Strict`, optionally as a dry run.
pub(super) async fn create_yaml(
    client: &Client,
    doc: &Doc,
    dry_run: bool,
) -> Result<Created, String> {
    let object = &doc.value;
    let api_version = object["apiVersion"].as_str().expect("apiVersion");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, object["kind"].as_str().expect("kind"));
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("no API resource for {gvk:?}: {e}"))?;
    let namespace = match caps.scope {
        Scope::Namespaced => Some(
            object["metadata"]["namespace"]
                .as_str()
                .ok_or("a namespaced object without metadata.namespace")?,
        ),
        Scope::Cluster => None,
    };
    let url = DynamicObject::url_path(&ar, namespace);
    let params = PostParams {
        dry_run,
        ..Default::default()
    };
    let mut request = kube::core::Request::new(url)
        .create(&params, doc.yaml.clone().into_bytes())
        .unwrap();
    let uri = request.uri().to_string();
    let separator = if uri.ends_with('?') { "" } else { "&" };
    *request.uri_mut() = format!("{uri}{separator}fieldValidation=Strict")
        .parse()
        .unwrap();
    let headers = request.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        "application/yaml".parse().unwrap(),
    );
    headers.insert(hyper::header::ACCEPT, "application/json".parse().unwrap());
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let warnings = response
        .headers()
        .get_all(hyper::header::WARNING)
        .iter()
        .map(|w| String::from_utf8_lossy(w.as_bytes()).into_owned())
        .collect();
    let body = response
        .into_body()
        .collect_bytes()
        .await
        .map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("{status}: {}", String::from_utf8_lossy(&body)));
    }
    let object = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    Ok(Created { object, warnings })
}

/// cert-manager's Certificate/Issuer/ClusterIssuer and the ServiceMonitor CRDs, installed
/// once (a CRD that exists already is fine) and served by discovery.
pub(super) static EXTRA_CRDS: LazyLock<()> = LazyLock::new(|| {
    let out = Command::new("bash")
        .arg(repo().join("tests/tools/extra-crds.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("running tests/tools/extra-crds.sh");
    assert!(out.status.success(), "tests/tools/extra-crds.sh failed");
    let paths: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert!(
        !paths.is_empty(),
        "tests/tools/extra-crds.sh printed no CRDs"
    );
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Runtime::new()
                .unwrap()
                .block_on(install_crds(&paths))
        })
        .join()
        .expect("installing the extra CRDs")
    });
});

async fn install_crds(paths: &[String]) {
    let client = client(&CONTROL_PLANE.admin_kubeconfig).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut installed = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        for doc in split_documents(&text) {
            match create_yaml(&client, &doc, false).await {
                Ok(_) => {}
                Err(e) if e.starts_with("409") => {}
                Err(e) => panic!("installing {} from {path}: {e}", doc.describe()),
            }
            installed.push(doc.value);
        }
    }
    for crd in &installed {
        let name = crd["metadata"]["name"].as_str().unwrap();
        wait_for(&format!("CRD {name} established"), || async {
            let conditions = crds.get(name).await.ok()?.status?.conditions?;
            conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
                .then_some(())
        })
        .await;
        let group = crd["spec"]["group"].as_str().unwrap();
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap();
        for version in crd["spec"]["versions"].as_array().unwrap() {
            let gvk = GroupVersionKind::gvk(group, version["name"].as_str().unwrap(), kind);
            wait_for(&format!("{gvk:?} in discovery"), || async {
                kube::discovery::pinned_kind(&client, &gvk).await.ok()
            })
            .await;
        }
    }
}

/// `object` with an extra `spec.bogusField` must be refused (dry run, strict validation).
pub(super) async fn assert_unknown_field_refused(client: &Client, object: &Value) {
    let mut bogus = object.clone();
    bogus["metadata"] = json!({
        "name": format!("{}-bogus", object["metadata"]["name"].as_str().unwrap()),
        "namespace": object["metadata"]["namespace"],
    });
    bogus["spec"]["bogusField"] = json!(1);
    let refused = create_yaml(client, &json_doc(&bogus), true).await;
    assert!(
        matches!(&refused, Err(e) if e.contains("bogusField")),
        "{} with an unknown field was not refused: {:?}",
        object["kind"],
        refused.map(|c| c.warnings)
    );
}

/// JSON is YAML: a document for `create_yaml` from a JSON value.
pub(super) fn json_doc(value: &Value) -> Doc {
    Doc {
        yaml: serde_json::to_string(value).unwrap(),
        value: value.clone(),
    }
}
