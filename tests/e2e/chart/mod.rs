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

use std::sync::LazyLock;

use serde_json::{Value, json};

use crate::harness::*;

mod documents;

use documents::{EXTRA_CRDS, assert_unknown_field_refused, create_yaml, json_doc, split_documents};

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
    let ca = rayshare::http::certs::generate(&["rayshare-provided.e2e-chart-provided.svc".into()])
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

/// The opt-in uninstall hook: its Job is accepted as written (strict fields, no warning:
/// Pod Security's `restricted` warns about a Job whose pod template would be refused).
#[tokio::test]
async fn chart_uninstall_hook_is_accepted_by_the_api_server() {
    let stored = check_chart(
        "uninstall-hook",
        &["uninstall.drain=true", "config.instance=team-a"],
        &["Secret", "Job"],
    )
    .await;
    let job = find(&stored, "Job");
    let admin = client(&CONTROL_PLANE.admin_kubeconfig).await;
    assert_unknown_field_refused(&admin, job).await;
    let command = &job["spec"]["template"]["spec"]["containers"][0]["command"];
    assert_eq!(
        command.as_array().unwrap()[..4],
        [
            json!("/usr/local/bin/rayshare"),
            json!("drain"),
            json!("--instance"),
            json!("team-a")
        ]
    );
    assert_eq!(job["metadata"]["annotations"]["helm.sh/hook"], "pre-delete");
}
