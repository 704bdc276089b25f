//! A shared cluster's Ray dashboard: the job API (`GET /api/jobs/`, `POST
//! /api/jobs/<id>/stop`, `DELETE /api/jobs/<id>`), each call bounded in time.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::domain::shared_cluster::job_life::job_list::{self, JobList};

/// Job lists of a busy head are large (each entry carries its runtime env); anything
/// past this is not a job list. The head runs a tenant's image: its answers are read
/// typed (`job_list`), never built as a tree.
const MAX_BODY: usize = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    #[error("dashboard {0} did not answer in time")]
    Timeout(String),
    #[error("dashboard {url}: {message}")]
    Failed { url: String, message: String },
}

#[derive(Clone)]
pub struct Dashboard {
    client: Client<HttpConnector, Empty<Bytes>>,
    timeout: Duration,
}

impl Dashboard {
    pub fn new(timeout: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(timeout));
        Self {
            client: Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(30))
                .build(connector),
            timeout,
        }
    }

    /// The submissions on the dashboard at `base` (`http://host:port`); `token` for a
    /// dashboard in token mode.
    pub async fn submissions(
        &self,
        base: &str,
        token: Option<&str>,
    ) -> Result<JobList, DashboardError> {
        let url = format!("{base}/api/jobs/");
        let body = self.call(hyper::Method::GET, &url, token).await?;
        job_list::read(&mut serde_json::Deserializer::from_slice(&body))
            .map_err(|e| failed(&url, e))
    }

    /// Stops submission `id`; `Ok(false)` when it was over already.
    pub async fn stop(
        &self,
        base: &str,
        id: &str,
        token: Option<&str>,
    ) -> Result<bool, DashboardError> {
        let url = format!("{base}/api/jobs/{}/stop", path_segment(id));
        let body = self.call(hyper::Method::POST, &url, token).await?;
        flag(&url, &body, job_list::Flags::stopped)
    }

    /// Deletes the record of submission `id` (Ray deletes only a job that is over: a
    /// running one is an error); `Ok(false)` when it was gone already.
    pub async fn delete(
        &self,
        base: &str,
        id: &str,
        token: Option<&str>,
    ) -> Result<bool, DashboardError> {
        let url = format!("{base}/api/jobs/{}", path_segment(id));
        let (status, body) = self.exchange(hyper::Method::DELETE, &url, token).await?;
        // Ray 2.x: 404 "Job <id> does not exist".
        if status == hyper::StatusCode::NOT_FOUND {
            return Ok(false);
        }
        let body = checked(&url, token, status, body)?;
        flag(&url, &body, job_list::Flags::deleted)
    }

    async fn call(
        &self,
        method: hyper::Method,
        url: &str,
        token: Option<&str>,
    ) -> Result<Bytes, DashboardError> {
        let (status, body) = self.exchange(method, url, token).await?;
        checked(url, token, status, body)
    }

    /// One request and its whole answer, whatever its status.
    async fn exchange(
        &self,
        method: hyper::Method,
        url: &str,
        token: Option<&str>,
    ) -> Result<(hyper::StatusCode, Bytes), DashboardError> {
        let mut request = hyper::Request::builder().method(method).uri(url);
        if let Some(token) = token {
            // Ray's token auth (and KubeRay's own dashboard client) use this header.
            request = request.header("x-ray-authorization", format!("Bearer {token}"));
        }
        let request = request.body(Empty::new()).map_err(|e| failed(url, e))?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| failed(url, e))?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|e| failed(url, e))?
                .to_bytes();
            Ok((status, body))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| DashboardError::Timeout(url.to_string()))?
    }
}

/// The body of a successful answer; any other is an error that says why.
fn checked(
    url: &str,
    token: Option<&str>,
    status: hyper::StatusCode,
    body: Bytes,
) -> Result<Bytes, DashboardError> {
    if status == hyper::StatusCode::UNAUTHORIZED || status == hyper::StatusCode::FORBIDDEN {
        let hint = if token.is_some() {
            "the cluster's auth token was refused"
        } else {
            "the dashboard wants a token, but the cluster's spec has no authOptions mode token"
        };
        return Err(failed(url, format!("HTTP {status}: {hint}")));
    }
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        return Err(failed(url, format!("HTTP {status}: {text}")));
    }
    Ok(body)
}

