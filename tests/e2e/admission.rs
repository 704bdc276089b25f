//! The admission contract through the real API server: disabled namespaces, dry runs,
//! fail-open when rayshare is down, and nothing lost to CRD pruning.

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

use crate::harness::*;

/// Every leaf of `intended` is in `stored` with the same value (the API server may add
/// defaults, but must not have pruned anything).
fn assert_subset(intended: &Value, stored: &Value, path: &str) {
    match (intended, stored) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let child = format!("{path}/{k}");
                let other = b
                    .get(k)
                    .unwrap_or_else(|| panic!("{child} was pruned by the API server"));
                assert_subset(v, other, &child);
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{path}: length differs");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert_subset(x, y, &format!("{path}/{i}"));
            }
        }
        (a, b) => assert_eq!(a, b, "{path}"),
    }
}

#[tokio::test]
async fn stored_objects_are_what_rayshare_meant_nothing_pruned() {
    let env = TestEnv::new("pruning", DEFAULT_CONFIG, 1).await;
    let mut job = sample("rayjob-run-a.yaml");
    job["metadata"]["namespace"] = json!(env.ns);
    // What rayshare means to store, computed offline by the same code.
    let text = serde_json::to_string(&job).unwrap();
    let config = rayshare::config::Config {
        instance: env.name.clone(),
        ..Default::default()
    };
    let offline = rayshare::offline::run(&text, &env.ns, &config)
        .await
        .unwrap();
    let intended_cluster = &offline[0].creates[0];

    let stored_job = create_in(&env.admin, &env.ns, job, false).await;
    // The job carries the uid of its admission request; offline that is a placeholder.
    let token = stored_job["metadata"]["labels"]
        [rayshare::domain::shared_cluster::job_life::TOKEN_LABEL]
        .as_str()
        .expect("the admission's token label");
    let intended_job: Value = serde_json::from_str(
        &offline[0]
            .object
            .to_string()
            .replace("rayshare-mutate-0", token),
    )
    .unwrap();
    assert_subset(&intended_job["spec"], &stored_job["spec"], "RayJob.spec");
    assert_subset(
        &intended_job["metadata"]["labels"],
        &stored_job["metadata"]["labels"],
        "RayJob labels",
    );
    let name = intended_cluster["metadata"]["name"].as_str().unwrap();
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    let stored_cluster = wait_for("the provisioner to make the cluster", || async {
        clusters.get_opt(name).await.ok().flatten()
    })
    .await;
    let stored_cluster = serde_json::to_value(stored_cluster).unwrap();
    assert_subset(
        &intended_cluster["spec"],
        &stored_cluster["spec"],
        "RayCluster.spec",
    );
    assert_subset(
        &intended_cluster["metadata"]["labels"],
        &stored_cluster["metadata"]["labels"],
        "labels",
    );
}

