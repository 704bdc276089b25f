//! The router in process, no sockets: helpers shared by the test files, one per concern.

mod passthrough;
mod pods;
mod requests;
mod shared_clusters;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use data_encoding::BASE64;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::{AppState, Limits, router};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::world::MemoryWorld;

fn state(world: MemoryWorld, config: Config) -> Arc<AppState<MemoryWorld>> {
    Arc::new(AppState {
        config: Arc::new(config),
        world: Arc::new(world),
        metrics: Arc::new(Metrics::default()),
        max_body_bytes: 64 * 1024,
        body_timeout: Duration::from_secs(1),
        limits: Limits::new(1024 * 1024, 64),
    })
}

fn sample(name: &str) -> Value {
    let text = match name {
        "rayjob" => include_str!("../../../../deploy/samples/rayjob-run-a.yaml"),
        "pod" => include_str!("../../../../deploy/samples/volcano-pod.yaml"),
        _ => unreachable!(),
    };
    serde_norway::from_str(text).unwrap()
}

fn review(group: &str, version: &str, kind: &str, op: &str, object: Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "uid-1", "kind": {"group": group, "version": version, "kind": kind},
        "operation": op, "namespace": "team", "object": object}})
}

async fn call(
    state: Arc<AppState<MemoryWorld>>,
    method: Method,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("content-length", body.len())
        .body(Body::from(body))
        .unwrap();
    let res = router(state).oneshot(req).await.unwrap();
    let status = res.status();
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 22)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn post(state: Arc<AppState<MemoryWorld>>, body: &Value) -> Value {
    let (status, v) = call(
        state,
        Method::POST,
        "/mutate",
        "application/json",
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    v["response"].clone()
}

/// Posts a review and, when admitted, stores the patched object as the API server would
/// (and runs what the provisioner does with a stored object). Returns the response.
async fn post_and_store(state: Arc<AppState<MemoryWorld>>, body: &Value) -> Value {
    let r = post(state.clone(), body).await;
    if r["allowed"] == true {
        let mut object = body["request"]["object"].clone();
        object["metadata"]["namespace"] = body["request"]["namespace"].clone();
        if r.get("patch").is_some() {
            let ops: json_patch::Patch = serde_json::from_value(json!(patch_of(&r))).unwrap();
            json_patch::patch(&mut object, &ops).unwrap();
        }
        state.world.store(&object, &state.config);
    }
    r
}

fn patch_of(response: &Value) -> Vec<Value> {
    let Some(p) = response["patch"].as_str() else {
        return vec![];
    };
    serde_json::from_slice(&BASE64.decode(p.as_bytes()).unwrap()).unwrap()
}
