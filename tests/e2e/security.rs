//! A forged admission review (posted straight to the webhook, as anyone who reaches its
//! port can) makes nothing in the API server, while the same object created through the
//! API server still gets its cluster. Regression tests for the confused deputy of issue 16.

use std::time::{Duration, Instant};

use kube::api::ListParams;
use reqwest::Certificate;
use serde_json::{Value, json};

use crate::harness::*;

/// A hand-made review of a RayJob that was never created, from nobody.
fn forged_review(ns: &str, job: &Value) -> Value {
    forged(
        ns,
        job,
        json!({"group": "ray.io", "version": "v1", "kind": "RayJob"}),
    )
}

fn forged(ns: &str, object: &Value, kind: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "00000000-0000-0000-0000-000000000001",
            "kind": kind,
            "name": object["metadata"]["name"],
            "namespace": ns,
            "operation": "CREATE",
            "userInfo": {"username": "system:anonymous", "groups": ["system:unauthenticated"]},
            "object": object,
            "dryRun": false,
        }
    })
}

/// The attacker's job: a privileged head running their image with the host's root.
fn evil_job(ns: &str) -> Value {
    let mut job = sample("rayjob-run-a.yaml");
    job["metadata"]["name"] = json!("forged");
    job["metadata"]["namespace"] = json!(ns);
    let pod = &mut job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"];
    pod["serviceAccountName"] = json!("cluster-admin-sa");
    pod["volumes"] = json!([{"name": "root", "hostPath": {"path": "/"}}]);
    let head = &mut pod["containers"][0];
    head["image"] = json!("attacker/miner:latest");
    head["securityContext"] = json!({"privileged": true});
    head["volumeMounts"] = json!([{"name": "root", "mountPath": "/host"}]);
    job
}

/// Posts a review straight to the webhook, as anyone who reaches its port can.
async fn post_forged(env: &TestEnv, review: &Value) -> Value {
    let http = reqwest::Client::builder()
        .add_root_certificate(Certificate::from_pem(env.ca.as_bytes()).unwrap())
        .build()
        .unwrap();
    let answer: Value = http
        .post(&env.instances[0].url)
        .json(review)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    answer
}

#[tokio::test]
async fn a_forged_rayjob_review_creates_nothing() {
    let env = TestEnv::new("forged", DEFAULT_CONFIG, 1).await;
    let evil = evil_job(&env.ns);
    let answer = post_forged(&env, &forged_review(&env.ns, &evil)).await;
    // The webhook answers (it cannot tell a forged review), but acts on nothing.
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    let forged_cluster = {
        let mut stored = evil.clone();
        let ops: json_patch::Patch = serde_json::from_slice(
            &data_encoding::BASE64
                .decode(answer["response"]["patch"].as_str().unwrap().as_bytes())
                .unwrap(),
        )
        .unwrap();
        json_patch::patch(&mut stored, &ops).unwrap();
        stored["spec"]["clusterSelector"]["ray.io/cluster"]
            .as_str()
            .unwrap()
            .to_string()
    };

    // A real job, created through the API server afterwards, gets its cluster: by then
    // the provisioner has looked at everything it was told about before.
    let real = create_in(
        &env.admin,
        &env.ns,
        sample("rayjob-other-config.yaml"),
        false,
    )
    .await;
    let real_cluster = real["spec"]["clusterSelector"]["ray.io/cluster"]
        .as_str()
        .unwrap()
        .to_string();
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    wait_for("the real job's cluster", || async {
        clusters.get_opt(&real_cluster).await.ok().flatten()
    })
    .await;
    assert!(
        clusters.get_opt(&forged_cluster).await.unwrap().is_none(),
        "a forged review made RayCluster {forged_cluster}"
    );
    let all = clusters.list(&Default::default()).await.unwrap();
    assert_eq!(all.items.len(), 1, "only the real job's cluster exists");
    let text = serde_json::to_string(&all.items).unwrap();
    assert!(!text.contains("attacker/miner"), "{text}");
}

