//! The Ray dashboard of kwok's heads, for KubeRay: kwok runs no Ray, so KubeRay's look at a
//! running job (`GET /api/jobs/<id>` on the head's service) fails, its reconcile errors, and
//! the errors' rate-limited retries crowd every other job out of its one worker for
//! seconds after a fan-out: a cost a real head does not make. KubeRay reaches dashboards
//! over plain HTTP with Go's default transport, so with `HTTP_PROXY` pointing here every
//! such call lands on this server (its API server calls are HTTPS and go direct). It says
//! what a head running the job would: the job is RUNNING, a stop stops it. Nothing here
//! decides what the benchmark measures: a job's wait ends when KubeRay moves it past
//! Initializing, before any dashboard call.

use std::net::SocketAddr;

use axum::Router;
use axum::extract::Path;
use axum::routing::{get, post};
use serde_json::{Value, json};

/// A running dashboard stand-in; stopped when dropped.
pub struct Dashboard {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Dashboard {
    pub async fn start() -> Self {
        let job = |Path(id): Path<String>| async move {
            axum::Json(
                json!({"job_id": id, "submission_id": id, "status": "RUNNING", "entrypoint": ""}),
            )
        };
        let stop = |Path(_): Path<String>| async { axum::Json(json!({"stopped": true})) };
        let app = Router::new()
            .route(
                "/api/jobs/",
                get(|| async { axum::Json(Value::Array(vec![])) }),
            )
            .route(
                "/api/jobs/{id}",
                get(job).delete(|| async { axum::Json(json!({})) }),
            )
            .route("/api/jobs/{id}/stop", post(stop));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port for the dashboard stand-in");
        let addr = listener.local_addr().expect("its address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, task }
    }

    /// What KubeRay's `HTTP_PROXY` should say.
    pub fn proxy(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.task.abort();
    }
}
