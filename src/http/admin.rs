//! The plain-HTTP admin port: `/livez`, `/readyz`, `/metrics`.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::health::Health;
use crate::metrics::Metrics;

#[derive(Clone)]
struct AdminState {
    health: Arc<Health>,
    metrics: Arc<Metrics>,
}

pub fn router(health: Arc<Health>, metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/livez", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(AdminState { health, metrics })
}

async fn readyz(State(s): State<AdminState>) -> impl IntoResponse {
    match s.health.ready() {
        Ok(()) => (StatusCode::OK, "ok\n".to_string()),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        ),
    }
}

async fn metrics_text(State(s): State<AdminState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.metrics.encode(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use std::sync::atomic::Ordering;
    use tower::ServiceExt;

    async fn get(router: &Router, path: &str) -> (StatusCode, String) {
        let res = router
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = res.status();
        let body = axum::body::to_bytes(res.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn ready_only_with_certs_and_caches_and_not_draining() {
        let health = Arc::new(Health::default());
        let r = router(health.clone(), Arc::new(Metrics::default()));
        assert_eq!(get(&r, "/livez").await.0, StatusCode::OK);
        assert_eq!(get(&r, "/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
        health.certs_loaded.store(true, Ordering::Release);
        let (code, body) = get(&r, "/readyz").await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("caches"));
        health.caches_synced.store(true, Ordering::Release);
        assert_eq!(get(&r, "/readyz").await.0, StatusCode::OK);
        health.draining.store(true, Ordering::Release);
        assert_eq!(get(&r, "/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
    }

    #[tokio::test]
    async fn metrics_are_prometheus_text() {
        let metrics = Arc::new(Metrics::default());
        metrics.error(crate::cause::Cause::ApiTimeout);
        let r = router(Arc::new(Health::default()), metrics);
        let (code, body) = get(&r, "/metrics").await;
        assert_eq!(code, StatusCode::OK);
        assert!(
            body.contains("rayshare_errors_total{cause=\"api_timeout\"} 1"),
            "{body}"
        );
        assert!(body.contains("# TYPE rayshare_provision_create_seconds histogram"));
        assert!(body.contains("rayshare_leader 0"), "{body}");
        // Read from the log writer at each scrape (none installed here: none dropped).
        assert!(
            body.contains(
                "# TYPE rayshare_log_lines_dropped counter\nrayshare_log_lines_dropped_total 0\n"
            ),
            "{body}"
        );
    }
}
