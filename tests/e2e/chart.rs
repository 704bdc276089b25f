//! The Helm chart against the real API server: everything the chart renders, in each
//! certificate mode and with the ServiceMonitor, is created with a server-side dry run in a
//! fresh namespace (rendered for that namespace, under a release name of its own so that
//! the cluster-scoped objects do not meet the harness's real `rayshare` ones).
//!
//! The objects go to the API server as the YAML helm printed (so it reads them as kubectl
//! and helm do: YAML 1.1, `defaultMode: 0440` is octal), with `fieldValidation=Strict`
//! (an unknown or duplicate field is an error, for built-in kinds and CRDs alike), and the
//! answer must carry no warnings. The namespaces enforce the `restricted` Pod Security
//! Standard, and the Deployment's pod template is also admitted as a Pod, which is where
//! that standard is enforced.
//!
//! The cert-manager and Prometheus Operator CRDs come from their Go modules
//! (tests/tools/extra-crds.sh) and are installed once per control plane.

use std::process::{Command, Stdio};
use std::sync::LazyLock;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use kube::{Client, Resource as _};
use serde_json::{Value, json};

use crate::harness::*;

const ENFORCE: &str = "pod-security.kubernetes.io/enforce";

/// Kinds every configuration renders.
const COMMON_KINDS: &[&str] = &[
    "ClusterRole",
    "ClusterRoleBinding",
    "ConfigMap",
    "Deployment",
    "MutatingWebhookConfiguration",
    "PodDisruptionBudget",
    "Role",
    "RoleBinding",
    "Service",
    "ServiceAccount",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
];

/// One YAML document: its text as rendered, and what it says.
struct Doc {
    yaml: String,
    value: Value,
}

