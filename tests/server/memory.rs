//! Memory is bounded by what input becomes, not by its bytes: reviews whose objects would
//! be huge as trees are answered without building them; connections are bounded too.

use super::*;
use clients::*;

/// The process's peak resident memory so far (`VmHWM`), in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status")
}

/// A RayJob review of about 3 MB carrying 380,000 tiny objects (`{"a":0}`): a few MB of
/// bytes, about 270 MB as a `serde_json::Value` tree.
fn tiny_objects_review(uid: &str) -> Vec<u8> {
    let mut review = rayjob_review(uid);
    review["request"]["object"]["spec"]["x"] = json!([]);
    let text = review.to_string();
    let (head, tail) = text.split_at(text.find(r#""x":[]"#).unwrap() + 5);
    let mut body = head.as_bytes().to_vec();
    for i in 0..380_000 {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(br#"{"a":0}"#);
    }
    body.extend_from_slice(tail.as_bytes());
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_reviews_of_tiny_objects_at_once_stay_far_below_the_limit() {
    init_crypto();
    let dir = TempDir::new().unwrap();
    let pki = generate_pki(dir.path());
    let server = Server::start(dir.path(), ServeOptions::new(&pki)).await;
    let client = client(&[&pki.ca]);
    // Warm: the first request sets up TLS and the handlers.
    admitted(
        post_review(&client, &server, &deployment_review("warm"))
            .await
            .unwrap(),
        "warm",
    )
    .await;
    let before = peak_kib(server.pid());
    let bodies: Vec<_> = (0..3)
        .map(|i| tiny_objects_review(&format!("t{i}")))
        .collect();
    assert!(
        bodies
            .iter()
            .all(|b| b.len() > 2_900_000 && b.len() < 3 << 20)
    );
    let sends = bodies.into_iter().enumerate().map(|(i, body)| {
        let client = client.clone();
        let url = server.url("/mutate");
        async move {
            let r = client
                .post(url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            admitted(r, &format!("t{i}")).await
        }
    });
    for response in futures::future::join_all(sends).await {
        assert_eq!(response["allowed"], true, "{response}");
        assert!(response.get("patch").is_none(), "{response}");
        let warning = response["warnings"][0].as_str().unwrap_or_default();
        assert!(warning.contains("MiB"), "{response}");
    }
    let grown_mib = (peak_kib(server.pid()) - before) / 1024;
    eprintln!("rayshare serve's peak grew by {grown_mib} MiB");
    assert!(grown_mib < 128, "peak grew by {grown_mib} MiB");
    assert!(server.metrics().await.contains(r#"cause="input_bound""#));
}

/// Past `--max-connections` a new connection is closed at once; a connection that ends
/// gives its place back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_bound_are_closed_at_once() {
    init_crypto();
    let dir = TempDir::new().unwrap();
    let pki = generate_pki(dir.path());
    let mut opts = ServeOptions::new(&pki);
    opts.extra = vec!["--max-connections", "2"];
    let server = Server::start(dir.path(), opts).await;
    // Each client keeps its connection open (HTTP/1.1 keep-alive) after its request.
    let one_connection = || https(&[&pki.ca]).http1_only().build().unwrap();
    let (a, b) = (one_connection(), one_connection());
    for (i, c) in [&a, &b].into_iter().enumerate() {
        let uid = format!("held-{i}");
        admitted(
            post_review(c, &server, &deployment_review(&uid))
                .await
                .unwrap(),
            &uid,
        )
        .await;
    }
    let third = one_connection();
    assert!(
        post_review(&third, &server, &deployment_review("third"))
            .await
            .is_err(),
        "a third connection was served"
    );
    // The log is written by a background writer: wait for the line, not for a time.
    poll(
        Duration::from_secs(10),
        "the refusal in the log",
        async || server.log().contains("too many connections").then_some(()),
    )
    .await;
    let refused = r#"rayshare_errors_total{cause="overloaded"} 1"#;
    server.await_metric(refused, Duration::from_secs(10)).await;
    drop(a);
    let fourth = poll(
        Duration::from_secs(10),
        "a freed place to be taken",
        async || {
            let c = one_connection();
            post_review(&c, &server, &deployment_review("fourth"))
                .await
                .ok()
        },
    )
    .await;
    admitted(fourth, "fourth").await;
}
