//! Volcano's admission webhooks (webhook-manager, registered as its chart registers them)
//! are in the path: a Volcano pod naming a PodGroup that does not exist is refused, one
//! whose group exists is accepted, in a namespace rayshare does not serve.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;

use crate::cluster::*;
use crate::harness::*;

fn volcano_pod(name: &str, group: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox",
            "resources": {"requests": {"cpu": "100m"}}}]},
    }))
    .unwrap()
}

#[tokio::test]
async fn volcano_refuses_a_pod_whose_group_does_not_exist() {
    let _volcano = &*VOLCANO;
    let admin = client(&CONTROL_PLANE.admin_kubeconfig).await;
    // No rayshare registration selects it (they select their test's label).
    let ns = "volcano-admission";
    create_namespace(&admin, ns, &[]).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), ns);

    let refused = pods
        .create(
            &PostParams::default(),
            &volcano_pod("orphan", "missing-group"),
        )
        .await
        .expect_err("Volcano refuses a pod whose PodGroup does not exist");
    let kube::Error::Api(e) = &refused else {
        panic!("not the API server's refusal: {refused}");
    };
    assert!(
        e.message.contains("validatepod.volcano.sh")
            && e.message.contains("failed to get PodGroup"),
        "{e:?}"
    );
    assert!(pods.get_opt("orphan").await.unwrap().is_none());

    // The same pod once its group exists (in queue `default`, which is Open).
    let groups: Api<DynamicObject> = Api::namespaced_with(admin.clone(), ns, &pod_group_resource());
    let group: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "missing-group"},
        "spec": {"minMember": 1, "queue": "default"},
    }))
    .unwrap();
    groups.create(&PostParams::default(), &group).await.unwrap();
    let created = pods
        .create(
            &PostParams::default(),
            &volcano_pod("orphan", "missing-group"),
        )
        .await
        .expect("Volcano accepts the pod once its PodGroup exists");
    assert_eq!(
        created.metadata.annotations.unwrap()["scheduling.k8s.io/group-name"],
        "missing-group"
    );
}