impl Doc {
    fn describe(&self) -> String {
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
fn split_documents(text: &str) -> Vec<Doc> {
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
struct Created {
    object: Value,
    warnings: Vec<String>,
}

/// POSTs `doc` as YAML with `fieldValidation=Strict`, optionally as a dry run.
async fn create_yaml(client: &Client, doc: &Doc, dry_run: bool) -> Result<Created, String> {
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
static EXTRA_CRDS: LazyLock<()> = LazyLock::new(|| {
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

/// Renders the chart as release `rayshare-<case>` into namespace `e2e-chart-<case>`, checks
/// that it rendered exactly `COMMON_KINDS` + `extra_kinds`, and dry-run creates every
/// object, then the Deployment's pod template as a Pod. Returns the objects as the API
/// server would store them, by kind.
async fn check_chart(case: &str, sets: &[&str], extra_kinds: &[&str]) -> Vec<Value> {
    LazyLock::force(&EXTRA_CRDS);
    let admin = client(&CONTROL_PLANE.admin_kubeconfig).await;
    let ns = format!("e2e-chart-{case}");
    let release = format!("rayshare-{case}");
    create_namespace(&admin, &ns, &[(ENFORCE, "restricted")]).await;

    let docs = split_documents(&helm_render(&release, &ns, None, sets));
    let mut kinds: Vec<&str> = docs
        .iter()
        .map(|d| d.value["kind"].as_str().unwrap())
        .collect();
    kinds.sort();
    let mut expected: Vec<&str> = COMMON_KINDS.iter().chain(extra_kinds).copied().collect();
    expected.sort();
    assert_eq!(kinds, expected, "{case}: rendered kinds");

    let mut stored = Vec::new();
    for doc in &docs {
        let created = create_yaml(&admin, doc, true)
            .await
            .unwrap_or_else(|e| panic!("{case}: {} refused: {e}\n{}", doc.describe(), doc.yaml));
        assert!(
            created.warnings.is_empty(),
            "{case}: {} drew warnings: {:?}",
            doc.describe(),
            created.warnings
        );
        stored.push(created.object);
    }

    // Strict field validation is armed: an unknown field is refused, not dropped.
    assert_unknown_field_refused(&admin, find(&stored, "Deployment")).await;

    // The pod the Deployment would make, against the namespace's `restricted` standard.
    let deployment = find(&stored, "Deployment");
    let template = &deployment["spec"]["template"];
    let mut metadata = template["metadata"].clone();
    metadata["name"] = json!(format!("{release}-pod"));
    metadata["namespace"] = json!(ns);
    let pod =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]});
    let created = create_yaml(&admin, &json_doc(&pod), true)
        .await
        .unwrap_or_else(|e| panic!("{case}: the Deployment's pod refused: {e}"));
    assert!(
        created.warnings.is_empty(),
        "{case}: the Deployment's pod drew warnings: {:?}",
        created.warnings
    );
    // ... and that standard is really enforced here: a privileged pod is refused.
    let mut privileged = pod.clone();
    privileged["metadata"]["name"] = json!(format!("{release}-privileged"));
    privileged["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
    let refused = create_yaml(&admin, &json_doc(&privileged), true).await;
    assert!(
        matches!(&refused, Err(e) if e.contains("violates PodSecurity")),
        "{case}: Pod Security admission is not enforcing: {:?}",
        refused.map(|c| c.object["metadata"]["name"].clone())
    );

    // The certificate Secret is mounted whole, read-only for the pod's group (0440 read
    // as octal, as helm and kubectl do).
    let tls_volume = template["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "tls")
        .expect("a tls volume");
    assert_eq!(tls_volume["secret"]["defaultMode"], json!(0o440), "{case}");
    // The webhook calls this release's Service.
    let webhook = &find(&stored, "MutatingWebhookConfiguration")["webhooks"][0];
    assert_eq!(
        webhook["clientConfig"]["service"],
        json!({"name": release, "namespace": ns, "path": "/mutate", "port": 443}),
        "{case}"
    );
    stored
}

/// `object` with an extra `spec.bogusField` must be refused (dry run, strict validation).
async fn assert_unknown_field_refused(client: &Client, object: &Value) {
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
fn json_doc(value: &Value) -> Doc {
    Doc {
        yaml: serde_json::to_string(value).unwrap(),
        value: value.clone(),
    }
}

fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let mut found = objects.iter().filter(|o| o["kind"] == kind);
    let first = found.next().unwrap_or_else(|| panic!("no {kind}"));
    assert!(found.next().is_none(), "more than one {kind}");
    first
}

fn ca_bundle(objects: &[Value]) -> &Value {
    &find(objects, "MutatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["caBundle"]
}

#[tokio::test]
async fn chart_self_signed_is_accepted_by_the_api_server() {
    let stored = check_chart("self-signed", &[], &["Secret"]).await;
    let secret = find(&stored, "Secret");
    assert_eq!(secret["metadata"]["name"], "rayshare-self-signed-tls");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    // The webhook trusts the CA the Secret was signed with.
    assert_eq!(ca_bundle(&stored), &secret["data"]["ca.crt"]);
}

#[tokio::test]
async fn chart_cert_manager_is_accepted_by_the_api_server() {
    let stored = check_chart(
        "cert-manager",
        &["certs.mode=certManager"],
        &["Certificate", "Certificate", "Issuer", "Issuer"],
    )
    .await;
    // cert-manager's CA injector fills the caBundle from the serving Certificate.
    let mwc = find(&stored, "MutatingWebhookConfiguration");
    assert_eq!(
        mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "e2e-chart-cert-manager/rayshare-cert-manager-tls"
    );
    assert!(ca_bundle(&stored).is_null());
    let serving = stored
        .iter()
        .find(|o| {
            o["kind"] == "Certificate" && o["metadata"]["name"] == "rayshare-cert-manager-tls"
        })
        .expect("the serving Certificate");
    assert_eq!(serving["spec"]["secretName"], "rayshare-cert-manager-tls");
    assert_eq!(
        serving["spec"]["dnsNames"][0],
        "rayshare-cert-manager.e2e-chart-cert-manager.svc"
    );
}

#[tokio::test]
async fn chart_provided_is_accepted_by_the_api_server() {
    let ca = rayshare::certs::generate(&["rayshare-provided.e2e-chart-provided.svc".into()])
        .unwrap()
        .ca_pem;
    let ca = data_encoding::BASE64.encode(ca.as_bytes());
    let ca_set = format!("certs.caBundle={ca}");
    let stored = check_chart(
        "provided",
        &[
            "certs.mode=provided",
            "certs.existingSecret=my-webhook-tls",
            &ca_set,
        ],
        &[],
    )
    .await;
    assert_eq!(ca_bundle(&stored), &json!(ca));
    let volumes = &find(&stored, "Deployment")["spec"]["template"]["spec"]["volumes"];
    assert!(
        volumes
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["secret"]["secretName"] == "my-webhook-tls"),
        "{volumes}"
    );
}

#[tokio::test]
async fn chart_service_monitor_is_accepted_by_the_api_server() {
    let stored = check_chart(
        "service-monitor",
        &[
            "serviceMonitor.enabled=true",
            "serviceMonitor.labels.release=prometheus",
            "serviceMonitor.relabelings[0].sourceLabels[0]=__meta_kubernetes_pod_node_name",
            "serviceMonitor.relabelings[0].targetLabel=node",
            "serviceMonitor.metricRelabelings[0].action=drop",
            "serviceMonitor.metricRelabelings[0].sourceLabels[0]=__name__",
            "serviceMonitor.metricRelabelings[0].regex=go_.*",
        ],
        &["Secret", "ServiceMonitor"],
    )
    .await;
    let monitor = find(&stored, "ServiceMonitor");
    let admin = client(&CONTROL_PLANE.admin_kubeconfig).await;
    assert_unknown_field_refused(&admin, monitor).await;
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], "admin");
    assert_eq!(endpoint["path"], "/metrics");
    // It selects the chart's Service (the one with the `admin` port).
    let service = find(&stored, "Service");
    for (k, v) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(&service["metadata"]["labels"][k], v, "{k}");
    }
}

#[tokio::test]
async fn chart_network_policy_is_accepted_by_the_api_server() {
    let stored = check_chart(
        "network-policy",
        &[
            "networkPolicy.enabled=true",
            "networkPolicy.egress.enabled=true",
            "networkPolicy.webhookFrom[0].ipBlock.cidr=10.0.0.0/24",
            "networkPolicy.egress.apiServer[0].ipBlock.cidr=10.0.0.1/32",
        ],
        &["Secret", "NetworkPolicy"],
    )
    .await;
    let policy = find(&stored, "NetworkPolicy");
    assert_eq!(
        policy["spec"]["policyTypes"],
        serde_json::json!(["Ingress", "Egress"])
    );
    assert_eq!(
        policy["spec"]["ingress"][0]["from"][0]["ipBlock"]["cidr"],
        "10.0.0.0/24"
    );
    let deployment = find(&stored, "Deployment");
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (k, v) in policy["spec"]["podSelector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(&pod_labels[k], v, "{k}");
    }
}
