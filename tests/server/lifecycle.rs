//! The server's life: draining on SIGTERM, refusing a bad config, running in process.

use super::*;
use clients::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_in_flight_request() {
    init_crypto();
    let dir = TempDir::new().unwrap();
    let pki = generate_pki(&dir.path().join("certs"));
    let (api, api_task) = black_hole().await;
    let mut opts = ServeOptions::new(&pki);
    opts.api_server = format!("https://{api}");
    // Long enough that SIGTERM and the /readyz polls land while the request is held,
    // even on a loaded machine.
    opts.config = Some("admissionTimeoutMs: 8000\nsharedClusters:\n  createTimeoutMs: 6000\n");
    let mut server = Server::start(dir.path(), opts).await;
    let (status, body) = server.admin_get("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("caches not synced"), "{body}");

    let started = Instant::now();
    let in_flight = tokio::spawn({
        let (c, url, body) = (
            client(&[&pki.ca]),
            server.url("/mutate"),
            rayjob_review("u1"),
        );
        async move { c.post(url).json(&body).send().await }
    });
    server
        .await_metric("rayshare_admission_in_flight 1", Duration::from_secs(5))
        .await;
    let kill = Command::new("kill")
        .arg("-TERM")
        .arg(server.pid().to_string())
        .status()
        .unwrap();
    assert!(kill.success());

    poll(
        Duration::from_secs(5),
        "/readyz to say draining",
        async || {
            let (status, body) = server.try_admin_get("/readyz").await.ok()?;
            (status == StatusCode::SERVICE_UNAVAILABLE && body.contains("draining")).then_some(())
        },
    )
    .await;
    // Its read times out at 6 s: before that it must still be waiting (looked at first,
    // timed second, so a busy machine that got here late cannot make this fail).
    let finished = in_flight.is_finished();
    if started.elapsed() < Duration::from_millis(5800) {
        assert!(
            !finished,
            "the request should still be waiting for the API server"
        );
    }

    let response = in_flight
        .await
        .unwrap()
        .expect("the in-flight request is answered");
    let elapsed = started.elapsed();
    let r = admitted(response, "u1").await;
    assert_eq!(r["allowed"], true, "{r}");
    // Admission writes nothing; its one read (is the cluster there?) timed out, so the
    // job is rewritten anyway (the provisioner makes the cluster once the job is stored).
    assert!(r.get("patch").is_some(), "{r}");
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains("could not check shared RayCluster") && warnings.contains("timed out"),
        "{r}"
    );
    assert!(
        elapsed >= Duration::from_millis(5800),
        "answered after {elapsed:?}"
    );

    let status = server
        .exit_within(Duration::from_secs(10))
        .await
        .expect("rayshare serve should exit after draining");
    assert!(status.success(), "exit status {status}");
    for addr in [server.addr, server.admin] {
        let err = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
            .expect_err("nothing should listen after exit");
        assert_eq!(
            err.kind(),
            std::io::ErrorKind::ConnectionRefused,
            "{addr}: {err}"
        );
    }
    api_task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_config_fails_before_listening() {
    init_crypto();
    let dir = TempDir::new().unwrap();
    let pki = generate_pki(&dir.path().join("certs"));
    // Hold both ports: a server that tried to listen would fail with "cannot listen"
    // (exit 1) instead of naming the config field (exit 2).
    let admission = StdTcpListener::bind("127.0.0.1:0").unwrap();
    let admin = StdTcpListener::bind("127.0.0.1:0").unwrap();
    let cases = [
        (
            "podGroups:\n  schedulerNames: []\n",
            2,
            "podGroups.schedulerNames",
        ),
        ("sharedClusters: {bogus: 1}\n", 2, "sharedClusters"),
        // Control: a valid config reaches the listeners, which are taken.
        (
            "sharedClusters:\n  createTimeoutMs: 1500\n",
            1,
            "cannot listen",
        ),
    ];
    for (i, (config, code, needle)) in cases.into_iter().enumerate() {
        let case_dir = dir.path().join(format!("case{i}"));
        std::fs::create_dir(&case_dir).unwrap();
        let mut opts = ServeOptions::new(&pki);
        opts.config = Some(config);
        opts.listen = admission.local_addr().unwrap().port();
        opts.admin_listen = admin.local_addr().unwrap().port();
        let mut server = Server::spawn(&case_dir, opts);
        let status = server
            .exit_within(Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("config {config:?}: still running"));
        let log = server.log();
        assert_eq!(status.code(), Some(code), "config {config:?}: {log}");
        assert!(log.contains(needle), "config {config:?}: {log}");
    }
}

/// The whole server started in this process (`App`), answering, then stopped by its
/// shutdown future: what an embedding or an in-process test does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_runs_in_process_and_stops_on_shutdown() {
    use clap::Parser;
    use rayshare::cli::{Cli, Command as Sub};
    init_crypto();
    let dir = TempDir::new().unwrap();
    let pki = generate_pki(&dir.path().join("certs"));
    let kubeconfig = write_kubeconfig(dir.path(), REFUSING_API_SERVER);
    let cli = Cli::try_parse_from([
        "rayshare",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--tls-cert",
        pki.cert.to_str().unwrap(),
        "--tls-key",
        pki.key.to_str().unwrap(),
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--drain-timeout-seconds",
        "1",
    ])
    .unwrap();
    let Sub::Serve(args) = cli.command else {
        panic!("serve")
    };
    let app = rayshare::app::App::build(*args, tokio::runtime::Handle::current())
        .await
        .unwrap();
    let (addr, admin) = app.addresses().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(app.run(async move {
        let _ = stopped.await;
    }));
    let answer = client(&[&pki.ca])
        .post(format!("https://{addr}/mutate"))
        .json(&rayjob_review("in-process"))
        .send()
        .await
        .expect("the in-process server answers");
    assert_eq!(answer.status(), StatusCode::OK);
    let live = reqwest::get(format!("http://{admin}/livez")).await.unwrap();
    assert_eq!(live.status(), StatusCode::OK);
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("run returns after shutdown")
        .unwrap()
        .unwrap();
}
