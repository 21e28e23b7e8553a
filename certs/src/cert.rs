//! X.509 helpers over x509-parser: PEM decoding, fingerprints, names, validity and keys.

use x509_parser::certificate::X509Certificate;
use x509_parser::oid_registry::{OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY};
use x509_parser::pem::Pem;

use crate::fsutil::sha256_hex;

/// Most certificates a chain or a roots file may hold; more is refused as malformed.
pub(crate) const MAX_CERTS: usize = 8;

/// DER of every `CERTIFICATE` block in `text` (other blocks are refused).
pub(crate) fn pem_certificates(text: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    for block in Pem::iter_from_buffer(text.as_bytes()) {
        let block = block.map_err(|e| format!("bad PEM block: {e}"))?;
        if block.label != "CERTIFICATE" {
            return Err(format!(
                "PEM block labelled {:?}, expected CERTIFICATE",
                block.label
            ));
        }
        if out.len() == MAX_CERTS {
            return Err(format!("more than {MAX_CERTS} certificates"));
        }
        out.push(block.contents);
    }
    Ok(out)
}

/// DER of the single `CERTIFICATE` block in `text`.
pub(crate) fn single_pem_certificate(text: &str) -> Result<Vec<u8>, String> {
    let mut certs = pem_certificates(text)?;
    match certs.len() {
        0 => Err("no PEM CERTIFICATE block".to_string()),
        1 => Ok(certs.remove(0)),
        n => Err(format!("{n} certificates where one was expected")),
    }
}

/// Parses DER, refusing trailing bytes.
pub(crate) fn parse(der: &[u8]) -> Result<X509Certificate<'_>, String> {
    match x509_parser::parse_x509_certificate(der) {
        Ok(([], cert)) => Ok(cert),
        Ok(_) => Err("trailing bytes after the certificate".to_string()),
        Err(e) => Err(format!("not a valid X.509 certificate: {e}")),
    }
}

/// SHA-256 of the DER, lower-case hex: how this crate names certificates.
pub(crate) fn fingerprint(der: &[u8]) -> String {
    sha256_hex(der)
}

/// What names a certificate whatever bytes encode it: its fingerprint (which names only
/// these bytes), and the fields inside the signed TBSCertificate that a re-encoding (for
/// example the ECDSA signature's `s` replaced by `n - s`) cannot change: issuer and serial,
/// and the public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CertId {
    /// SHA-256 of the DER as presented, lower-case hex.
    pub fingerprint: String,
    /// The issuer as `CN=…, O=…`.
    pub issuer: String,
    /// The serial number, lower-case hex without leading zero bytes.
    pub serial: String,
    /// SHA-256 of the DER SubjectPublicKeyInfo, lower-case hex.
    pub spki_sha256: String,
}

/// The [`CertId`] of a parsed certificate and its DER.
pub(crate) fn identity(der: &[u8], cert: &X509Certificate<'_>) -> CertId {
    CertId {
        fingerprint: fingerprint(der),
        issuer: cert.issuer().to_string(),
        serial: serial_hex(cert.raw_serial()),
        spki_sha256: sha256_hex(cert.public_key().raw),
    }
}

/// A serial number's bytes as lower-case hex, leading zero bytes dropped (`00` for zero).
pub(crate) fn serial_hex(raw: &[u8]) -> String {
    let start = raw.iter().position(|b| *b != 0).unwrap_or(raw.len());
    match &raw[start..] {
        [] => "00".to_string(),
        rest => crate::fsutil::hex(rest),
    }
}

/// The subject as `CN=…, O=…`.
pub(crate) fn subject(cert: &X509Certificate<'_>) -> String {
    cert.subject().to_string()
}

/// The publisher named by a developer certificate: its subject CN, else its O, else the
/// whole subject.
pub(crate) fn publisher(cert: &X509Certificate<'_>) -> String {
    let name = cert.subject();
    name.iter_common_name()
        .chain(name.iter_organization())
        .find_map(|a| a.as_str().ok().map(str::to_string))
        .unwrap_or_else(|| subject(cert))
}

