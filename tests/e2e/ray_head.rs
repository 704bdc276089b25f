//! A real Ray head (`ray[default]` from PyPI, tests/tools/install-ray.sh) on 127.0.0.1 with
//! its dashboard: one per test binary, started by the first test that needs it and
//! stopped when the test binary ends, however it ends (see [`supervised`]).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::harness::*;

pub struct RayHead {
    _child: Child,
    /// `http://127.0.0.1:<port>`
    pub dashboard: String,
    /// The virtualenv's bin directory (`ray`, `python`).
    pub bin: PathBuf,
    /// The head's working directory: where drivers start unless told otherwise.
    pub cwd: PathBuf,
    /// Its auth token, when it runs in token mode (`RAY_AUTH_MODE=token`).
    pub token: Option<String>,
    _dir: tempfile::TempDir,
}

pub static RAY_HEAD: LazyLock<RayHead> = LazyLock::new(|| RayHead::start(None, (10002, 14999)));

/// A second head, in token mode (as KubeRay 1.6 runs one with `authOptions.mode: token`).
pub static RAY_TOKEN_HEAD: LazyLock<RayHead> =
    LazyLock::new(|| RayHead::start(Some("e2eTokenModeHead0123456789abcdefXYZ"), (15000, 19999)));

/// The environment that puts Ray (head or CLI) in token mode with `token`.
fn token_env(token: Option<&str>) -> Vec<(&'static str, String)> {
    token
        .map(|t| {
            vec![
                ("RAY_AUTH_MODE", "token".to_string()),
                ("RAY_AUTH_TOKEN", t.to_string()),
            ]
        })
        .unwrap_or_default()
}