/// Whether the answer `{"<name>": true, ...}` says so; its other fields are skipped unread.
fn flag(url: &str, body: &[u8], set: fn(&job_list::Flags) -> bool) -> Result<bool, DashboardError> {
    let flags: job_list::Flags = serde_json::from_slice(body).map_err(|e| failed(url, e))?;
    Ok(set(&flags))
}

fn failed(url: &str, e: impl std::fmt::Display) -> DashboardError {
    DashboardError::Failed {
        url: url.to_string(),
        message: e.to_string(),
    }
}

/// A submission id as one URL path segment (Ray accepts any string as an id).
fn path_segment(id: &str) -> String {
    id.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[test]
    fn ids_are_one_path_segment() {
        assert_eq!(path_segment("job-a_1.x"), "job-a_1.x");
        assert_eq!(path_segment("a/b c"), "a%2Fb%20c");
    }

    /// A dashboard that answers one request with `status` and `body`; hands back the
    /// request line it got.
    async fn answering(
        status: &'static str,
        body: impl Into<String>,
    ) -> (String, tokio::task::JoinHandle<String>) {
        let body: String = body.into();
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let served = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = socket.read(&mut buf).await.unwrap();
                assert!(n > 0, "the request ended early");
                head.extend_from_slice(&buf[..n]);
            }
            let answer = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            // The client may hang up first (an answer past its bound).
            let _ = socket.write_all(answer.as_bytes()).await;
            let head = String::from_utf8_lossy(&head).into_owned();
            head.lines().next().unwrap_or_default().to_string()
        });
        (base, served)
    }

    /// As Ray 2.60's `DELETE /api/jobs/{id}` answers (dashboard/modules/job/job_head.py).
    #[rstest]
    #[case::deleted("200 OK", r#"{"deleted": true}"#, Ok(true))]
    #[case::gone_already("404 Not Found", "Job a/b c does not exist", Ok(false))]
    #[case::still_running("500 Internal Server Error", "RuntimeError: non-terminal state", Err(()))]
    #[case::a_driver_not_a_submission("400 Bad Request", "Can only delete submission type jobs", Err(()))]
    #[case::token_refused("401 Unauthorized", "", Err(()))]
    #[tokio::test]
    async fn delete_reads_rays_answers(
        #[case] status: &'static str,
        #[case] body: &'static str,
        #[case] expected: Result<bool, ()>,
    ) {
        let (base, served) = answering(status, body).await;
        let d = Dashboard::new(Duration::from_secs(5));
        let got = d.delete(&base, "a/b c", Some("t0k")).await;
        assert_eq!(got.map_err(|_| ()), expected);
        assert_eq!(served.await.unwrap(), "DELETE /api/jobs/a%2Fb%20c HTTP/1.1");
    }

    /// A head runs a tenant's image and may answer anything: a job list of a few MB of
    /// tiny objects is read without building them (none is a submission, the list is cut
    /// at its cap and says so), a malformed or oversized answer is an error, and a head
    /// that never answers is an error within the bound.
    #[tokio::test]
    async fn a_hostile_head_is_answered_in_bounded_time_and_memory() {
        let d = Dashboard::new(Duration::from_secs(5));
        let mut tiny = String::from("[");
        for i in 0..500_000 {
            if i > 0 {
                tiny.push(',');
            }
            tiny.push_str(r#"{"a":0}"#);
        }
        tiny.push(']');
        let (base, _served) = answering("200 OK", tiny).await;
        let list = d.submissions(&base, None).await.unwrap();
        assert!(list.submissions.is_empty() && list.truncated);

        let (base, _served) = answering("200 OK", r#"[{"submission_id": "a", "#).await;
        assert!(d.submissions(&base, None).await.is_err());

        let huge = format!("[\"{}\"]", "x".repeat(MAX_BODY));
        let (base, _served) = answering("200 OK", huge).await;
        assert!(d.submissions(&base, None).await.is_err());

        // Accepts and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let _held = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(60)).await;
            drop(socket);
        });
        let slow = Dashboard::new(Duration::from_millis(300));
        let started = std::time::Instant::now();
        let got = slow.submissions(&base, None).await;
        assert!(matches!(got, Err(DashboardError::Timeout(_))), "{got:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn an_unreachable_dashboard_is_an_error_not_a_hang() {
        // Port 9 on loopback: nothing listens (refused at once) or it is filtered (the
        // timeout ends it); either way an error within the bound.
        let d = Dashboard::new(Duration::from_millis(500));
        assert!(d.submissions("http://127.0.0.1:9", None).await.is_err());
    }
}
