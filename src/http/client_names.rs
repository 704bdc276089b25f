//! Client certificates checked by name as well as by chain (`--client-cn`).
//!
//! A cluster CA signs every user's and every kubelet's client certificate; with only the
//! chain checked, any of them could post reviews. So the admission port also requires the
//! certificate's subject common name, or one of its DNS names, to be one of the allowed
//! names (default `kube-apiserver`, the name the API server's AdmissionConfiguration
//! presents), as Gatekeeper's `--client-cn-name` does. Only the subject's last common
//! name counts, as Kubernetes reads a user name from it; DNS names do not (a CSR approved
//! for another user may carry any of them).

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::{CertificateDer, UnixTime};
use x509_parser::prelude::{FromDer, X509Certificate};

/// The subject's last common name of a DER certificate, the name Kubernetes would
/// authenticate it as (`None` if it has none or does not parse).
pub fn common_name(cert: &[u8]) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(cert).ok()?;
    let last = cert.subject().iter_common_name().last()?;
    last.as_str().ok().map(str::to_string)
}

/// Wraps the chain check (`inner`) with the name check.
#[derive(Debug)]
pub struct NamedClients {
    inner: Arc<dyn ClientCertVerifier>,
    allowed: Vec<String>,
}

impl NamedClients {
    pub fn new(inner: Arc<dyn ClientCertVerifier>, allowed: Vec<String>) -> Self {
        Self { inner, allowed }
    }
}

impl ClientCertVerifier for NamedClients {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        let presented = common_name(end_entity);
        if presented.as_ref().is_some_and(|n| self.allowed.contains(n)) {
            return Ok(verified);
        }
        let shown: Option<String> = presented.map(|n| n.chars().take(64).collect());
        tracing::warn!(common_name = ?shown, allowed = ?self.allowed, "refused a client certificate signed by the client CA but not issued to an allowed name");
        Err(rustls::Error::InvalidCertificate(
            CertificateError::ApplicationVerificationFailure,
        ))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use rustls_pki_types::pem::PemObject;

    use super::*;

    fn der(common_name: &str) -> Vec<u8> {
        let certs = crate::http::certs::generate_client(common_name).unwrap();
        CertificateDer::from_pem_slice(certs.cert_pem.as_bytes())
            .unwrap()
            .to_vec()
    }

    #[test]
    fn reads_the_common_name() {
        assert_eq!(
            common_name(&der("kube-apiserver")).as_deref(),
            Some("kube-apiserver")
        );
        assert_eq!(
            common_name(&der("system:node:n1")).as_deref(),
            Some("system:node:n1")
        );
        assert_eq!(common_name(b"not a certificate"), None);
    }
}