/// The first common name of the subject, if any.
pub(crate) fn common_name(cert: &X509Certificate<'_>) -> Option<String> {
    cert.subject()
        .iter_common_name()
        .find_map(|a| a.as_str().ok().map(str::to_string))
}

/// notBefore, Unix seconds.
pub(crate) fn not_before(cert: &X509Certificate<'_>) -> i64 {
    cert.validity().not_before.timestamp()
}

/// notAfter, Unix seconds.
pub(crate) fn not_after(cert: &X509Certificate<'_>) -> i64 {
    cert.validity().not_after.timestamp()
}

/// True if basicConstraints says cA.
pub(crate) fn is_ca(cert: &X509Certificate<'_>) -> bool {
    matches!(cert.basic_constraints(), Ok(Some(bc)) if bc.value.ca)
}

/// The uncompressed EC point of a P-256 public key, or `None` for any other key.
pub(crate) fn p256_public_key<'a>(cert: &'a X509Certificate<'_>) -> Option<&'a [u8]> {
    let spki = cert.public_key();
    if spki.algorithm.algorithm != OID_KEY_TYPE_EC_PUBLIC_KEY {
        return None;
    }
    let curve = spki.algorithm.parameters.as_ref()?.as_oid().ok()?;
    if curve != OID_EC_P256 {
        return None;
    }
    Some(spki.subject_public_key.data.as_ref())
}

/// Unix seconds as RFC 3339 UTC (`2025-01-31T12:00:00Z`).
pub(crate) fn format_time(t: i64) -> String {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// PEM text of one certificate (64-column base64, `\n` line ends).
pub(crate) fn to_pem(der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// Loads the private key PEM (PKCS#8, as rcgen writes it) into a ring P-256 signer.
pub(crate) fn p256_signer(key_pem: &str) -> Result<ring::signature::EcdsaKeyPair, String> {
    let mut blocks = Pem::iter_from_buffer(key_pem.as_bytes());
    let block = match blocks.next() {
        Some(Ok(b)) => b,
        Some(Err(e)) => return Err(format!("bad PEM: {e}")),
        None => return Err("no PEM block".to_string()),
    };
    if block.label != "PRIVATE KEY" {
        return Err(format!(
            "PEM block labelled {:?}, expected PRIVATE KEY (PKCS#8)",
            block.label
        ));
    }
    let rng = ring::rand::SystemRandom::new();
    ring::signature::EcdsaKeyPair::from_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_ASN1_SIGNING,
        &block.contents,
        &rng,
    )
    .map_err(|e| format!("not a PKCS#8 ECDSA P-256 key: {e}"))
}

/// Signs `msg` with ECDSA P-256 / SHA-256 (ASN.1 DER signature).
pub(crate) fn p256_sign(
    key: &ring::signature::EcdsaKeyPair,
    msg: &[u8],
) -> Result<Vec<u8>, ring::error::Unspecified> {
    let rng = ring::rand::SystemRandom::new();
    key.sign(&rng, msg).map(|s| s.as_ref().to_vec())
}

/// Verifies an ECDSA P-256 / SHA-256 ASN.1 signature with the certificate's key.
pub(crate) fn p256_verify(cert: &X509Certificate<'_>, msg: &[u8], sig: &[u8]) -> bool {
    let Some(point) = p256_public_key(cert) else {
        return false;
    };
    ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_ASN1, point)
        .verify(msg, sig)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_time_is_rfc3339_utc() {
        assert_eq!(format_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_time(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_time(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(format_time(-1), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn pem_round_trips() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let der = cert.der().to_vec();
        let pem = to_pem(&der);
        assert_eq!(single_pem_certificate(&pem).unwrap(), der);
        assert!(single_pem_certificate(&format!("{pem}{pem}")).is_err());
        assert!(single_pem_certificate(&key.serialize_pem()).is_err());
        let signer = p256_signer(&key.serialize_pem()).unwrap();
        let sig = p256_sign(&signer, b"m").unwrap();
        let parsed = parse(&der).unwrap();
        assert!(p256_verify(&parsed, b"m", &sig));
        assert!(!p256_verify(&parsed, b"n", &sig));
    }
}
