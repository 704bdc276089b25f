//! Development certificates: a CA and a serving certificate signed by it.

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

pub struct DevCerts {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// A fresh self-signed CA named `common_name`, and the issuer that signs with it.
fn ca(common_name: &str) -> Result<(rcgen::Certificate, Issuer<'static, KeyPair>), rcgen::Error> {
    let mut params = CertificateParams::default();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok((cert, Issuer::new(params, key)))
}

/// A fresh key and a certificate from `params`, signed by the CA.
fn signed(
    params: CertificateParams,
    ca_cert: &rcgen::Certificate,
    issuer: &Issuer<'static, KeyPair>,
) -> Result<DevCerts, rcgen::Error> {
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, issuer)?;
    Ok(DevCerts {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A fresh CA and a serving certificate for `hosts` (DNS names or IP addresses).
pub fn generate(hosts: &[String]) -> Result<DevCerts, rcgen::Error> {
    let (ca_cert, issuer) = ca("rayshare development CA")?;

    let mut params = CertificateParams::default();
    params.distinguished_name.push(
        DnType::CommonName,
        hosts.first().map(String::as_str).unwrap_or("rayshare"),
    );
    params.subject_alt_names = hosts
        .iter()
        .map(|h| match h.parse() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => Ok(SanType::DnsName(h.clone().try_into()?)),
        })
        .collect::<Result<_, rcgen::Error>>()?;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    signed(params, &ca_cert, &issuer)
}

/// A CA and a client certificate it signed (`clientAuth`), for the API server to present
/// to the webhook when `--client-ca` asks for one.
pub fn generate_client(common_name: &str) -> Result<DevCerts, rcgen::Error> {
    let (ca_cert, issuer) = ca("rayshare webhook client CA")?;
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    signed(params, &ca_cert, &issuer)
}

/// Writes `ca.crt`, `tls.crt` and `tls.key` (the names of a `kubernetes.io/tls` Secret).
pub fn write(dir: &Path, certs: &DevCerts) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("ca.crt"), &certs.ca_pem)?;
    std::fs::write(dir.join("tls.crt"), &certs.cert_pem)?;
    let key = dir.join("tls.key");
    std::fs::write(&key, &certs.key_pem)?;
    // A private key is for its owner only.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_pair_is_usable_by_rustls() {
        let c = generate(&["127.0.0.1".into(), "rayshare.rayshare-system.svc".into()]).unwrap();
        crate::http::tls::certified_key(c.cert_pem.as_bytes(), c.key_pem.as_bytes()).unwrap();
        assert!(c.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
    }
}
