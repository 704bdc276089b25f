//! (d): a group made for a pod that a later admission step refused is deleted after the grace.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::{INSTANCE, MANAGED_BY, bare_pod};
use crate::cluster::*;
use crate::harness::*;
use crate::scheduling::POD_UID;
use crate::world::*;

/// (d) A pod refused by an admission step after the webhooks (a ResourceQuota of no pods,
/// enforced after Volcano's webhook accepted it): the group rayshare made for it during
/// the admission is deleted by rayshare's orphan reconciler once
/// `unconfirmedGraceSeconds` (2 here) have passed.
#[tokio::test]
async fn a_group_whose_pod_was_refused_later_is_deleted_after_the_grace() {
    const GRACE: Duration = Duration::from_secs(2);
    let _volcano = &*VOLCANO;
    let config = "podGroups:\n  unconfirmedGraceSeconds: 2\n  reconcileIntervalSeconds: 1\n";
    let env = TestEnv::new("ag-refused", config, 1).await;
    let quotas: Api<ResourceQuota> = Api::namespaced(env.admin.clone(), &env.ns);
    let quota: ResourceQuota = serde_json::from_value(
        json!({"metadata": {"name": "no-pods"}, "spec": {"hard": {"pods": "0"}}}),
    )
    .unwrap();
    quotas.create(&PostParams::default(), &quota).await.unwrap();
    // The quota controller has counted the namespace: the refusal is the quota's own.
    wait_for_within(SLOW, "the quota's status", || async {
        let q = quotas.get("no-pods").await.ok()?;
        q.status?.hard?.contains_key("pods").then_some(())
    })
    .await;
    let groups = env.api(&pod_group_resource(), &env.ns);
    let seen = Seen::watch(&groups).await;
    let pods: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);

    let sent = Instant::now();
    let refused = pods
        .create(
            &PostParams::default(),
            &bare_pod("refused", "default", "100m"),
        )
        .await
        .expect_err("the quota refuses the pod");
    let answered = sent.elapsed();
    let kube::Error::Api(e) = &refused else {
        panic!("not the API server's refusal: {refused}");
    };
    assert!(
        e.code == 403 && e.message.contains("exceeded quota"),
        "refused by the quota (after the webhooks): {e:?}"
    );
    assert!(pods.get_opt("refused").await.unwrap().is_none());
    // rayshare made its group during the refused pod's admission (the watch started
    // before the create: reading the group now would race the grace when the refusal
    // was answered slowly).
    let (made_at, made) = wait_for("the group's creation to be watched", || async {
        seen.first("ADDED", "refused")
    })
    .await;
    assert_eq!(
        made.labels().get(MANAGED_BY).map(|s| s.as_str()),
        Some("rayshare")
    );
    assert_eq!(made.labels().get(INSTANCE), Some(&env.name));
    assert!(!made.annotations().contains_key(POD_UID));

    let (deleted_at, _) = wait_for_within(
        Duration::from_secs(20),
        "the orphan reconciler to delete the refused pod's group",
        || async { seen.first("DELETED", "refused") },
    )
    .await;
    let lived = deleted_at - made_at;
    let created = made.metadata.creation_timestamp.clone().unwrap().0;
    eprintln!(
        "[admission-groups] the refused pod's group lived {:.2}s (watch: ADDED -> DELETED; \
         create answered {:.0} ms after it was sent, creationTimestamp {created}); grace {GRACE:?}, \
         reconcile interval 1s",
        lived.as_secs_f64(),
        answered.as_secs_f64() * 1000.0
    );
    // The reconciler compares its age from creationTimestamp (whole seconds) with the
    // grace: not deleted before a second short of it.
    assert!(
        lived >= GRACE - Duration::from_secs(1),
        "deleted early: {lived:?}"
    );
    env.instances[0]
        .wait_for_log("kind=\"PodGroup\" namespace=e2e-ag-refused name=refused")
        .await;
    let log = env.instances[0].log_text();
    let line = log
        .lines()
        .find(|l| l.contains(" deleted ") && l.contains("name=refused"))
        .expect("rayshare logged the deletion");
    eprintln!("[admission-groups] {line}");
    assert!(groups.get_opt("refused").await.unwrap().is_none());
}
