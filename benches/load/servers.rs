//! Starting the servers under test (rayshare, the floor) and connecting to them.

use super::*;

impl Bench {
    /// rayshare from this build (or `RAYSHARE_BIN`), with a feature config file or the
    /// defaults.
    pub(super) fn start_rayshare(
        &mut self,
        cores: usize,
        config: Option<&std::path::Path>,
    ) -> Server {
        let bin = std::env::var_os("RAYSHARE_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rayshare")));
        self.start_rayshare_bin(cores, &bin, config)
    }

    pub(super) fn start_rayshare_bin(
        &mut self,
        cores: usize,
        bin: &std::path::Path,
        config: Option<&std::path::Path>,
    ) -> Server {
        self.instances += 1;
        let port = sys::free_port();
        let admin = sys::free_port();
        let log_path = self.out.join(format!("rayshare-{}.log", self.instances));
        let log = std::fs::File::create(&log_path).expect("log file");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
        let admin_addr: SocketAddr = format!("127.0.0.1:{admin}").parse().expect("address");
        sys::pin(&self.server_cores(cores));
        let mut cmd = Command::new(bin);
        cmd.arg("serve");
        if let Some(config) = config {
            cmd.arg("--config").arg(config);
        }
        let proc = Proc::spawn(
            "rayshare",
            cmd.args(["--listen", &addr.to_string()])
                .args(["--admin-listen", &admin_addr.to_string()])
                .arg("--tls-cert")
                .arg(&self.cert)
                .arg("--tls-key")
                .arg(&self.key)
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .args(["--pod-namespace", "rayshare-system"])
                .args(["--pod-name", &format!("rayshare-bench-{}", self.instances)])
                // As the Helm chart runs it.
                .args(["--log-format", "json", "--log-level", "info"])
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log file"))
                .stderr(log),
        );
        sys::pin(&self.cpus);
        let mut server = Server {
            name: "rayshare",
            proc,
            addr,
            admin: Some(admin_addr),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while sys::http_get_status(admin_addr, "/readyz") != Some(200) {
            server.proc.check_alive();
            assert!(
                Instant::now() < deadline,
                "rayshare not ready in 60 s (see {})",
                log_path.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    pub(super) fn start_floor(&mut self, cores: usize) -> Server {
        let port = sys::free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
        sys::pin(&self.server_cores(cores));
        let proc = Proc::spawn(
            "floor",
            Command::new(std::env::current_exe().expect("own path"))
                .args(["--floor", "--listen", &addr.to_string()])
                .arg("--tls-cert")
                .arg(&self.cert)
                .arg("--tls-key")
                .arg(&self.key)
                .stdin(Stdio::null()),
        );
        sys::pin(&self.cpus);
        let mut server = Server {
            name: "floor",
            proc,
            addr,
            admin: None,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(addr).is_err() {
            server.proc.check_alive();
            assert!(Instant::now() < deadline, "floor not listening");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// Sends one request on a fresh connection; the AdmissionReview answered.
    pub(super) fn probe(&self, server: &Server, body: bytes::Bytes) -> Value {
        self.rt.block_on(async {
            let pool = Pool::connect(server.addr, &self.ca_pem, Proto::H2, 1)
                .await
                .unwrap_or_else(|e| panic!("connecting to {}: {e}", server.name));
            let answer = pool
                .send(body)
                .await
                .unwrap_or_else(|e| panic!("{} answered: {e}", server.name));
            serde_json::from_slice(&answer).expect("a JSON answer")
        })
    }

    pub(super) fn api_requests(&self) -> BTreeMap<String, f64> {
        self.rt.block_on(cluster::api_requests(&self.kube))
    }

    pub(super) fn load_runtime(&self, cores: usize) -> tokio::runtime::Runtime {
        let client = self.client_cores(cores);
        // The main thread drives block_on and paces open-loop runs: it stays there too.
        sys::pin(&client);
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(client.len())
            .enable_all()
            .build()
            .expect("load runtime")
    }

    pub(super) fn wait_until(
        &self,
        server: &Server,
        what: &str,
        kind: &Kind,
        ok: impl Fn(&Value) -> bool,
    ) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let answer = self.probe(server, kind.body()(0));
            if ok(&answer) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "waited 120 s for {what}; last answer: {answer}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub(super) fn connect(
        &self,
        load: &tokio::runtime::Runtime,
        server: &Server,
        proto: Proto,
    ) -> Arc<Pool> {
        let conns = self.settings.conns(proto);
        Arc::new(
            load.block_on(Pool::connect(server.addr, &self.ca_pem, proto, conns))
                .unwrap_or_else(|e| panic!("connecting to {}: {e}", server.name)),
        )
    }
}
