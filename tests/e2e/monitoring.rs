//! The chart's Grafana dashboard and PrometheusRule, checked with the upstream projects'
//! own code against what rayshare and the real kube-apiserver export:
//! tests/tools/monitorcheck (Grafana's schema types, the Prometheus Operator's API types,
//! Prometheus' PromQL parser; every metric and label read must be in a live exposition),
//! then promtool (`check rules`, and the alerts' unit tests in
//! tests/fixtures/monitoring/rules.test.yaml).

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};

use crate::harness::*;

fn run(what: &str, cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {what}: {e}"));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{what} failed:\n{stdout}\n{stderr}");
    stdout.into_owned()
}

fn build_monitorcheck(dir: &Path) -> std::path::PathBuf {
    let bin = dir.join("monitorcheck");
    run(
        "go build tests/tools/monitorcheck",
        Command::new("go")
            .args(["build", "-o"])
            .arg(&bin)
            .arg(".")
            .current_dir(repo().join("tests/tools/monitorcheck"))
            .env("GOFLAGS", "-mod=readonly -buildvcs=false")
            .env("GOWORK", "off"),
    );
    bin
}

/// Every family rayshare registers, each with one sample: /metrics leaves out the families
/// that have none yet (no error so far, no Ray job stopped), and a dashboard may read them.
/// The label names are those of rayshare's own label types.
fn catalog() -> String {
    use rayshare::metrics::*;
    let m = Metrics::default();
    let (kind, outcome, operation) = ("RayJob", "mutated", "CREATE");
    m.requests
        .get_or_create(&RequestLabels {
            kind,
            operation,
            outcome,
        })
        .inc();
    m.duration
        .get_or_create(&LatencyLabels { kind, outcome })
        .observe(0.001);
    for family in [
        &m.patches,
        &m.created,
        &m.deleted,
        &m.reused,
        &m.planned,
        &m.reconcile_passes,
    ] {
        family.get_or_create(&KindLabel { kind }).inc();
    }
    m.provision_seconds.observe(0.01);
    m.error(Cause::ReconcileDelete);
    m.cert_reloads
        .get_or_create(&ReloadLabel { cause: "reloaded" })
        .inc();
    m.in_flight.set(1);
    m.connections
        .get_or_create(&ProtocolLabel { protocol: "h2" })
        .inc();
    m.connections_open.set(1);
    m.leader.set(1);
    m.shared_clusters
        .get_or_create(&StateLabel { state: "busy" })
        .set(1);
    let cluster = ClusterLabels {
        cluster_namespace: "ns".into(),
        cluster: "c".into(),
    };
    m.cluster_jobs.get_or_create(&cluster).set(1);
    m.ray_jobs_unattributed.get_or_create(&cluster).set(1);
    for family in [&m.ray_jobs_stopped, &m.events, &m.events_dropped] {
        family
            .get_or_create(&ReasonLabel { reason: "Deleted" })
            .inc();
    }
    m.encode()
}

#[tokio::test]
async fn dashboard_and_alerts_read_what_rayshare_and_the_api_server_export() {
    let config = "reclaim:\n  intervalSeconds: 1\n  namespaces: [e2e-monitoring]\n";
    let mut env = TestEnv::new("monitoring", config, 1).await;
    // A shared cluster, a PodGroup and a reclaim pass: the labelled series exist.
    let stored = create_in(&env.admin, &env.ns, sample("rayjob-run-a.yaml"), false).await;
    let cluster = stored["spec"]["clusterSelector"]["ray.io/cluster"]
        .as_str()
        .expect("the RayJob was moved onto a shared cluster")
        .to_string();
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    wait_for("the shared cluster", || async {
        clusters.get_opt(&cluster).await.ok().flatten()
    })
    .await;
    let pod: Pod = serde_json::from_value(sample("volcano-pod.yaml")).unwrap();
    Api::<Pod>::namespaced(env.admin.clone(), &env.ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    let rayshare = &env.instances[0];
    wait_for("a reclaim pass that counted the cluster", || async {
        let m = rayshare.metrics().await;
        m.contains(&format!("cluster=\"{cluster}\"")).then_some(())
    })
    .await;

    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let ours = file("rayshare.metrics", &rayshare.metrics().await);
    let catalog = file("catalog.metrics", &catalog());
    // A real fail-open: with rayshare stopped, the API server lets a pod through (the
    // chart's failurePolicy Ignore) and counts it under the webhook's name.
    env.instances[0].stop();
    let pod: Pod = serde_json::from_value(sample("volcano-pod.yaml")).unwrap();
    let admitted = Api::<Pod>::namespaced(env.admin.clone(), &env.ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    let annotations = admitted.metadata.annotations.unwrap_or_default();
    assert!(!annotations.contains_key("scheduling.k8s.io/group-name"));
    let request = axum::http::Request::get("/metrics")
        .body(Vec::new())
        .unwrap();
    let api_server = file(
        "apiserver.metrics",
        &env.admin.request_text(request).await.unwrap(),
    );
    // The series Prometheus makes itself for every target.
    let prometheus = file("prometheus.metrics", "# TYPE up gauge\nup 1\n");
    let render = file(
        "render.yaml",
        &helm_render(
            "rayshare",
            RAYSHARE_NAMESPACE,
            None,
            &[
                "grafanaDashboard.enabled=true",
                "prometheusRule.enabled=true",
            ],
        ),
    );
    let rules = dir.path().join("rules.yaml");

    let checked = run(
        "monitorcheck",
        Command::new(build_monitorcheck(dir.path()))
            .arg("-manifests")
            .arg(&render)
            .args(["-metrics".as_ref(), ours.as_os_str()])
            .args(["-metrics".as_ref(), catalog.as_os_str()])
            .args(["-metrics".as_ref(), catalog.as_os_str()])
            .args(["-metrics".as_ref(), api_server.as_os_str()])
            .args(["-metrics".as_ref(), prometheus.as_os_str()])
            .arg("-rules-out")
            .arg(&rules),
    );
    assert!(checked.contains("OK"), "{checked}");

    let promtool = run_script(&repo().join("tests/tools/build-promtool.sh"));
    let checked = run(
        "promtool check rules",
        Command::new(&promtool).args(["check", "rules"]).arg(&rules),
    );
    assert!(checked.contains("SUCCESS: 8 rules found"), "{checked}");
    let tests = dir.path().join("rules.test.yaml");
    std::fs::copy(
        repo().join("tests/fixtures/monitoring/rules.test.yaml"),
        &tests,
    )
    .unwrap();
    let tested = run(
        "promtool test rules",
        Command::new(&promtool).args(["test", "rules"]).arg(&tests),
    );
    assert!(tested.contains("SUCCESS"), "{tested}");
}
