use super::*;
use serde_json::json;

fn now() -> Timestamp {
    "2026-11-24T12:00:00Z".parse().unwrap()
}

fn shared(ns: &str, name: &str, annotations: Value) -> Value {
    json!({
        "metadata": {
            "name": name, "namespace": ns,
            "creationTimestamp": "2026-11-24T11:00:00Z",
            "labels": {"app.kubernetes.io/managed-by": "rayshare", "rayshare.io/shared-cluster": "true"},
            "annotations": annotations,
        },
        "spec": {
            "headGroupSpec": {"template": {"spec": {"containers": [{
                "image": "rayproject/ray:2.46.0",
                "resources": {"requests": {"cpu": "2", "memory": "8Gi"}},
            }]}}},
            "workerGroupSpecs": [
                {"groupName": "gpu", "replicas": 2, "numOfHosts": 4, "template": {"spec": {"containers": [{
                    "resources": {"limits": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": 1}},
                }]}}},
                {"groupName": "cpu", "replicas": 1, "template": {"spec": {"containers": [{}]}}},
            ],
        },
    })
}

fn job(ns: &str, name: &str, cluster: &str, status: Value) -> Value {
    json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {"clusterSelector": {"ray.io/cluster": cluster}},
        "status": status,
    })
}

fn listed() -> Listed {
    Listed {
        clusters: vec![
            shared("ml", "ray-busy", json!({"rayshare.io/config-digest": "0123456789abcdef0123"})),
            shared("ml", "ray-idle", json!({"rayshare.io/last-admitted": "2026-11-24T11:50:00Z"})),
            shared("ml", "ray-old", json!({"rayshare.io/idle-ttl-seconds": "60"})),
            shared("other", "ray-marked", json!({"rayshare.io/reclaim-marked-at": "2026-11-24T11:59:00Z"})),
        ],
        jobs: vec![
            job("ml", "b-run", "ray-busy", json!({"jobDeploymentStatus": "Running"})),
            job("ml", "a-run", "ray-busy", json!({})),
            job("ml", "done", "ray-idle", json!({"jobDeploymentStatus": "Complete", "endTime": "2026-11-24T11:55:00Z"})),
            // Same name in another namespace: not this cluster's.
            job("other", "x", "ray-busy", json!({})),
        ],
        pod_groups: vec![json!({
            "metadata": {"name": "pg-b", "namespace": "ml", "labels": {"rayshare.io/pod": "task-b"}},
            "spec": {"queue": "gpu", "priorityClassName": "high", "minMember": 1},
            "status": {"phase": "Running"},
        }), json!({
            "metadata": {"name": "pg-a", "namespace": "ml"},
            "spec": {"minMember": 1},
        })],
        claims: ["10", "2"].iter().map(|r| json!({
            "metadata": {"name": format!("c-{r}"), "namespace": "tpu", "creationTimestamp": "2026-11-24T11:59:30Z",
                "labels": {"ray.io/cluster": "ray-tpu", "ray.io/group": "slice",
                    "ray.io/worker-group-replica-index": r, "ray.io/replica-host-index": "0"}},
        })).collect(),
    }
}

#[test]
fn clusters_show_jobs_idle_time_and_when_they_go() {
    let status = summarize(&listed(), 600, now());
    let ml = &status.namespaces["ml"];
    let names: Vec<&str> = ml.clusters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["ray-busy", "ray-idle", "ray-old"]);
    let busy = &ml.clusters[0];
    assert_eq!(busy.state, "busy");
    assert_eq!(busy.active_jobs, ["a-run", "b-run"]);
    assert_eq!(busy.digest, "0123456789abcdef", "shortened as on the label");
    assert_eq!(
        (busy.idle_seconds, busy.reclaimable_in_seconds),
        (None, None)
    );
    assert_eq!(busy.image, "rayproject/ray:2.46.0");
    assert_eq!(busy.head, "2/8Gi");
    assert_eq!(
        busy.workers,
        [
            WorkerGroup {
                name: "gpu".into(),
                replicas: 2,
                hosts: 4,
                resources: "8/32Gi/1 gpu".into()
            },
            WorkerGroup {
                name: "cpu".into(),
                replicas: 1,
                hosts: 1,
                resources: "-/-".into()
            },
        ]
    );
    // Idle since its last job ended (later than the last admission): 5 of 10 minutes.
    let idle = &ml.clusters[1];
    assert_eq!(idle.state, "idle");
    assert!(idle.active_jobs.is_empty());
    assert_eq!(
        (idle.idle_seconds, idle.reclaimable_in_seconds),
        (Some(300), Some(300))
    );
    // Past its own one-minute TTL since creation.
    let old = &ml.clusters[2];
    assert_eq!(old.state, "expired");
    assert_eq!(
        (old.idle_seconds, old.reclaimable_in_seconds),
        (Some(3600), Some(0))
    );
    let other = &status.namespaces["other"].clusters;
    let marked = other.iter().find(|c| c.name == "ray-marked").unwrap();
    assert_eq!(marked.state, "marked");
    assert!(marked.active_jobs.is_empty());
    // An active job whose cluster is not there (being made, or refused): shown, so the
    // job's owner knows what it waits for.
    let missing = other.iter().find(|c| c.name == "ray-busy").unwrap();
    assert_eq!(missing.state, "missing");
    assert_eq!(missing.active_jobs, ["x"]);
    // A cluster only finished jobs selected is not missing: nothing waits for it.
    let mut done = listed();
    done.jobs = vec![job(
        "ml",
        "old",
        "ray-gone",
        json!({"jobDeploymentStatus": "Complete"}),
    )];
    let status = summarize(&done, 600, now());
    assert!(
        status.namespaces["ml"]
            .clusters
            .iter()
            .all(|c| c.name != "ray-gone")
    );
}

