//! The jobs a suspended shared cluster cut off.

use serde_json::{Value, json};

use super::*;

fn on(cluster: &str, state: &str) -> Value {
    json!({
        "metadata": { "namespace": "team", "name": format!("{cluster}-{state}"), "uid": state },
        "spec": { "clusterSelector": { "ray.io/cluster": cluster } },
        "status": { "jobDeploymentStatus": state },
    })
}

#[test]
fn a_suspended_cluster_cuts_off_only_the_jobs_running_on_it() {
    let jobs = [
        on("shared", "Running"),
        on("shared", "Initializing"),
        on("shared", "Complete"),
        on("other", "Running"),
    ];
    let mut cluster = json!({"metadata": {"namespace": "team", "name": "shared"}, "spec": {}});
    assert!(suspended_under(&cluster, &jobs).is_empty(), "not suspended");
    cluster["spec"]["suspend"] = json!(true);
    let cut: Vec<_> = suspended_under(&cluster, &jobs)
        .iter()
        .map(|j| j["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(cut, ["shared-Running"]);
    cluster["metadata"]["namespace"] = json!("elsewhere");
    assert!(
        suspended_under(&cluster, &jobs).is_empty(),
        "another namespace's cluster"
    );
}