#[tokio::test]
async fn disabled_namespace_is_untouched() {
    let env = TestEnv::new("disabled", DEFAULT_CONFIG, 1).await;
    let stored = create_in(&env.admin, &env.ns_off, sample("rayjob-run-a.yaml"), false).await;
    assert!(stored["spec"]["rayClusterSpec"].is_object());
    assert!(stored["spec"].get("clusterSelector").is_none());
    assert!(
        env.api(&ray_cluster_resource(), &env.ns_off)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn with_rayshare_down_objects_are_created_unchanged() {
    let mut env = TestEnv::new("down", DEFAULT_CONFIG, 1).await;
    env.instances[0].stop();
    // failurePolicy Ignore (the chart's default): the API server admits unchanged.
    let stored = create_in(&env.admin, &env.ns, sample("rayjob-run-a.yaml"), false).await;
    assert!(stored["spec"]["rayClusterSpec"].is_object());
    let mut pod = sample("volcano-pod.yaml");
    pod["metadata"] = json!({"name": "while-down"});
    let pod: Pod = serde_json::from_value(pod).unwrap();
    let pod = Api::<Pod>::namespaced(env.admin.clone(), &env.ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    let annotations = pod.metadata.annotations.unwrap_or_default();
    assert!(!annotations.contains_key("scheduling.k8s.io/group-name"));
}

/// The API server keeps one client per webhook and sends its calls over one HTTP/2
/// connection while it stays open, many at once: why one API server's burst lands on one
/// rayshare replica (docs/operating.md).
#[tokio::test]
async fn the_api_server_sends_a_burst_over_one_http2_connection() {
    const PODS: usize = 60;
    let env = TestEnv::new("connections", DEFAULT_CONFIG, 1).await;
    let rayshare = &env.instances[0];
    let reviewed = |m: &str| metric_sum(m, "rayshare_admission_requests_total{", &["kind=\"Pod\""]);
    let before = rayshare.metrics().await;
    let pods: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);
    let pod: Pod = serde_json::from_value(sample("volcano-pod.yaml")).unwrap();
    // Dry runs: every one is reviewed, nothing is stored or made.
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let answered = futures::future::join_all((0..PODS).map(|_| pods.create(&dry, &pod))).await;
    assert!(answered.iter().all(Result::is_ok), "{answered:?}");
    let after = rayshare.metrics().await;
    assert_eq!(reviewed(&after) - reviewed(&before), PODS as f64);
    let connections = |protocol: &str| {
        let label = format!("protocol=\"{protocol}\"");
        metric_sum(&after, "rayshare_webhook_connections_total{", &[&label])
    };
    let (h1, h2) = (connections("http/1.1").abs(), connections("h2").abs());
    let open = metric_sum(&after, "rayshare_webhook_connections_open ", &[]).abs();
    let seen = format!("{PODS} calls: {h2} HTTP/2, {h1} HTTP/1.1 connections, {open} open");
    // Over HTTP/1.1 the API server would have opened a connection per call in flight.
    assert_eq!(h1, 0.0, "{seen}");
    assert!((1.0..=2.0).contains(&h2), "{seen}");
    assert_eq!(open, 1.0, "{seen}");
}

/// An API server whose `caBundle` no longer names rayshare's CA (a rotation gone wrong):
/// its calls fail TLS, the pod passes unchanged (`failurePolicy: Ignore`), and both sides
/// count it: the API server as a fail-open, rayshare as `cause="tls_handshake"`
/// (docs/runbooks.md, RayshareErrors).
#[tokio::test]
async fn a_stale_ca_bundle_fails_open_and_both_sides_count_it() {
    let env = TestEnv::new("stale-ca", DEFAULT_CONFIG, 1).await;
    let handshakes = |m: &str| metric_sum(m, "rayshare_errors_total{", &["tls_handshake"]);
    let rayshare = &env.instances[0];
    assert_eq!(handshakes(&rayshare.metrics().await), 0.0);
    let stranger = rayshare::http::certs::generate(&["127.0.0.1".into()]).unwrap();
    let bundle = data_encoding::BASE64.encode(stranger.ca_pem.as_bytes());
    let mut mwc = env.webhook_configuration();
    for webhook in mwc["webhooks"].as_array_mut().unwrap() {
        webhook["clientConfig"]["caBundle"] = json!(bundle);
    }
    let registrations = Api::<MutatingWebhookConfiguration>::all(env.admin.clone());
    let name = mwc["metadata"]["name"].as_str().unwrap().to_string();
    let stored = registrations.get(&name).await.unwrap();
    mwc["metadata"]["resourceVersion"] = json!(stored.metadata.resource_version);
    let stale: MutatingWebhookConfiguration = serde_json::from_value(mwc).unwrap();
    registrations
        .replace(&name, &PostParams::default(), &stale)
        .await
        .unwrap();
    // The API server picks the change up from its own watch: until then rayshare still
    // answers. A dry-run Volcano pod comes back without rayshare's group once it does.
    let pods: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);
    let pod: Pod = serde_json::from_value(sample("volcano-pod.yaml")).unwrap();
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    wait_for("a pod let through unchanged", || async {
        let created = pods.create(&dry, &pod).await.ok()?;
        let grouped = created
            .annotations()
            .contains_key("scheduling.k8s.io/group-name");
        (!grouped).then_some(())
    })
    .await;
    assert!(env.api_server_fail_opens().await >= 1.0);
    wait_for("rayshare to count the failed handshake", || async {
        (handshakes(&rayshare.metrics().await) >= 1.0).then_some(())
    })
    .await;
}