impl RayHead {
    /// A head with its own ports: two heads on one machine must not share the client
    /// server's, the agent's or their workers' ports.
    fn start(token: Option<&str>, (min_worker, max_worker): (u16, u16)) -> Self {
        let bin = run_script(&repo().join("tests/tools/install-ray.sh"));
        // Short: Ray's unix socket paths live under it (108-byte limit).
        let dir = tempfile::Builder::new()
            .prefix("rsray")
            .tempdir_in("/tmp")
            .unwrap();
        let (gcs, dashboard) = (free_port(), free_port());
        let log = dir.path().join("head.log");
        let child = supervised(bin.join("ray"))
            .args(["start", "--head", "--block", "--disable-usage-stats"])
            .arg(format!("--port={gcs}"))
            .args(["--dashboard-host=127.0.0.1", "--include-dashboard=true"])
            .arg(format!("--dashboard-port={dashboard}"))
            .args(["--num-cpus=2", "--object-store-memory=100000000"])
            .arg(format!("--ray-client-server-port={}", free_port()))
            .arg(format!("--dashboard-agent-listen-port={}", free_port()))
            .arg(format!("--min-worker-port={min_worker}"))
            .arg(format!("--max-worker-port={max_worker}"))
            .envs(token_env(token))
            .arg(format!("--temp-dir={}", dir.path().join("t").display()))
            .current_dir(dir.path())
            .env("RAY_USAGE_STATS_ENABLED", "0")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("starting the Ray head");
        let head = Self {
            _child: child,
            dashboard: format!("http://127.0.0.1:{dashboard}"),
            bin,
            cwd: dir.path().to_path_buf(),
            token: token.map(str::to_string),
            _dir: dir,
        };
        let started = Instant::now();
        while get_blocking(dashboard, "/api/jobs/", head.token.as_deref()).is_none() {
            if started.elapsed() > Duration::from_secs(120) {
                panic!("the Ray head never served its dashboard:\n{}", tail(&log));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        head
    }

    /// Submits a job the way KubeRay's submitter does: `ray job submit` in a bash command
    /// line with the entrypoint pasted in unquoted after `--`.
    pub async fn submit(&self, id: &str, runtime_env_json: Option<&str>, entrypoint: &str) {
        let renv = runtime_env_json
            .map(|_| "--runtime-env-json \"$RUNTIME_ENV\"")
            .unwrap_or_default();
        let line = format!(
            "{} job submit --address {} --submission-id {id} --no-wait {renv} -- {entrypoint}",
            self.bin.join("ray").display(),
            self.dashboard
        );
        // Until the head's job agent is up the dashboard answers "No available agent";
        // KubeRay's submitter Job retries then too.
        let started = Instant::now();
        loop {
            let out = tokio::process::Command::new("bash")
                .args(["-c", &line])
                .env("RUNTIME_ENV", runtime_env_json.unwrap_or_default())
                .envs(token_env(self.token.as_deref()))
                .output()
                .await
                .unwrap();
            if out.status.success() {
                return;
            }
            let stderr = String::from_utf8_lossy(&out.stderr);
            if !stderr.contains("No available agent")
                || started.elapsed() > Duration::from_secs(120)
            {
                panic!("ray job submit {id}: {stderr}");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// A request to the dashboard, with the head's token when it has one.
    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = reqwest::Client::new().request(method, format!("{}{path}", self.dashboard));
        match &self.token {
            Some(t) => request.header("x-ray-authorization", format!("Bearer {t}")),
            None => request,
        }
    }

    async fn get_json(&self, path: &str) -> Value {
        let response = self
            .request(reqwest::Method::GET, path)
            .send()
            .await
            .unwrap();
        response.json().await.unwrap()
    }

    /// Submission `id` as the head lists it; `Null` once its record is deleted (404).
    pub async fn job(&self, id: &str) -> Value {
        let response = self
            .request(reqwest::Method::GET, &format!("/api/jobs/{id}"))
            .send()
            .await
            .unwrap();
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Value::Null;
        }
        response.json().await.unwrap()
    }

    /// The submission ids in the head's job table (`GET /api/jobs/`).
    pub async fn submission_ids(&self) -> Vec<String> {
        let jobs = self.get_json("/api/jobs/").await;
        jobs.as_array()
            .unwrap()
            .iter()
            .filter_map(|j| j["submission_id"].as_str().map(str::to_string))
            .collect()
    }

    pub async fn status(&self, id: &str) -> String {
        self.job(id).await["status"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    pub async fn logs(&self, id: &str) -> String {
        let v = self.get_json(&format!("/api/jobs/{id}/logs")).await;
        v["logs"].as_str().unwrap_or("").to_string()
    }

    /// Waits until submission `id` has status `status` (drivers start in seconds, but a
    /// loaded CI machine runs many tests at once).
    pub async fn wait_status(&self, id: &str, status: &str) {
        let what = format!("Ray job {id} to be {status}");
        wait_for_within(Duration::from_secs(120), &what, || async {
            (self.status(id).await == status).then_some(())
        })
        .await
    }

    /// Waits until submission `id` is STOPPED, or its record is gone: rayshare deletes the
    /// record of a Ray job that is over and whose RayJob is gone, perhaps before a poll
    /// sees it stopped. (A record goes only once its job is over.)
    pub async fn wait_stopped(&self, id: &str) {
        let what = format!("Ray job {id} to be STOPPED (or its record deleted)");
        wait_for_within(Duration::from_secs(120), &what, || async {
            let job = self.job(id).await;
            (job.is_null() || job["status"] == "STOPPED").then_some(())
        })
        .await
    }

    /// Waits until the driver of `id` has printed `text`; returns its log.
    pub async fn wait_log(&self, id: &str, text: &str) -> String {
        let what = format!("Ray job {id} to print {text:?}");
        wait_for_within(Duration::from_secs(120), &what, || async {
            Some(self.logs(id).await).filter(|l| l.contains(text))
        })
        .await
    }

    pub async fn stop(&self, id: &str) {
        let path = format!("/api/jobs/{id}/stop");
        self.request(reqwest::Method::POST, &path)
            .send()
            .await
            .unwrap();
    }

    /// Deletes the record of a job that is over.
    pub async fn delete(&self, id: &str) {
        let path = format!("/api/jobs/{id}");
        self.request(reqwest::Method::DELETE, &path)
            .send()
            .await
            .unwrap();
    }
}

/// A plain HTTP GET on loopback, for waiting in a blocking context; `Some` on 200.
fn get_blocking(port: u16, path: &str, token: Option<&str>) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let auth = token
        .map(|t| format!("x-ray-authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n{auth}\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let status = out.lines().next()?.split_whitespace().nth(1)?;
    (status == "200").then_some(out)
}

impl RayHead {
    /// The dashboard's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.dashboard.rsplit(':').next().unwrap().parse().unwrap()
    }
}

/// Plays KubeRay's part for a shared cluster: a pod labelled as `cluster`'s head,
/// controlled by `owner_uid` (the cluster's own uid, as KubeRay makes it, or another for an
/// impostor), running at 127.0.0.1 with its dashboard on `port`.
pub async fn head_pod(env: &TestEnv, cluster: &Value, name: &str, owner_uid: &str, port: u16) {
    let cluster_name = cluster["metadata"]["name"].as_str().unwrap();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name,
            "labels": {"ray.io/cluster": cluster_name, "ray.io/node-type": "head"},
            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster",
                "name": cluster_name, "uid": owner_uid, "controller": true}]},
        "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0",
            "ports": [{"name": "gcs", "containerPort": 6379},
                {"name": "dashboard", "containerPort": port}]}]},
    }))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let running = json!({"status": {"phase": "Running", "podIP": "127.0.0.1",
        "podIPs": [{"ip": "127.0.0.1"}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&running))
        .await
        .unwrap();
}

/// Plays KubeRay's part: reports pod `name` as `cluster`'s head in the cluster's status
/// (the status subresource, as KubeRay writes it).
pub async fn report_head(env: &TestEnv, cluster: &Value, name: &str) {
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    let status = json!({"status": {"head": {"podName": name, "podIP": "127.0.0.1"}}});
    clusters
        .patch_status(
            cluster["metadata"]["name"].as_str().unwrap(),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .unwrap();
}
