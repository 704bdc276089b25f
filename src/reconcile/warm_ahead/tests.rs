use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::*;
use crate::domain::labels;
use crate::reconcile::testkit::{Kit, key, rewritten_job};
use crate::world::MemoryWorld;

/// A kit with warm-ahead on for namespace `ns`.
fn kit() -> Kit {
    let mut kit = Kit::default();
    kit.config.warm_ahead.enabled = true;
    kit.config.warm_ahead.namespaces = vec!["ns".into()];
    kit
}

fn minutes_ago(m: i64) -> String {
    (Timestamp::now() - SignedDuration::from_mins(m)).to_string()
}

/// `n` finished tasks of one config, a minute apart, the last a minute ago; the member
/// they selected.
fn finished_tasks(kit: &Kit, n: i64) -> Key {
    let mut member = None;
    for i in 0..n {
        let (mut job, cluster) = rewritten_job("ns", &format!("task-{i}"), &minutes_ago(n - i));
        job["status"] = json!({"jobDeploymentStatus": "Complete"});
        kit.show(job);
        member = Some(cluster);
    }
    member.expect("a task")
}

fn ready_member(name: &str) -> Value {
    json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
            "labels": {labels::MANAGED_BY: labels::MANAGER, labels::SHARED_CLUSTER: "true",
                labels::INSTANCE: "rayshare"}},
        "status": {"state": "ready"}})
}

fn pass(kit: &Kit) {
    let controller = <WarmAhead as Controller<MemoryWorld>>::new(&kit.config);
    let keys = kit.keys(&controller);
    assert_eq!(keys, [key("", "SharedClusterWarm")]);
    kit.look(&controller, &keys[0]).unwrap();
}

fn kept_warm(kit: &Kit, name: &str) -> Option<String> {
    let clusters = kit.objects("RayCluster");
    let member = clusters.iter().find(|c| c["metadata"]["name"] == name)?;
    labels::get(member, labels::Meta::Annotations, labels::KEPT_WARM).map(String::from)
}

#[test]
fn an_idle_member_of_a_config_in_steady_demand_is_kept_warm_with_why() {
    let kit = kit();
    let member = finished_tasks(&kit, 6);
    kit.have(ready_member(&member.1));
    pass(&kit);
    let why = kept_warm(&kit, &member.1).expect("kept warm");
    assert!(why.starts_with("kept warm: about"), "{why}");
    let clusters = kit.objects("RayCluster");
    let label = labels::get(&clusters[0], labels::Meta::Labels, labels::KEPT_WARM);
    assert_eq!(label, Some("rate"), "selectable by why");
}

#[test]
fn a_config_in_demand_without_a_member_gets_one_made_ahead_from_its_stored_job() {
    let kit = kit();
    let member = finished_tasks(&kit, 6);
    pass(&kit);
    let made = kit.objects("RayCluster");
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(made[0]["metadata"]["name"], json!(member.1));
    assert!(
        made[0]["spec"]["headGroupSpec"].is_object(),
        "built from the job's spec"
    );
    assert!(
        kit.scrape()
            .contains(r#"rayshare_objects_created_total{kind="RayCluster"} 1"#)
    );
}

#[test]
fn a_config_not_opted_in_or_seen_once_is_left_to_the_idle_ttl() {
    let mut kit = kit();
    kit.config.warm_ahead.namespaces.clear();
    let member = finished_tasks(&kit, 6);
    kit.have(ready_member(&member.1));
    pass(&kit);
    assert_eq!(kept_warm(&kit, &member.1), None);

    // Opted in, but one task an hour ago says nothing is coming within the TTL.
    let kit = self::kit();
    let (mut job, member) = rewritten_job("ns", "once", &minutes_ago(60));
    job["status"] = json!({"jobDeploymentStatus": "Complete"});
    kit.show(job);
    let mut idle = ready_member(&member.1);
    idle["metadata"]["annotations"] = json!({labels::KEPT_WARM: "kept warm: earlier"});
    kit.have(idle);
    pass(&kit);
    assert_eq!(
        kept_warm(&kit, &member.1),
        None,
        "let go: its note is removed"
    );
}

#[test]
fn a_config_whose_jobs_are_gone_is_made_ahead_from_its_template() {
    let kit = kit();
    let controller = <WarmAhead as Controller<MemoryWorld>>::new(&kit.config);
    let member = finished_tasks(&kit, 6);
    kit.have(ready_member(&member.1));
    kit.look(&controller, &key("", "SharedClusterWarm"))
        .unwrap();
    assert!(kept_warm(&kit, &member.1).is_some());
    // Flyte deleted the finished tasks and the member went (as a person would delete it).
    kit.world.stored.lock().unwrap().clear();
    kit.world.objects.lock().unwrap().clear();
    kit.look(&controller, &key("", "SharedClusterWarm"))
        .unwrap();
    let made = kit.objects("RayCluster");
    let names: Vec<&Value> = made.iter().map(|c| &c["metadata"]["name"]).collect();
    assert!(names.contains(&&json!(member.1)), "{names:?}");
    let again = made
        .iter()
        .find(|c| c["metadata"]["name"] == json!(member.1))
        .unwrap();
    assert!(
        again["spec"]["headGroupSpec"].is_object(),
        "built from the template"
    );
}

#[test]
fn a_member_kept_for_the_same_reason_is_not_written_again() {
    let kit = kit();
    let member = finished_tasks(&kit, 6);
    kit.have(ready_member(&member.1));
    let controller = <WarmAhead as Controller<MemoryWorld>>::new(&kit.config);
    let key = key("", "SharedClusterWarm");
    kit.look(&controller, &key).unwrap();
    let written = kit.world.patches.lock().unwrap().len();
    assert_eq!(written, 1, "{:?}", kit.world.patches.lock().unwrap());
    // What the watch would show after the write, then another pass a moment later.
    let noted = kit.objects("RayCluster").remove(0);
    kit.have(noted);
    kit.look(&controller, &key).unwrap();
    let p = kit.world.patches.lock().unwrap().clone();
    assert_eq!(p.len(), written, "{p:?}");
}
