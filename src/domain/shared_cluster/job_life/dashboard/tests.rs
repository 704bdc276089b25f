//! Tests of the dashboard's address and the auth token: which head pod, which Secret.

use rstest::rstest;
use serde_json::{Value, json};

use super::*;

fn cluster() -> Value {
    json!({"metadata": {"name": "c1", "namespace": "team", "uid": "u-1"},
        "status": {"head": {"podName": "c1-head-x"}}})
}

/// A pod labelled as c1's head, `owner` its controller, running at `ip`.
fn head_pod(owner: &str, ip: &str, ports: Value) -> Value {
    named_head_pod("c1-head-x", owner, ip, ports)
}

fn named_head_pod(name: &str, owner: &str, ip: &str, ports: Value) -> Value {
    json!({
        "metadata": {"name": name, "labels": {"ray.io/cluster": "c1", "ray.io/node-type": "head"},
            "ownerReferences": [{"kind": "RayCluster", "name": "c1", "uid": owner, "controller": true}]},
        "spec": {"containers": [{"name": "ray-head", "ports": ports}]},
        "status": {"phase": "Running", "podIP": ip},
    })
}

#[rstest]
#[case::kuberays_head(vec![head_pod("u-1", "10.0.0.7", json!([]))], Ok("http://10.0.0.7:8265"))]
#[case::dashboard_port(
    vec![head_pod("u-1", "10.0.0.7", json!([{"name": "gcs", "containerPort": 6379}, {"name": "dashboard", "containerPort": 9000}]))],
    Ok("http://10.0.0.7:9000")
)]
#[case::ipv6(vec![head_pod("u-1", "fd00::7", json!([]))], Ok("http://[fd00::7]:8265"))]
#[case::someone_elses_pod(vec![head_pod("u-2", "10.9.9.9", json!([]))], Err(NoHead::NotRunning))]
#[case::a_hostname_is_not_an_ip(
    vec![head_pod("u-1", "evil.example:80/x?", json!([]))],
    Err(NoHead::NotRunning)
)]
#[case::impostor_first(
    vec![head_pod("u-2", "10.9.9.9", json!([])), head_pod("u-1", "10.0.0.7", json!([]))],
    Ok("http://10.0.0.7:8265")
)]
#[case::forged_owner_but_not_the_reported_head(
    vec![named_head_pod("a-impostor", "u-1", "10.9.9.9", json!([])), head_pod("u-1", "10.0.0.7", json!([]))],
    Ok("http://10.0.0.7:8265")
)]
#[case::only_a_forged_owner(
    vec![named_head_pod("a-impostor", "u-1", "10.9.9.9", json!([]))],
    Err(NoHead::NotRunning)
)]
#[case::none(vec![], Err(NoHead::NotRunning))]
fn the_dashboard_is_the_head_kuberay_made(
    #[case] pods: Vec<Value>,
    #[case] expected: Result<&str, NoHead>,
) {
    let got = head(&cluster(), &pods)
        .map(|h| dashboard_url("http://{headIP}:{port}/", &cluster(), Some(&h)).unwrap());
    assert_eq!(got, expected.map(str::to_string));
}

#[test]
fn a_pod_not_running_or_being_deleted_is_no_head() {
    let mut pending = head_pod("u-1", "10.0.0.7", json!([]));
    pending["status"]["phase"] = json!("Pending");
    let mut deleting = head_pod("u-1", "10.0.0.7", json!([]));
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let mut worker = head_pod("u-1", "10.0.0.7", json!([]));
    worker["metadata"]["labels"]["ray.io/node-type"] = json!("worker");
    // On the host network its IP is the node's, its port anything.
    let mut host = head_pod("u-1", "10.0.0.7", json!([]));
    host["spec"]["hostNetwork"] = json!(true);
    for pod in [pending, deleting, worker, host] {
        assert_eq!(head(&cluster(), &[pod]), Err(NoHead::NotRunning));
    }
    let no_uid = json!({"metadata": {"name": "c1", "namespace": "team"}});
    assert_eq!(head(&no_uid, &[]), Err(NoHead::NoUid));
    let unreported = json!({"metadata": {"name": "c1", "namespace": "team", "uid": "u-1"}});
    let pod = head_pod("u-1", "10.0.0.7", json!([]));
    assert_eq!(head(&unreported, &[pod]), Err(NoHead::NotReported));
}

#[test]
fn a_fixed_address_needs_no_head() {
    assert!(!needs_head("http://127.0.0.1:8265/{namespace}"));
    assert_eq!(
        dashboard_url("http://127.0.0.1:8265/", &cluster(), None).as_deref(),
        Some("http://127.0.0.1:8265")
    );
    assert_eq!(
        dashboard_url("http://{headIP}:{port}", &cluster(), None),
        None
    );
}

fn token_cluster(auth: Value) -> Value {
    json!({"metadata": {"name": "c1", "namespace": "team", "uid": "u-1"}, "spec": {"authOptions": auth}})
}

fn secret(owner: Option<&str>, token: &str) -> Value {
    let mut s = json!({"metadata": {"name": "c1"},
        "data": {AUTH_TOKEN_KEY: data_encoding::BASE64.encode(token.as_bytes())}});
    if let Some(uid) = owner {
        s["metadata"]["ownerReferences"] =
            json!([{"kind": "RayCluster", "uid": uid, "controller": true}]);
    }
    s
}

#[rstest]
#[case::no_auth(json!(null), None)]
#[case::disabled(json!({"mode": "disabled"}), None)]
#[case::kuberays_secret(json!({"mode": "token"}), Some(("c1", true)))]
#[case::named_secret(json!({"mode": "token", "secretName": "mine"}), Some(("mine", false)))]
fn token_mode_clusters_name_their_secret(
    #[case] auth: Value,
    #[case] expected: Option<(&str, bool)>,
) {
    let got = auth_secret(&token_cluster(auth));
    let got = got.as_ref().map(|s| (s.name.as_str(), s.made_for_cluster));
    assert_eq!(got, expected);
}

#[test]
fn kuberays_long_names_are_cut_as_kuberay_cuts_them() {
    let long = format!("7{}", "a".repeat(60));
    let cluster = json!({"metadata": {"name": long}, "spec": {"authOptions": {"mode": "token"}}});
    let name = auth_secret(&cluster).unwrap().name;
    assert_eq!(name, "a".repeat(50));
}

#[test]
fn the_token_comes_only_from_the_secret_kuberay_made_for_the_cluster() {
    let cluster = token_cluster(json!({"mode": "token"}));
    let expected = auth_secret(&cluster).unwrap();
    assert_eq!(
        auth_token(&secret(Some("u-1"), "s3cret"), &cluster, &expected),
        Ok("s3cret".to_string())
    );
    // A Secret of that name that someone else made is not the cluster's.
    for other in [secret(Some("u-2"), "s3cret"), secret(None, "s3cret")] {
        assert_eq!(
            auth_token(&other, &cluster, &expected),
            Err(AuthError::NotTheClusters("c1".into()))
        );
    }
    // No token, or one that cannot travel in a header.
    for bad in ["", "line\nbreak"] {
        assert_eq!(
            auth_token(&secret(Some("u-1"), bad), &cluster, &expected),
            Err(AuthError::NoToken("c1".into()))
        );
    }
    // A Secret the spec names is the user's: used as KubeRay uses it.
    let named = token_cluster(json!({"mode": "token", "secretName": "mine"}));
    let expected = auth_secret(&named).unwrap();
    assert_eq!(
        auth_token(&secret(None, "t0k"), &named, &expected),
        Ok("t0k".to_string())
    );
}
