//! The floor: the least an axum + rustls admission server can do. It reads the whole
//! body and answers a fixed AdmissionReview, with rayshare's TLS settings (rustls with
//! ring, TLS 1.2/1.3, ALPN h2 + http/1.1, same certificate) and the same hyper-util
//! connection builder, on the same tokio runtime flavour.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::header;
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rayshare::http::tls::{CertFiles, CertStore};
use tokio_rustls::TlsAcceptor;

const FIXED: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"00000000-0000-0000-0000-000000000000","allowed":true}}"#;

async fn mutate(body: Bytes) -> impl axum::response::IntoResponse {
    std::hint::black_box(body.len());
    ([(header::CONTENT_TYPE, "application/json")], FIXED)
}

/// `--floor --listen ADDR --tls-cert PATH --tls-key PATH`
pub fn main(args: &[String]) -> ExitCode {
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .unwrap_or_else(|| panic!("floor: {name} is required"))
            .clone()
    };
    let listen: SocketAddr = arg("--listen").parse().expect("floor: --listen ADDR");
    let files = CertFiles {
        cert: PathBuf::from(arg("--tls-cert")),
        key: PathBuf::from(arg("--tls-key")),
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async move {
        let certs = CertStore::load(&files).expect("floor: certificate");
        let acceptor = TlsAcceptor::from(
            rayshare::http::tls::server_config(certs, None, &[]).expect("TLS config"),
        );
        let app = Router::new().route("/mutate", post(mutate));
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .expect("floor: listen");
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(Duration::from_secs(10));
        builder.http2().timer(TokioTimer::new());
        let builder = Arc::new(builder);
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let acceptor = acceptor.clone();
            let builder = builder.clone();
            let service = TowerToHyperService::new(app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let _ = builder
                    .serve_connection_with_upgrades(TokioIo::new(tls), service)
                    .await;
            });
        }
    })
}