/// A job edited after admission to carry another spec under its selector: the
/// provisioner refuses it (the spec does not hash to the selected name).
#[tokio::test]
async fn a_stored_job_whose_spec_does_not_match_its_selector_gets_no_cluster() {
    let env = TestEnv::new("tamper", DEFAULT_CONFIG, 1).await;
    // Made by hand (in a namespace the webhook skips, so stored exactly as written): it
    // claims a shared cluster's name and carries an attacker's spec for it.
    let mut evil = evil_job(&env.ns_off);
    evil["metadata"]["name"] = json!("hand-made");
    evil["metadata"]["labels"] = json!({"rayshare.io/cluster": "ray-aaaaaaaaaaaaaaaaaaaa", "rayshare.io/instance": env.name});
    let spec = serde_json::to_string(&evil["spec"]["rayClusterSpec"]).unwrap();
    evil["metadata"]["annotations"] = json!({"rayshare.io/cluster-spec": spec});
    let spec_obj = evil["spec"].as_object_mut().unwrap();
    spec_obj.remove("rayClusterSpec");
    spec_obj.insert(
        "clusterSelector".into(),
        json!({"ray.io/cluster": "ray-aaaaaaaaaaaaaaaaaaaa"}),
    );
    create_in(&env.admin, &env.ns_off, evil, false).await;
    let refused = || async {
        let m = env.instances[0].metrics().await;
        m.contains("rayshare_errors_total{cause=\"provision_refused\"}")
            .then_some(())
    };
    wait_for("the provisioner to refuse the hand-made job", refused).await;
    let off = env.api(&ray_cluster_resource(), &env.ns_off);
    assert!(
        off.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

/// A forged review of a Volcano pod asking for a whole cluster's worth of resources.
/// Made at admission (Volcano's webhook needs the group before the pod), its group is
/// one no stored pod takes up, so the leader deletes it after `unconfirmedGraceSeconds`,
/// at its first sweep past that; the same pod made through the API server keeps its
/// group, taken up with its uid.
#[tokio::test]
async fn a_forged_volcano_pod_review_holds_capacity_only_briefly() {
    const GRACE: Duration = Duration::from_secs(2);
    const SWEEP: Duration = Duration::from_secs(1);
    // One sweep's own API calls (list the groups, list the pods, delete), counted from
    // the tick that started it.
    const SWEEP_WORK: Duration = Duration::from_millis(500);
    let config = format!(
        "podGroups:\n  unconfirmedGraceSeconds: {}\n  reconcileIntervalSeconds: {}\n",
        GRACE.as_secs(),
        SWEEP.as_secs()
    );
    let env = TestEnv::new("forged-pod", &config, 1).await;
    let groups = env.api(&pod_group_resource(), &env.ns);
    let seen = Seen::watch(&groups).await;
    let sent = Instant::now();
    let answer = post_forged(&env, &forged(&env.ns, &greedy_pod(&env), pod_kind())).await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");

    let mut real = sample("volcano-pod.yaml");
    real["metadata"] = json!({"name": "honest"});
    create_in(&env.admin, &env.ns, real, false).await;
    let (deleted, _) = wait_for("the forged review's group to be deleted", || async {
        seen.first("DELETED", "greedy")
    })
    .await;
    // From before the review was sent, so at least its whole life. Its age is read from
    // `creationTimestamp` (whole seconds), so it may go up to a second short of the grace.
    let lived = deleted - sent;
    eprintln!("a forged review's PodGroup lived {lived:?} (grace {GRACE:?}, sweep {SWEEP:?})");
    assert!(
        lived >= GRACE - Duration::from_secs(1),
        "deleted early: {lived:?}"
    );
    assert!(
        lived <= GRACE + SWEEP + SWEEP_WORK,
        "held past its grace and the next sweep: {lived:?}"
    );
    // It was made at admission, holding nothing of what the review asked for, and it is
    // the leader that deleted it.
    let (_, added) = seen.first("ADDED", "greedy").expect("made at admission");
    let spec = &added.data["spec"];
    assert_eq!(spec["minResources"], json!({"cpu": "1000000000"}), "{spec}");
    assert!(spec.get("priorityClassName").is_none(), "{spec}");
    let metrics = env.instances[0].metrics().await;
    let deleted = metrics
        .lines()
        .find_map(|l| l.strip_prefix("rayshare_objects_deleted_total{kind=\"PodGroup\"} "))
        .and_then(|n| n.parse::<u32>().ok());
    assert_eq!(deleted, Some(1), "{metrics}");
    crate::pod_groups::made(&groups, "honest").await;
}

/// With `podGroups.createAtAdmission: false` a forged review makes no group at all, and
/// a stored pod's group is made at once (the grace, an hour here, is no wait for it:
/// no replica made it at admission, so none is left to take it up).
#[tokio::test]
async fn a_forged_volcano_pod_review_makes_nothing_when_groups_wait_for_the_pod() {
    let config = "podGroups:\n  createAtAdmission: false\n  unconfirmedGraceSeconds: 3600\n";
    let env = TestEnv::new("forged-pod-late", config, 1).await;
    let answer = post_forged(&env, &forged(&env.ns, &greedy_pod(&env), pod_kind())).await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    let groups = env.api(&pod_group_resource(), &env.ns);
    let mut real = sample("volcano-pod.yaml");
    real["metadata"] = json!({"name": "honest"});
    create_in(&env.admin, &env.ns, real, false).await;
    wait_for("the honest pod's group", || async {
        groups.get_opt("honest").await.ok().flatten()
    })
    .await;
    assert!(groups.get_opt("greedy").await.unwrap().is_none());
    let all = groups.list(&Default::default()).await.unwrap().items;
    assert_eq!(all.len(), 1, "only the stored pod's group exists");
}

/// A review names its namespace itself. For one the webhook does not serve (kube-system,
/// a namespace without the opt-in label) rayshare makes nothing and answers unchanged;
/// in a served one the group it makes holds no capacity (no `minResources`, no priority).
#[tokio::test]
async fn a_forged_pod_review_makes_nothing_outside_what_rayshare_serves() {
    let env = TestEnv::new("forged-elsewhere", "", 1).await;
    let off = format!("{}-off", env.ns);
    create_namespace(&env.admin, &off, &[]).await;
    for ns in ["kube-system", off.as_str()] {
        let mut pod = greedy_pod(&env);
        pod["metadata"]["namespace"] = json!(ns);
        let answer = post_forged(&env, &forged(ns, &pod, pod_kind())).await;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        assert!(answer["response"].get("patch").is_none(), "{answer}");
    }
    let answer = post_forged(&env, &forged(&env.ns, &greedy_pod(&env), pod_kind())).await;
    assert!(answer["response"].get("patch").is_some(), "{answer}");
    let made = env
        .api(&pod_group_resource(), &env.ns)
        .get("greedy")
        .await
        .unwrap();
    // More than any queue holds until a stored pod's requests replace it: Volcano leaves
    // such a group Pending, reserving nothing (tests/volcano: scheduling).
    assert_eq!(
        made.data["spec"]["minResources"],
        json!({"cpu": "1000000000"}),
        "{:?}",
        made.data
    );
    assert!(
        made.data["spec"].get("priorityClassName").is_none(),
        "{:?}",
        made.data
    );
    for ns in ["kube-system", off.as_str()] {
        let there = env.api(&pod_group_resource(), ns);
        assert!(
            there.get_opt("greedy").await.unwrap().is_none(),
            "a group in {ns}"
        );
    }
    let metrics = env.instances[0].metrics().await;
    assert!(
        metrics.contains(r#"rayshare_errors_total{cause="not_served"} 2"#),
        "{metrics}"
    );
}

fn greedy_pod(env: &TestEnv) -> Value {
    let mut pod = sample("volcano-pod.yaml");
    pod["metadata"] = json!({"name": "greedy", "namespace": env.ns,
        "annotations": {"scheduling.volcano.sh/queue-name": "research"}});
    let huge = json!({"cpu": "100000", "memory": "1000Ti", "nvidia.com/gpu": "10000"});
    pod["spec"]["containers"][0]["resources"]["requests"] = huge;
    pod["spec"]["priorityClassName"] = json!("system-node-critical");
    pod
}

fn pod_kind() -> Value {
    json!({"group": "", "version": "v1", "kind": "Pod"})
}

/// With `--client-ca`, only the API server (presenting the client certificate its
/// AdmissionConfiguration names) completes the TLS handshake: objects made through it are
/// still rewritten, a review posted by anyone else is refused before it is read.
#[tokio::test]
async fn with_a_client_ca_only_the_api_server_is_heard() {
    let ca = webhook_client_ca().display().to_string();
    let env = TestEnv::with_args("mtls", DEFAULT_CONFIG, 1, &["--client-ca".into(), ca]).await;
    let job = create_in(&env.admin, &env.ns, sample("rayjob-run-a.yaml"), false).await;
    assert!(
        job["spec"]["clusterSelector"].is_object(),
        "the API server's review was answered: {}",
        job["spec"]
    );
    let http = reqwest::Client::builder()
        .add_root_certificate(Certificate::from_pem(env.ca.as_bytes()).unwrap())
        .build()
        .unwrap();
    let refused = http
        .post(&env.instances[0].url)
        .json(&forged_review(&env.ns, &evil_job(&env.ns)))
        .send()
        .await;
    assert!(
        refused.is_err(),
        "a client without a certificate got an answer: {refused:?}"
    );
}

/// A certificate the client CA signed for another name (a user's, a kubelet's: a cluster CA
/// signs those too) is refused at the handshake unless `--client-cn` allows it; the API
/// server's (`kube-apiserver`) still gets its answers.
#[tokio::test]
async fn a_client_certificate_for_another_name_is_refused_at_the_handshake() {
    // One bundle: the CA of the API server's webhook client certificate, and one that
    // signed a kubelet's.
    let node = rayshare::http::certs::generate_client("system:node:worker-1").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("client-ca.crt");
    let api_server_ca = std::fs::read_to_string(webhook_client_ca()).unwrap();
    std::fs::write(&bundle, format!("{api_server_ca}{}", node.ca_pem)).unwrap();
    let bundle = bundle.display().to_string();
    let post_as_node = |env: &TestEnv| {
        let identity =
            reqwest::Identity::from_pem(format!("{}{}", node.cert_pem, node.key_pem).as_bytes())
                .unwrap();
        let http = reqwest::Client::builder()
            .add_root_certificate(Certificate::from_pem(env.ca.as_bytes()).unwrap())
            .identity(identity)
            .build()
            .unwrap();
        http.post(&env.instances[0].url)
            .json(&forged_review(&env.ns, &evil_job(&env.ns)))
            .send()
    };

    let env = TestEnv::with_args(
        "mtls-cn",
        DEFAULT_CONFIG,
        1,
        &["--client-ca".into(), bundle.clone()],
    )
    .await;
    let job = create_in(&env.admin, &env.ns, sample("rayjob-run-a.yaml"), false).await;
    assert!(
        job["spec"]["clusterSelector"].is_object(),
        "{}",
        job["spec"]
    );
    let refused = post_as_node(&env).await;
    assert!(
        refused.is_err(),
        "a kubelet's certificate got an answer: {refused:?}"
    );
    // The refusal is logged (the log is written off the handshake's path).
    env.instances[0].wait_for_log("system:node:worker-1").await;

    // The chain alone (`--client-cn=`) would have let it in.
    let chain_only = TestEnv::with_args(
        "mtls-chain",
        DEFAULT_CONFIG,
        1,
        &["--client-ca".into(), bundle, "--client-cn=".into()],
    )
    .await;
    let answered = post_as_node(&chain_only).await.expect("answered");
    assert!(answered.status().is_success(), "{answered:?}");
}

/// Forged reviews of multi-host worker pods claim slots (a claim must be unique before
/// its pod is stored), but hold them no longer than `indices.claimInFlightSeconds`: the
/// first real worker still gets slot (0, 0).
#[tokio::test]
async fn forged_worker_reviews_do_not_keep_real_workers_from_their_slots() {
    let config = "indices:\n  claimInFlightSeconds: 1\n";
    let env = TestEnv::new("forged-worker", config, 1).await;
    let cluster = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "tpu", "namespace": env.ns},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray"}]}}},
                 "workerGroupSpecs": [{"groupName": "a", "replicas": 2, "numOfHosts": 4, "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}]}}}]}});
    let stored = apply(&env.admin, &cluster).await;
    let worker = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": env.ns,
                "labels": {"ray.io/cluster": "tpu", "ray.io/group": "a", "ray.io/node-type": "worker"},
                "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "tpu",
                    "uid": stored.metadata.uid, "controller": true}]},
            "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}]}})
    };
    let kind = json!({"group": "", "version": "v1", "kind": "Pod"});
    // Forged until the webhook knows the cluster (each answered one claimed a slot).
    let indexed = |answer: &Value| answer["response"]["patch"].is_string();
    for i in 0.. {
        let answer = post_forged(
            &env,
            &forged(&env.ns, &worker(&format!("ghost-{i}")), kind.clone()),
        )
        .await;
        if indexed(&answer) {
            break;
        }
        assert!(
            i < 600,
            "the webhook never indexed a forged worker: {answer}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    post_forged(&env, &forged(&env.ns, &worker("ghost-last"), kind)).await;
    let leases = env.api(
        &resource("coordination.k8s.io", "v1", "Lease", "leases"),
        &env.ns,
    );
    let claims = ListParams::default().labels("rayshare.io/index-claim=true");
    let forged_claims = leases.list(&claims).await.unwrap().items;
    assert!(forged_claims.len() >= 2, "forged reviews claimed slots");
    wait_for(
        "the forged claims to leave the in-flight window",
        || async {
            let now = k8s_openapi::jiff::Timestamp::now();
            forged_claims
                .iter()
                .all(|c| {
                    let t = c.metadata.creation_timestamp.as_ref().unwrap().0;
                    now.duration_since(t).as_secs() > 1
                })
                .then_some(())
        },
    )
    .await;
    let real = create_in(&env.admin, &env.ns, worker("real"), false).await;
    let labels = &real["metadata"]["labels"];
    assert_eq!(
        (
            &labels["ray.io/worker-group-replica-index"],
            &labels["ray.io/replica-host-index"]
        ),
        (&json!("0"), &json!("0")),
        "{labels}"
    );
}