#[test]
fn groups_and_claims_are_listed_in_order() {
    let status = summarize(&listed(), 600, now());
    let groups = &status.namespaces["ml"].pod_groups;
    assert_eq!(groups[0].name, "pg-a");
    assert_eq!(
        groups[1],
        PodGroup {
            name: "pg-b".into(),
            pod: "task-b".into(),
            owned: false,
            queue: "gpu".into(),
            priority_class: "high".into(),
            min_member: 1,
            phase: "Running".into(),
        }
    );
    let claims = &status.namespaces["tpu"].index_claims;
    let replicas: Vec<&str> = claims.iter().map(|c| c.replica.as_str()).collect();
    assert_eq!(replicas, ["2", "10"], "numeric order");
    assert_eq!(claims[0].age_seconds, Some(30));
}

#[test]
fn the_table_aligns_columns_per_section() {
    let table = render_table(&summarize(&listed(), 600, now()));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines[0], "NAMESPACE ml");
    assert!(
        lines[1].starts_with("  SHARED CLUSTER   DIGEST "),
        "{table}"
    );
    let column = |line: &str, word: &str| line.find(&format!(" {word} ")).unwrap() + 1;
    let state = column(lines[1], "STATE");
    assert_eq!(column(lines[2], "busy"), state, "{table}");
    assert_eq!(column(lines[4], "expired"), state, "{table}");
    assert!(
        lines[2].contains("gpu=2x4h 8/32Gi/1 gpu, cpu=1 -/-"),
        "{table}"
    );
    assert!(lines[3].contains("5m"), "{table}");
    assert!(table.contains("  POD GROUP   POD "), "{table}");
    assert!(
        table.contains("NAMESPACE tpu\n  INDEX CLAIMS ON"),
        "{table}"
    );
}

#[test]
fn nothing_found_says_so() {
    let table = render_table(&summarize(&Listed::default(), 600, now()));
    assert_eq!(
        table,
        "No shared clusters, PodGroups or index claims found.\n"
    );
}

#[test]
fn json_has_every_field() {
    let status = summarize(&listed(), 600, now());
    let v = serde_json::to_value(&status).unwrap();
    let busy = &v["namespaces"]["ml"]["clusters"][0];
    assert_eq!(busy["active_jobs"], json!(["a-run", "b-run"]));
    assert_eq!(busy["workers"][0]["hosts"], 4);
    assert!(busy["idle_seconds"].is_null());
    assert_eq!(v["namespaces"]["tpu"]["index_claims"][1]["replica"], "10");
}

#[test]
fn tenant_text_cannot_drive_the_terminal() {
    assert_eq!(super::printable("a\tb\x1b[2Jc\n"), "a\tb\\u{1b}[2Jc\\n");
}

#[test]
fn a_member_kept_warm_says_why_and_is_not_reclaimable() {
    let why = "kept warm: about 6.0 tasks an hour, next expected in 10m (idle TTL 30m)";
    let listed = Listed {
        clusters: vec![shared(
            "ml",
            "ray-warm",
            json!({"rayshare.io/idle-ttl-seconds": "60", "rayshare.io/kept-warm": why}),
        )],
        ..Listed::default()
    };
    let status = summarize(&listed, 1800, now());
    let warm = &status.namespaces["ml"].clusters[0];
    assert_eq!(warm.state, "warm");
    assert_eq!(warm.kept_warm.as_deref(), Some(why));
    assert_eq!(warm.reclaimable_in_seconds, None);
    assert_eq!(warm.idle_seconds, Some(3600), "idle since it was made");
    let table = render_table(&status);
    assert!(table.contains("WHY KEPT"), "{table}");
    assert!(table.contains(why), "{table}");
}
