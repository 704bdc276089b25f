//! What the HTTP layer answers before any object is read: framing errors and load bounds.

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use rstest::rstest;
use serde_json::json;

use super::{AppState, Limits, call, post, review, sample, state};
use crate::config::Config;
use crate::world::MemoryWorld;

#[rstest]
#[case::not_json(Method::POST, "/mutate", "application/json", b"{nope".to_vec(), 400, "not_json")]
#[case::not_review(Method::POST, "/mutate", "application/json", br#"{"kind":"Pod"}"#.to_vec(), 400, "not_review")]
#[case::no_request(Method::POST, "/mutate", "application/json", br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(), 400, "no_request")]
#[case::wrong_type(Method::POST, "/mutate", "text/plain", b"{}".to_vec(), 415, "content_type")]
#[case::too_large(Method::POST, "/mutate", "application/json", vec![b' '; 65 * 1024], 413, "too_large")]
#[case::unknown_path(Method::POST, "/validate", "application/json", b"{}".to_vec(), 404, "not_found")]
#[tokio::test]
async fn bad_requests_get_clear_answers(
    #[case] method: Method,
    #[case] path: &str,
    #[case] content_type: &str,
    #[case] body: Vec<u8>,
    #[case] code: u16,
    #[case] cause: &str,
) {
    let s = state(MemoryWorld::default(), Config::default());
    let (status, v) = call(s.clone(), method, path, content_type, body).await;
    assert_eq!(status.as_u16(), code);
    assert_eq!(v["cause"], cause, "{v}");
    assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()));
    if path == "/mutate" {
        assert!(s.metrics.encode().contains(&format!("cause=\"{cause}\"")));
    }
}

#[tokio::test]
async fn wrong_method_is_405() {
    let s = state(MemoryWorld::default(), Config::default());
    let (status, _) = call(s, Method::GET, "/mutate", "application/json", vec![]).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

fn state_with_limits(limits: Limits) -> Arc<AppState<MemoryWorld>> {
    let s = state(MemoryWorld::default(), Config::default());
    Arc::new(AppState {
        config: s.config.clone(),
        world: s.world.clone(),
        metrics: s.metrics.clone(),
        max_body_bytes: s.max_body_bytes,
        body_timeout: s.body_timeout,
        limits,
    })
}

/// Past `--max-in-flight`, a request that needs work passes unchanged with a warning.
#[tokio::test]
async fn past_the_admission_bound_objects_pass_unchanged() {
    let s = state_with_limits(Limits::new(1024 * 1024, 0));
    let body = review("ray.io", "v1", "RayJob", "CREATE", sample("rayjob"));
    let r = post(s.clone(), &body).await;
    assert_eq!((r["allowed"].clone(), r.get("patch")), (json!(true), None));
    assert!(r["warnings"][0].as_str().unwrap().contains("overloaded"));
    assert!(s.metrics.encode().contains("cause=\"overloaded\""));
}

/// Past `--max-buffered-bytes`, a body is refused before it is held (503: the API server
/// applies the webhook's failurePolicy); the budget comes back once answered. Small bodies
/// have a share of their own, which large ones cannot spend.
#[tokio::test]
async fn past_the_buffered_bytes_a_request_is_refused_at_once() {
    let s = state_with_limits(Limits::new(2048 * 1024, 64));
    let large = s.limits.buffered_kib.available_permits();
    assert_eq!((large, s.limits.small_kib.available_permits()), (1536, 512));
    // The large share spent (as by a flood of large reviews in flight).
    let flood = s
        .limits
        .buffered_kib
        .clone()
        .try_acquire_many_owned(1500)
        .unwrap();
    let mut job = sample("rayjob");
    job["metadata"]["annotations"] = json!({"big": "x".repeat(300 * 1024)});
    let big = review("ray.io", "v1", "RayJob", "CREATE", job).to_string();
    let (status, v) = call(
        s.clone(),
        Method::POST,
        "/mutate",
        "application/json",
        big.into_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(v["cause"], "overloaded");
    let small = review("", "v1", "Pod", "CREATE", sample("pod"));
    assert_eq!(
        post(s.clone(), &small).await["allowed"],
        true,
        "not crowded out"
    );
    drop(flood);
    assert_eq!(s.limits.buffered_kib.available_permits(), large);
    assert_eq!(s.limits.small_kib.available_permits(), 512);
}

/// What a body would become as a tree is held from its own budget before it is parsed:
/// a body of many tiny objects, small in bytes, is refused at once when the trees' budget
/// cannot hold it, and the budget comes back once answered.
#[tokio::test]
async fn a_body_whose_tree_would_not_fit_is_refused_before_it_is_built() {
    let s = state_with_limits(Limits::new(64 * 1024, 64));
    let trees = s.limits.trees_kib.available_permits();
    assert_eq!(trees, 128);
    let mut job = sample("rayjob");
    job["metadata"]["annotations"] = json!({"a": "b"});
    job["spec"]["x"] = json!(vec![json!({"a": 0}); 4000]);
    let body = review("ray.io", "v1", "RayJob", "CREATE", job).to_string();
    assert!(body.len() < 40 * 1024, "{}", body.len());
    let (status, v) = call(
        s.clone(),
        Method::POST,
        "/mutate",
        "application/json",
        body.into_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert_eq!(v["cause"], "overloaded");
    let small = review("", "v1", "Pod", "CREATE", sample("pod"));
    assert_eq!(post(s.clone(), &small).await["allowed"], true);
    assert_eq!(s.limits.trees_kib.available_permits(), trees);
}
