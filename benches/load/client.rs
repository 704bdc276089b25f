//! The load generator's client side: TLS connections kept alive the way kube-apiserver
//! keeps them (one multiplexed HTTP/2 connection, or a pool of HTTP/1.1 connections),
//! open-loop runs at a fixed offered rate and closed-loop runs to saturation.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::client::conn::{http1, http2};
use hyper::header;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio::sync::Semaphore;
use tokio_rustls::TlsConnector;

use crate::sys;

/// Per-request bound, as kube-apiserver's webhook `timeoutSeconds` (rayshare's chart: 5).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    H2,
    H1,
}

impl Proto {
    pub fn name(self) -> &'static str {
        match self {
            Proto::H2 => "h2",
            Proto::H1 => "http/1.1",
        }
    }
}

/// Makes the body of request number `n`.
pub type BodyFn = Arc<dyn Fn(u64) -> Bytes + Send + Sync>;

fn tls_config(ca_pem: &[u8], proto: Proto) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.expect("CA PEM")).expect("CA certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![match proto {
        Proto::H2 => b"h2".to_vec(),
        Proto::H1 => b"http/1.1".to_vec(),
    }];
    Arc::new(config)
}

type H1 = http1::SendRequest<Full<Bytes>>;
type H2 = http2::SendRequest<Full<Bytes>>;

enum Senders {
    H2(Vec<H2>),
    H1 {
        idle: Mutex<Vec<H1>>,
        permits: Semaphore,
    },
}

/// Kept-alive connections to one server.
pub struct Pool {
    senders: Senders,
    next: AtomicUsize,
    addr: SocketAddr,
}

impl Pool {
    pub async fn connect(
        addr: SocketAddr,
        ca_pem: &[u8],
        proto: Proto,
        conns: usize,
    ) -> Result<Self, String> {
        let connector = TlsConnector::from(tls_config(ca_pem, proto));
        let mut h1 = Vec::new();
        let mut h2 = Vec::new();
        for _ in 0..conns {
            let tcp = tokio::net::TcpStream::connect(addr)
                .await
                .map_err(|e| format!("connect {addr}: {e}"))?;
            tcp.set_nodelay(true).map_err(|e| e.to_string())?;
            let name = ServerName::IpAddress(addr.ip().into());
            let tls = connector
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS handshake: {e}"))?;
            let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
            let io = TokioIo::new(tls);
            match proto {
                Proto::H2 => {
                    if alpn.as_deref() != Some(b"h2") {
                        return Err(format!("server did not agree to h2 (ALPN {alpn:?})"));
                    }
                    let (send, conn) = http2::Builder::new(TokioExecutor::new())
                        .timer(TokioTimer::new())
                        .handshake(io)
                        .await
                        .map_err(|e| format!("h2 handshake: {e}"))?;
                    tokio::spawn(conn);
                    h2.push(send);
                }
                Proto::H1 => {
                    let (send, conn) = http1::handshake(io)
                        .await
                        .map_err(|e| format!("http/1.1 handshake: {e}"))?;
                    tokio::spawn(conn);
                    h1.push(send);
                }
            }
        }
        let senders = match proto {
            Proto::H2 => Senders::H2(h2),
            Proto::H1 => Senders::H1 {
                permits: Semaphore::new(h1.len()),
                idle: Mutex::new(h1),
            },
        };
        Ok(Self {
            senders,
            next: AtomicUsize::new(0),
            addr,
        })
    }

