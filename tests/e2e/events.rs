//! Kubernetes Events rayshare records, read back as `kubectl describe` shows them.

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};

use crate::harness::*;

/// (reason, note) of the events about object `name` in the test's namespace.
pub async fn events_on(env: &TestEnv, name: &str) -> Vec<(String, String)> {
    let events: Api<Event> = Api::namespaced(env.admin.clone(), &env.ns);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter(|e| e.reporting_controller.as_deref() == Some("rayshare"))
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

/// Waits for rayshare's event `reason` on object `name`; returns its note.
pub async fn wait_event(env: &TestEnv, name: &str, reason: &str) -> String {
    let what = format!("event {reason} on {name}");
    wait_for(&what, || async {
        events_on(env, name)
            .await
            .into_iter()
            .find(|(r, _)| r == reason)
            .map(|(_, note)| note)
    })
    .await
}

/// A shared cluster the API server refuses (here a ValidatingAdmissionPolicy, as a
/// platform team writes them): each waiting job is told why, where its owner looks; the
/// cluster is made once the policy allows it.
#[tokio::test]
async fn a_cluster_that_cannot_be_made_is_told_to_its_jobs() {
    use kube::api::DeleteParams;

    let env = TestEnv::new("not-made", "", 1).await;
    let policy = format!("no-rayclusters-{}", env.ns);
    let gv = ("admissionregistration.k8s.io", "v1");
    let policies = resource(
        gv.0,
        gv.1,
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
    );
    let bindings = resource(
        gv.0,
        gv.1,
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
    );
    apply(
        &env.admin,
        &serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": policy},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["ray.io"], "apiVersions": ["*"],
                "operations": ["CREATE"], "resources": ["rayclusters"]}]},
            "validations": [{"expression": "false",
                "message": "RayClusters need a platform team's approval here"}]}}),
    )
    .await;
    apply(&env.admin, &serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy},
        "spec": {"policyName": policy, "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": env.ns}}}}})).await;
    // The API server enforces a policy once its informer has it.
    wait_until_ray_clusters_refused(&env, "the policy").await;
    let mut job = sample("rayjob-run-a.yaml");
    job["metadata"]["name"] = serde_json::json!("waiting");
    let job = create_in(&env.admin, &env.ns, job, false).await;
    let cluster = job["spec"]["clusterSelector"]["ray.io/cluster"]
        .as_str()
        .unwrap()
        .to_string();
    let note = wait_event(&env, "waiting", "SharedClusterNotMade").await;
    assert!(note.contains(&cluster), "{note}");
    assert!(
        note.contains("platform team's approval"),
        "the API server's reason: {note}"
    );
    for ar in [&bindings, &policies] {
        Api::<kube::api::DynamicObject>::all_with(env.admin.clone(), ar)
            .delete(&policy, &DeleteParams::default())
            .await
            .unwrap();
    }
    wait_for("the cluster to be made once the policy allows it", || {
        cluster_uid(&env, &cluster)
    })
    .await;
}
