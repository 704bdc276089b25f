//! What crosses the wire: protocols, TLS, malformed requests and certificate rotation.

use super::*;
use clients::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_http1_and_http2() {
    init_crypto();
    let dir = TempDir::new().unwrap();
    let pki = generate_pki(&dir.path().join("certs"));
    let server = Server::start(dir.path(), ServeOptions::new(&pki)).await;
    let ca: &[u8] = &pki.ca;

    let http1 = https(&[ca]).http1_only().build().unwrap();
    assert_eq!(pass_through(&http1, &server, "h1").await, Version::HTTP_11);
    let http2 = client(&[ca]);
    assert_eq!(pass_through(&http2, &server, "h2").await, Version::HTTP_2);

    let tls12 = https(&[ca])
        .min_tls_version(reqwest::tls::Version::TLS_1_2)
        .max_tls_version(reqwest::tls::Version::TLS_1_2)
        .build()
        .unwrap();
    assert_eq!(
        pass_through(&tls12, &server, "tls12").await,
        Version::HTTP_2
    );
    let tls13 = https(&[ca])
        .min_tls_version(reqwest::tls::Version::TLS_1_3)
        .build()
        .unwrap();
    pass_through(&tls13, &server, "tls13").await;

    // A client that does not trust the CA must not get through.
    let stranger = generate_pki(&dir.path().join("stranger"));
    let err = post_review(&client(&[&stranger.ca]), &server, &deployment_review("x"))
        .await
        .expect_err("a client trusting another CA must fail the handshake");
    assert!(err.is_connect(), "{err:?}");
    // Counted, as the API server's failing handshakes (a stale caBundle) would be.
    let wait = Duration::from_secs(10);
    let failed = r#"rayshare_errors_total{cause="tls_handshake"} 1"#;
    let metrics = server.await_metric(failed, wait).await;
    assert!(
        metrics.contains(
            r#"rayshare_admission_requests_total{kind="other",operation="CREATE",outcome="ignored"} 4"#
        ),
        "{metrics}"
    );
    // A connection per client, each counted by the protocol its handshake agreed.
    for (protocol, n) in [("http/1.1", 1), ("h2", 3)] {
        let line = format!("rayshare_webhook_connections_total{{protocol=\"{protocol}\"}} {n}\n");
        assert!(metrics.contains(&line), "{line}in\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_over_the_wire() {
    init_crypto();
    let dir = TempDir::new().unwrap();
    let pki = generate_pki(&dir.path().join("certs"));
    let server = Server::start(dir.path(), ServeOptions::new(&pki)).await;
    let c = client(&[&pki.ca]);
    let mutate = server.url("/mutate");
    let json_post = || c.post(&mutate).header("content-type", "application/json");

    let v = rejected(json_post().body("{nope"), StatusCode::BAD_REQUEST).await;
    assert_eq!(v["cause"], "not_json", "{v}");
    assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");

    rejected(c.get(&mutate), StatusCode::METHOD_NOT_ALLOWED).await;

    let v = rejected(
        c.post(&mutate)
            .header("content-type", "text/plain")
            .body("{}"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
    )
    .await;
    assert_eq!(v["cause"], "content_type", "{v}");

    // Over HTTP/2 (negotiated here): the 413 arrives cleanly. Over HTTP/1.1 the server
    // closes the connection while the client is still sending, so some clients see a
    // broken pipe / incomplete message instead of the 413.
    let v = rejected(
        json_post().body(vec![b' '; 4 * 1024 * 1024]),
        StatusCode::PAYLOAD_TOO_LARGE,
    )
    .await;
    assert_eq!(v["cause"], "too_large", "{v}");

    let v = rejected(
        c.post(server.url("/validate")).json(&json!({})),
        StatusCode::NOT_FOUND,
    )
    .await;
    assert_eq!(v["cause"], "not_found", "{v}");

    // Still serving, on the same client (HTTP/2 connection) and on a fresh HTTP/1.1 one.
    assert_eq!(pass_through(&c, &server, "after-h2").await, Version::HTTP_2);
    let http1 = https(&[&pki.ca]).http1_only().build().unwrap();
    pass_through(&http1, &server, "after-h1").await;

    let metrics = server.metrics().await;
    for needle in [
        "rayshare_admission_requests_total",
        r#"outcome="bad_request"} 3"#,
        r#"rayshare_errors_total{cause="not_json"} 1"#,
        r#"rayshare_errors_total{cause="content_type"} 1"#,
        r#"rayshare_errors_total{cause="too_large"} 1"#,
    ] {
        assert!(metrics.contains(needle), "no {needle:?} in:\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cert_rotation_by_symlink_swap_with_zero_failed_requests() {
    init_crypto();
    let dir = TempDir::new().unwrap();
    let old = generate_pki(&dir.path().join("old"));
    let new = generate_pki(&dir.path().join("new"));
    let read = |p: &Path| std::fs::read(p).unwrap();
    let mut volume = SecretVolume::new(dir.path().join("tls"));
    volume.publish("2026_a", &read(&old.cert), &read(&old.key));
    let opts = ServeOptions::with_files(volume.cert(), volume.key());
    let server = Server::start(dir.path(), opts).await;

    // A fresh client (so a fresh handshake, no session resumption) per request.
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU32::new(0));
    let traffic = tokio::spawn({
        let (url, stop, ok) = (server.url("/mutate"), stop.clone(), ok.clone());
        let (old_ca, new_ca) = (old.ca.clone(), new.ca.clone());
        async move {
            let mut failures = Vec::new();
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let c = client(&[&old_ca, &new_ca]);
                let uid = format!("rotation-{i}");
                match c.post(&url).json(&deployment_review(&uid)).send().await {
                    Ok(r) if r.status() == StatusCode::OK => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(r) => failures.push(format!("{uid}: HTTP {}", r.status())),
                    Err(e) => failures.push(format!("{uid}: {e:?}")),
                }
            }
            failures
        }
    });
    let started = Instant::now();
    poll(
        Duration::from_secs(10),
        "traffic before the swap",
        async || (ok.load(Ordering::Relaxed) >= 5).then_some(()),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1).saturating_sub(started.elapsed())).await;
    let before_swap = ok.load(Ordering::Relaxed);

    volume.publish("2026_b", &read(&new.cert), &read(&new.key));
    poll(Duration::from_secs(5), "the new certificate", async || {
        let r = post_review(&client(&[&new.ca]), &server, &deployment_review("new")).await;
        r.ok().filter(|r| r.status() == StatusCode::OK)
    })
    .await;
    let only_old = client(&[&old.ca]);
    let err = post_review(&only_old, &server, &deployment_review("old"))
        .await
        .expect_err("the old certificate must be out of service");
    assert!(err.is_connect(), "{err:?}");
    // Keep the traffic going a little past the swap.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let failures = traffic.await.unwrap();
    let ok = ok.load(Ordering::Relaxed);
    assert!(
        failures.is_empty(),
        "{} of {} requests failed: {failures:#?}",
        failures.len(),
        ok as usize + failures.len()
    );
    assert!(
        ok >= before_swap + 5,
        "{before_swap} requests before the swap, {ok} in all"
    );
    server
        .await_metric(
            r#"rayshare_certificate_reloads_total{cause="reloaded"} 1"#,
            Duration::from_secs(1),
        )
        .await;

    // A broken pair (the key is garbage) is rejected; the new pair stays in service.
    volume.publish("2026_c", &read(&new.cert), b"not a key");
    let metrics = server
        .await_metric(
            r#"rayshare_certificate_reloads_total{cause="rejected"}"#,
            Duration::from_secs(5),
        )
        .await;
    assert!(
        metrics.contains(r#"rayshare_errors_total{cause="cert_reload"}"#),
        "{metrics}"
    );
    let fresh = client(&[&new.ca]);
    pass_through(&fresh, &server, "after-broken").await;
    // Logged before the metric is counted, but written to the file by a background thread.
    poll(Duration::from_secs(5), "the rejection logged", async || {
        server
            .log()
            .contains("new serving certificate rejected")
            .then_some(())
    })
    .await;
}
