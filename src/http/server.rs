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

use crate::health::Health;

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

pub struct Drain {
    /// Keep serving this long after the signal while endpoints stop routing to us.
    pub delay: Duration,
    /// Bound on waiting for in-flight requests.
    pub timeout: Duration,
}

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves until `shutdown` resolves, then drains: readiness goes false, new connections
/// stop after `drain.delay`, in-flight requests get up to `drain.timeout`.
pub async fn serve(
    listeners: Listeners,
    admission: Router,
    admin: Router,
    tls: Arc<rustls::ServerConfig>,
    health: Arc<Health>,
    drain: Drain,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
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
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
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
                spawn_connection(stream, peer, &acceptor, &builder, &admission, graceful.watcher());
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
                spawn_connection(
                    stream,
                    peer,
                    &acceptor,
                    &builder,
                    &admission,
                    graceful.watcher(),
                );
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
    acceptor: &TlsAcceptor,
    builder: &Arc<auto::Builder<TokioExecutor>>,
    router: &Router,
    watcher: hyper_util::server::graceful::Watcher,
) {
    let _ = stream.set_nodelay(true);
    let acceptor = acceptor.clone();
    let builder = builder.clone();
    let service = TowerToHyperService::new(router.clone());
    tokio::spawn(async move {
        let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                return;
            }
        };
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
        if let Err(e) = watcher.watch(conn.into_owned()).await {
            tracing::debug!(%peer, error = %e, "connection ended with an error");
        }
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
