//! Client certificates checked by name as well as by chain (`--client-cn`).
//!
//! A cluster CA signs every user's and every kubelet's client certificate; with only the
//! chain checked, any of them could post reviews. So the admission port also requires the
//! certificate's subject common name, or one of its DNS names, to be one of the allowed
//! names (default `kube-apiserver`, the name the API server's AdmissionConfiguration
//! presents), as Gatekeeper's `--client-cn-name` does.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::{CertificateDer, UnixTime};
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The subject common names and DNS names of a DER certificate (empty if it does not parse).
pub fn names(cert: &[u8]) -> Vec<String> {
    let Ok((_, cert)) = X509Certificate::from_der(cert) else {
        return Vec::new();
    };
    let mut out: Vec<String> = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok().map(str::to_string))
        .collect();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            if let GeneralName::DNSName(dns) = name {
                out.push((*dns).to_string());
            }
        }
    }
    out
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
        let presented = names(end_entity);
        if presented.iter().any(|n| self.allowed.contains(n)) {
            return Ok(verified);
        }
        let shown: Vec<String> = presented
            .iter()
            .take(4)
            .map(|n| n.chars().take(64).collect())
            .collect();
        tracing::warn!(names = ?shown, allowed = ?self.allowed, "refused a client certificate signed by the client CA but not issued to an allowed name");
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
        let certs = crate::certs::generate_client(common_name).unwrap();
        CertificateDer::from_pem_slice(certs.cert_pem.as_bytes())
            .unwrap()
            .to_vec()
    }

    #[test]
    fn reads_the_common_name() {
        assert_eq!(names(&der("kube-apiserver")), ["kube-apiserver"]);
        assert_eq!(names(&der("system:node:n1")), ["system:node:n1"]);
        assert!(names(b"not a certificate").is_empty());
    }
}
