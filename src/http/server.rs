//! The HTTPS admission listener and the plain-HTTP admin listener, with graceful drain.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::cause::Cause;
use crate::health::Health;
use crate::metrics::{Metrics, ProtocolLabel};

pub struct Listeners {
    pub admission: TcpListener,
    pub admin: TcpListener,
}

impl Listeners {
    pub async fn bind(admission: SocketAddr, admin: SocketAddr) -> std::io::Result<Self> {
        Ok(Self {
            admission: TcpListener::bind(admission).await?,
            admin: TcpListener::bind(admin).await?,
        })
    }
}

/// The webhook port: its routes, its TLS, and how many connections it serves at once.
pub struct Webhook {
    pub router: Router,
    pub tls: Arc<rustls::ServerConfig>,
    pub max_connections: usize,
    /// Counts connections by protocol, and those being served.
    pub metrics: Arc<Metrics>,
}

pub struct Drain {
    /// Keep serving this long after the signal while endpoints stop routing to us.
    pub delay: Duration,
    /// Bound on waiting for in-flight requests.
    pub timeout: Duration,
}

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// HTTP/2 pings on a connection idle this long; a peer that does not answer within
/// `KEEP_ALIVE_TIMEOUT` is gone and its connection closed.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// Streams in flight on one HTTP/2 connection.
const MAX_STREAMS: u32 = 256;

/// What each accepted connection is served with.
struct Serving {
    acceptor: TlsAcceptor,
    builder: Arc<auto::Builder<TokioExecutor>>,
    router: Router,
    slots: Arc<tokio::sync::Semaphore>,
    metrics: Arc<Metrics>,
}

/// Serves until `shutdown` resolves, then drains: readiness goes false, new connections
/// stop after `drain.delay`, in-flight requests get up to `drain.timeout`. At most
/// `max_connections` are served at once: the webhook port is open to every pod by
/// default, and past the bound a connection is closed rather than given a task and a
/// TLS session.
pub async fn serve(
    listeners: Listeners,
    webhook: Webhook,
    admin: Router,
    health: Arc<Health>,
    drain: Drain,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let Webhook {
        router: admission,
        tls,
        max_connections,
        metrics,
    } = webhook;
    let acceptor = TlsAcceptor::from(tls);
    health.certs_loaded.store(true, Ordering::Release);
    let (admin_stop_tx, admin_stop_rx) = tokio::sync::oneshot::channel::<()>();
    let admin_task = tokio::spawn(async move {
        let stop = async {
            let _ = admin_stop_rx.await;
        };
        axum::serve(listeners.admin, admin)
            .with_graceful_shutdown(stop)
            .await
    });

    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
        .max_concurrent_streams(MAX_STREAMS);
    let serving = Serving {
        acceptor,
        builder: Arc::new(builder),
        router: admission,
        slots: Arc::new(tokio::sync::Semaphore::new(max_connections)),
        metrics,
    };
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listeners.admission.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                spawn_connection(stream, peer, &serving, graceful.watcher());
            }
            () = &mut shutdown => break,
        }
    }

    tracing::info!(delay = ?drain.delay, "shutting down: not ready, draining");
    health.draining.store(true, Ordering::Release);
    // Keep accepting during the delay so requests routed before endpoints update succeed.
    let keep_accepting = async {
        loop {
            if let Ok((stream, peer)) = listeners.admission.accept().await {
                spawn_connection(stream, peer, &serving, graceful.watcher());
            }
        }
    };
    let _ = tokio::time::timeout(drain.delay, keep_accepting).await;
    drop(listeners.admission);
    if tokio::time::timeout(drain.timeout, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(timeout = ?drain.timeout, "in-flight requests did not finish in time");
    }
    let _ = admin_stop_tx.send(());
    let _ = admin_task.await;
    tracing::info!("stopped");
    Ok(())
}

/// Serves one connection: TLS handshake (bounded), then HTTP/1.1 or HTTP/2 per ALPN.
fn spawn_connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    serving: &Serving,
    watcher: hyper_util::server::graceful::Watcher,
) {
    let Ok(slot) = serving.slots.clone().try_acquire_owned() else {
        let cause = Cause::Overloaded;
        tracing::warn!(%peer, %cause, "too many connections (--max-connections); closed this one");
        serving.metrics.error(cause);
        return;
    };
    let _ = stream.set_nodelay(true);
    let acceptor = serving.acceptor.clone();
    let builder = serving.builder.clone();
    let service = TowerToHyperService::new(serving.router.clone());
    let metrics = serving.metrics.clone();
    tokio::spawn(async move {
        let _slot = slot;
        let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream))
            .await
            .map_err(|_| format!("no handshake within {HANDSHAKE_TIMEOUT:?}"))
            .and_then(|accepted| accepted.map_err(|e| e.to_string()));
        let tls = match handshake {
            Ok(tls) => tls,
            Err(error) => {
                let cause = Cause::TlsHandshake;
                // Info, not warn: anyone who reaches the port can make one.
                tracing::info!(%peer, %cause, %error, "TLS handshake failed");
                metrics.error(cause);
                return;
            }
        };
        let protocol = match tls.get_ref().1.alpn_protocol() {
            Some(b"h2") => "h2",
            _ => "http/1.1",
        };
        metrics
            .connections
            .get_or_create(&ProtocolLabel { protocol })
            .inc();
        metrics.connections_open.inc();
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
        if let Err(e) = watcher.watch(conn.into_owned()).await {
            tracing::debug!(%peer, error = %e, "connection ended with an error");
        }
        metrics.connections_open.dec();
    });
}

/// Resolves on SIGTERM or SIGINT. The handlers are installed when this is called (not
/// when first polled), so a signal that arrives during startup is not lost.
pub fn signal() -> impl Future<Output = ()> + Send {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("installing a SIGINT handler");
    async move {
        tokio::select! {
            _ = term.recv() => {},
            _ = int.recv() => {},
        }
    }
}
