//! Serving certificates that rotate without a restart.
//!
//! The resolver hands every handshake the current pair from an `ArcSwap`. A poller
//! re-reads the files by path (following symlinks) and swaps in a new pair when the
//! bytes change; Kubernetes' Secret-volume update swaps a `..data` symlink, which an
//! inotify watch on the old inodes would miss. A broken pair keeps the old one in service.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::crypto::ring::sign::any_supported_type;
use rustls::server::WebPkiClientVerifier;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};

use crate::cause::Cause;
use crate::metrics::{Metrics, ReloadLabel};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// Parses a PEM chain and key and checks that they belong together.
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Invalid(format!("certificate PEM: {e}")))?;
    if chain.is_empty() {
        return Err(TlsError::Invalid(
            "no certificate in the certificate file".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| TlsError::Invalid(format!("private key PEM: {e}")))?;
    let signing_key =
        any_supported_type(&key).map_err(|e| TlsError::Invalid(format!("private key: {e}")))?;
    let certified = CertifiedKey::new(chain, signing_key);
    certified
        .keys_match()
        .map_err(|e| TlsError::Invalid(format!("certificate and key do not match: {e}")))?;
    Ok(certified)
}

/// The current serving pair, swapped atomically on reload.
#[derive(Debug)]
pub struct CertStore {
    current: ArcSwap<CertifiedKey>,
    /// Fingerprint of the files last looked at (served or rejected), so a broken pair
    /// is reported once, not on every poll.
    fingerprint: ArcSwap<[u8; 32]>,
}

fn fingerprint(cert: &[u8], key: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(cert);
    h.update([0]);
    h.update(key);
    h.finalize().into()
}

impl CertStore {
    pub fn load(files: &CertFiles) -> Result<Arc<Self>, TlsError> {
        let (cert, key) = (read(&files.cert)?, read(&files.key)?);
        let pair = certified_key(&cert, &key)?;
        Ok(Arc::new(Self {
            current: ArcSwap::from_pointee(pair),
            fingerprint: ArcSwap::from_pointee(fingerprint(&cert, &key)),
        }))
    }

    /// Re-reads the files; swaps when they changed and are valid. `Ok(true)` if swapped.
    pub fn reload(&self, files: &CertFiles) -> Result<bool, TlsError> {
        let (cert, key) = (read(&files.cert)?, read(&files.key)?);
        let print = fingerprint(&cert, &key);
        if **self.fingerprint.load() == print {
            return Ok(false);
        }
        self.fingerprint.store(Arc::new(print));
        let pair = certified_key(&cert, &key)?;
        self.current.store(Arc::new(pair));
        Ok(true)
    }

    /// Polls the files forever (cancel by dropping the task).
    pub async fn watch(self: Arc<Self>, files: CertFiles, every: Duration, metrics: Arc<Metrics>) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let cause = match self.reload(&files) {
                Ok(false) => continue,
                Ok(true) => {
                    tracing::info!(cert = %files.cert.display(), "serving certificate reloaded");
                    "reloaded"
                }
                Err(e) => {
                    tracing::error!(error = %e, "new serving certificate rejected; keeping the old one");
                    metrics.error(Cause::CertReload);
                    "rejected"
                }
            };
            metrics
                .cert_reloads
                .get_or_create(&ReloadLabel { cause })
                .inc();
        }
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// The CAs whose client certificates the admission port requires (`--client-ca`): the
/// API server presents one when its AdmissionConfiguration's `kubeConfigFile` names it.
pub fn client_roots(path: &Path) -> Result<Arc<RootCertStore>, TlsError> {
    let pem = read(path)?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| TlsError::Invalid(format!("client CA PEM: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| TlsError::Invalid(format!("client CA: {e}")))?;
    }
    if roots.is_empty() {
        return Err(TlsError::Invalid(format!(
            "no certificate in {}",
            path.display()
        )));
    }
    Ok(Arc::new(roots))
}

/// TLS 1.2 and 1.3, ALPN h2 then http/1.1 (kube-apiserver's client speaks HTTP/2); with
/// `client_roots`, only clients with a certificate they signed complete the handshake,
/// and, unless `client_names` is empty, only one issued to one of those names.
pub fn server_config(
    store: Arc<CertStore>,
    client_roots: Option<Arc<RootCertStore>>,
    client_names: &[String],
) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .expect("ring supports TLS 1.2 and 1.3");
    let builder = match client_roots {
        None => builder.with_no_client_auth(),
        Some(roots) => {
            let mut verifier = WebPkiClientVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| TlsError::Invalid(format!("client CA: {e}")))?;
            let allowed: Vec<String> = client_names
                .iter()
                .filter(|n| !n.is_empty())
                .cloned()
                .collect();
            if !allowed.is_empty() {
                verifier = Arc::new(super::client_names::NamedClients::new(verifier, allowed));
            }
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(store);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
