//! Clients of the server under test and the AdmissionReviews they send.

use super::*;

/// A client trusting exactly `cas`; callers pick the protocol.
pub(crate) fn https(cas: &[&[u8]]) -> reqwest::ClientBuilder {
    cas.iter().fold(
        reqwest::Client::builder()
            .no_proxy()
            .tls_built_in_root_certs(false)
            .timeout(Duration::from_secs(15)),
        |b, ca| b.add_root_certificate(Certificate::from_pem(ca).unwrap()),
    )
}

pub(crate) fn client(cas: &[&[u8]]) -> reqwest::Client {
    https(cas).build().unwrap()
}

pub(crate) fn review(uid: &str, gvk: (&str, &str, &str), operation: &str, object: Value) -> Value {
    let (group, version, kind) = gvk;
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "operation": operation,
            "namespace": "team",
            "name": "x",
            "object": object,
        }
    })
}

/// A kind rayshare ignores: always allowed, never patched, never touches the API server.
pub(crate) fn deployment_review(uid: &str) -> Value {
    review(
        uid,
        ("apps", "v1", "Deployment"),
        "CREATE",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {}}),
    )
}

pub(crate) fn rayjob_review(uid: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/samples/rayjob-run-a.yaml");
    let object: Value = serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    review(uid, ("ray.io", "v1", "RayJob"), "CREATE", object)
}

pub(crate) async fn post_review(
    client: &reqwest::Client,
    server: &Server,
    body: &Value,
) -> reqwest::Result<reqwest::Response> {
    client.post(server.url("/mutate")).json(body).send().await
}

/// Checks a 200 answer to `uid` and returns its `response`.
pub(crate) async fn admitted(response: reqwest::Response, uid: &str) -> Value {
    let status = response.status();
    let body: Value = response.json().await.expect("a JSON AdmissionReview");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["apiVersion"], "admission.k8s.io/v1", "{body}");
    assert_eq!(body["kind"], "AdmissionReview", "{body}");
    let r = body["response"].clone();
    assert_eq!(r["uid"], uid, "{body}");
    r
}

/// Sends an ignored-kind review and checks it passes unchanged; returns the HTTP version.
pub(crate) async fn pass_through(client: &reqwest::Client, server: &Server, uid: &str) -> Version {
    let response = post_review(client, server, &deployment_review(uid))
        .await
        .unwrap_or_else(|e| panic!("request {uid}: {e:?}"));
    let version = response.version();
    let r = admitted(response, uid).await;
    assert_eq!(r["allowed"], true, "{r}");
    assert!(r.get("patch").is_none(), "{r}");
    version
}

/// Answers a raw request with `status`, returning the JSON error body.
pub(crate) async fn rejected(request: reqwest::RequestBuilder, status: StatusCode) -> Value {
    let response = request.send().await.expect("an HTTP answer");
    assert_eq!(response.status(), status);
    response.json().await.unwrap_or(Value::Null)
}

pub(crate) async fn poll<T>(
    limit: Duration,
    what: &str,
    mut attempt: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(t) = attempt().await {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Accepts connections and never answers: every API call hangs until its own timeout.
pub(crate) async fn black_hole() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    (addr, task)
}