    fn request(&self, full_uri: bool, body: Bytes) -> Request<Full<Bytes>> {
        let builder = if full_uri {
            Request::post(format!("https://{}/mutate?timeout=5s", self.addr))
        } else {
            Request::post("/mutate?timeout=5s").header(header::HOST, self.addr.to_string())
        };
        builder
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, */*")
            .body(Full::new(body))
            .expect("a valid request")
    }

    /// One POST /mutate; the response body of a 200.
    pub async fn send(&self, body: Bytes) -> Result<Bytes, String> {
        match &self.senders {
            Senders::H2(conns) => {
                let i = self.next.fetch_add(1, Ordering::Relaxed) % conns.len();
                let mut send = conns[i].clone();
                send.ready().await.map_err(|e| e.to_string())?;
                let response = send
                    .send_request(self.request(true, body))
                    .await
                    .map_err(|e| e.to_string())?;
                read(response).await
            }
            Senders::H1 { idle, permits } => {
                let permit = permits.acquire().await.map_err(|e| e.to_string())?;
                let mut conn = idle
                    .lock()
                    .expect("not poisoned")
                    .pop()
                    .expect("a permit guarantees an idle connection");
                let result = async {
                    conn.ready().await.map_err(|e| e.to_string())?;
                    let response = conn
                        .send_request(self.request(false, body))
                        .await
                        .map_err(|e| e.to_string())?;
                    read(response).await
                }
                .await;
                if conn.is_closed() {
                    // Lost for good: the pool shrinks by one.
                    permit.forget();
                } else {
                    idle.lock().expect("not poisoned").push(conn);
                }
                result
            }
        }
    }
}

async fn read(response: hyper::Response<hyper::body::Incoming>) -> Result<Bytes, String> {
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    if status != hyper::StatusCode::OK {
        return Err(format!("HTTP {status}: {}", String::from_utf8_lossy(&body)));
    }
    Ok(body)
}

/// What one run measured.
#[derive(Debug, Default)]
pub struct Run {
    /// Latencies of the successful requests of the measured window, sorted (ns).
    pub latencies: Vec<u64>,
    /// Open loop: how late the generator sent each request (ns), sorted.
    pub send_lag: Vec<u64>,
    pub errors: u64,
    /// Errors that were 503s: the server refused the request at once (overloaded).
    pub refused: u64,
    pub first_error: Option<String>,
    /// Requests completed per second in the window.
    pub throughput: f64,
    pub window: Duration,
    pub server_cpu_ns: u64,
    pub client_cpu_ns: u64,
    /// CPU time of the whole machine in the window.
    pub system_cpu_ns: u64,
}

impl Run {
    pub fn completed(&self) -> u64 {
        self.latencies.len() as u64
    }

    fn failed(&mut self, e: String) {
        self.errors += 1;
        if e.starts_with("HTTP 503") {
            self.refused += 1;
        }
        self.first_error.get_or_insert(e);
    }

    /// Nearest-rank percentile, in microseconds.
    pub fn pct_us(&self, q: f64) -> f64 {
        percentile(&self.latencies, q) / 1000.0
    }

    pub fn server_cpu_us_per_req(&self) -> f64 {
        self.server_cpu_ns as f64 / 1000.0 / (self.completed() + self.errors).max(1) as f64
    }

    /// Cores busy on average over the window.
    pub fn server_cores(&self) -> f64 {
        self.server_cpu_ns as f64 / self.window.as_nanos().max(1) as f64
    }

    pub fn client_cores(&self) -> f64 {
        self.client_cpu_ns as f64 / self.window.as_nanos().max(1) as f64
    }

    /// Cores busy with anything but the server and the load generator (the control
    /// plane, or whatever else runs on the machine): noise.
    pub fn other_cores(&self) -> f64 {
        let other = self
            .system_cpu_ns
            .saturating_sub(self.server_cpu_ns + self.client_cpu_ns);
        other as f64 / self.window.as_nanos().max(1) as f64
    }
}

pub fn percentile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64
}

struct Cpu {
    at: Instant,
    server: u64,
    client: u64,
    system: u64,
}

impl Cpu {
    fn now(server_pid: u32) -> Self {
        Self {
            at: Instant::now(),
            server: sys::cpu_ns(server_pid),
            client: sys::self_cpu_ns(),
            system: sys::system_cpu_ns(),
        }
    }
}

/// Open loop: request `i` is due at `start + i / rate` whatever happened to the earlier
/// ones, and its latency runs from when it was due (no coordinated omission). A plain OS
/// thread paces the requests (tokio's timer wheel has 1 ms resolution).
pub async fn open_loop(
    pool: Arc<Pool>,
    body: BodyFn,
    rate: f64,
    warmup: Duration,
    measure: Duration,
    server_pid: u32,
) -> Run {
    let handle = tokio::runtime::Handle::current();
    let start = Instant::now() + Duration::from_millis(20);
    let first_measured = (warmup.as_secs_f64() * rate).round() as u64;
    let total = first_measured + (measure.as_secs_f64() * rate).round() as u64;
    let dispatcher = std::thread::spawn(move || {
        // Real-time priority (when allowed) so the pacing thread is not delayed by the
        // client's own worker thread on the same CPU; it sleeps between requests.
        sys::realtime_priority();
        let mut tasks = Vec::with_capacity(total as usize);
        for i in 0..total {
            let due = start + Duration::from_nanos((i as f64 * 1e9 / rate) as u64);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            let sent = Instant::now();
            let pool = pool.clone();
            let body = body.clone();
            tasks.push(handle.spawn(async move {
                let result = tokio::time::timeout(REQUEST_TIMEOUT, pool.send(body(i))).await;
                let done = Instant::now();
                let result = result.unwrap_or_else(|_| Err("timed out".into()));
                (i, done - due, sent - due, result)
            }));
        }
        tasks
    });
    tokio::time::sleep_until((start + warmup).into()).await;
    let cpu0 = Cpu::now(server_pid);
    let tasks = tokio::task::spawn_blocking(move || dispatcher.join().expect("dispatcher"))
        .await
        .expect("dispatcher join");
    let mut run = Run::default();
    for task in tasks {
        let (i, latency, lag, result) = task.await.expect("request task");
        if i < first_measured {
            continue;
        }
        run.send_lag.push(lag.as_nanos() as u64);
        match result {
            Ok(_) => run.latencies.push(latency.as_nanos() as u64),
            Err(e) => run.failed(e),
        }
    }
    let cpu1 = Cpu::now(server_pid);
    finish(&mut run, cpu0, cpu1);
    run
}

/// Closed loop: `concurrency` requests always in flight; throughput is what completed
/// in the measured window.
pub async fn closed_loop(
    pool: Arc<Pool>,
    body: BodyFn,
    concurrency: usize,
    warmup: Duration,
    measure: Duration,
    server_pid: u32,
) -> Run {
    let window_start = Instant::now() + warmup;
    let window_end = window_start + measure;
    let counter = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (pool, body, counter) = (pool.clone(), body.clone(), counter.clone());
        workers.push(tokio::spawn(async move {
            let mut run = Run::default();
            loop {
                let begun = Instant::now();
                if begun >= window_end {
                    break;
                }
                let i = counter.fetch_add(1, Ordering::Relaxed);
                let result = tokio::time::timeout(REQUEST_TIMEOUT, pool.send(body(i))).await;
                let done = Instant::now();
                if done < window_start || done > window_end {
                    continue;
                }
                match result.unwrap_or_else(|_| Err("timed out".into())) {
                    Ok(_) => run.latencies.push((done - begun).as_nanos() as u64),
                    Err(e) => run.failed(e),
                }
            }
            run
        }));
    }
    tokio::time::sleep_until(window_start.into()).await;
    let cpu0 = Cpu::now(server_pid);
    tokio::time::sleep_until(window_end.into()).await;
    let cpu1 = Cpu::now(server_pid);
    let mut run = Run::default();
    for w in workers {
        let w = w.await.expect("worker");
        run.latencies.extend(w.latencies);
        run.errors += w.errors;
        run.refused += w.refused;
        if run.first_error.is_none() {
            run.first_error = w.first_error;
        }
    }
    finish(&mut run, cpu0, cpu1);
    run.throughput = run.completed() as f64 / measure.as_secs_f64();
    run
}

fn finish(run: &mut Run, cpu0: Cpu, cpu1: Cpu) {
    run.latencies.sort_unstable();
    run.send_lag.sort_unstable();
    run.window = cpu1.at - cpu0.at;
    run.server_cpu_ns = cpu1.server.saturating_sub(cpu0.server);
    run.client_cpu_ns = cpu1.client.saturating_sub(cpu0.client);
    run.system_cpu_ns = cpu1.system.saturating_sub(cpu0.system);
    run.throughput = run.completed() as f64 / run.window.as_secs_f64();
}
