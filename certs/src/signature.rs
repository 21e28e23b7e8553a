//! The `SIGNATURE` file: what is signed (byte for byte in `certs/README.md`), signing a
//! package folder, and reading the file back.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::cert;
use crate::digest::{package_digest, DigestError, SIGNATURE_FILE};
use crate::fsutil::{is_sha256_hex, unix_seconds, write_atomic, PUBLIC_MODE};
use crate::trust::VerifyError;

/// The only signature algorithm: ECDSA over P-256 with SHA-256, ASN.1 DER signature.
pub const ALGORITHM: &str = "ecdsa-p256-sha256";

/// First line of the signed bytes; bump it if their format ever changes.
pub const SIGNED_BYTES_VERSION_LINE: &str = "skillbox-signature-v1";

/// Largest `SIGNATURE` file read (a chain of a few certificates is a few KiB).
pub const MAX_SIGNATURE_BYTES: u64 = 256 * 1024;

/// Contents of a package's `SIGNATURE` file (JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageSignature {
    /// Skill name; must equal the manifest's.
    pub name: String,
    /// Skill version; must equal the manifest's.
    pub version: String,
    /// `sha256:<hex>` of the canonical listing (see [`crate::digest`]).
    pub digest: String,
    /// When it was signed, Unix seconds. Informative only: validity is checked at
    /// verification time (no trusted timestamping yet).
    pub signed_at: i64,
    /// Always [`ALGORITHM`].
    pub algorithm: String,
    /// Base64 (standard, padded) of the ASN.1 DER ECDSA signature over [`signed_bytes`].
    pub signature: String,
    /// PEM certificates: the developer (leaf) certificate first, then intermediates.
    pub chain: Vec<String>,
}

impl PackageSignature {
    /// The bytes the signature covers.
    pub fn signed_bytes(&self) -> Vec<u8> {
        signed_bytes(&self.name, &self.version, &self.digest, self.signed_at)
    }
}

/// The signed bytes:
/// `"skillbox-signature-v1\nname={name}\nversion={version}\ndigest={digest}\nsigned_at={signed_at}\n"`
/// (`signed_at` in decimal). Fields never contain control characters (checked on both
/// sides), so the encoding is unambiguous.
pub fn signed_bytes(name: &str, version: &str, digest: &str, signed_at: i64) -> Vec<u8> {
    format!(
        "{SIGNED_BYTES_VERSION_LINE}\nname={name}\nversion={version}\ndigest={digest}\nsigned_at={signed_at}\n"
    )
    .into_bytes()
}

/// Why a package could not be signed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("sign: the {field} {value:?} is {reason}; use the manifest's {field}")]
    /// The name or version is empty, longer than 256 bytes or holds a control character.
    InvalidField {
        /// Which field: `name` or `version`.
        field: &'static str,
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    #[error("sign: the certificate chain is unusable: {reason}; pass the PEM written by `skillbox certs issue`")]
    /// The certificate chain PEM does not parse, is empty, or its leaf key is not
    /// ECDSA P-256.
    Chain {
        /// What is wrong with it.
        reason: String,
    },
    #[error("sign: the private key is unusable: {reason}; pass the .key written by `skillbox certs issue`")]
    /// The private key is not a usable PKCS#8 ECDSA P-256 key.
    Key {
        /// What is wrong with it.
        reason: String,
    },
    #[error("sign: the private key does not belong to the first certificate of the chain; pass the matching --cert and --key")]
    /// The private key does not match the leaf certificate's public key.
    KeyMismatch,
    #[error(transparent)]
    /// The package's files could not be hashed.
    Digest(#[from] DigestError),
    #[error("sign: the signing operation failed; try again")]
    /// The ECDSA signing operation failed.
    Sign,
    #[error("sign: cannot write {}: {source}", path.display())]
    /// `SIGNATURE` could not be serialised or written.
    Write {
        /// The `SIGNATURE` file.
        path: PathBuf,
        /// The I/O (or serialisation) error.
        #[source]
        source: io::Error,
    },
}

/// Computes the digest of `dir`, signs it with `key_pem` (PKCS#8 ECDSA P-256) for the
/// leaf of `chain_pem` (leaf first, then intermediates), writes `dir/SIGNATURE`
/// atomically and returns what it wrote.
pub fn sign_package(
    dir: &Path,
    name: &str,
    version: &str,
    chain_pem: &str,
    key_pem: &str,
) -> Result<PackageSignature, SignError> {
    check_field(name).map_err(|reason| SignError::InvalidField {
        field: "name",
        value: name.to_string(),
        reason,
    })?;
    check_field(version).map_err(|reason| SignError::InvalidField {
        field: "version",
        value: version.to_string(),
        reason,
    })?;
    let ders = cert::pem_certificates(chain_pem).map_err(|reason| SignError::Chain { reason })?;
    let Some(leaf_der) = ders.first() else {
        return Err(SignError::Chain {
            reason: "no PEM CERTIFICATE block".to_string(),
        });
    };
    let leaf = cert::parse(leaf_der).map_err(|reason| SignError::Chain { reason })?;
    let leaf_key = cert::p256_public_key(&leaf).ok_or_else(|| SignError::Chain {
        reason: "the leaf certificate's key is not ECDSA P-256".to_string(),
    })?;
    let signer = cert::p256_signer(key_pem).map_err(|reason| SignError::Key { reason })?;
    if ring::signature::KeyPair::public_key(&signer).as_ref() != leaf_key {
        return Err(SignError::KeyMismatch);
    }

    let digest = package_digest(dir)?.prefixed();
    let signed_at = unix_seconds(SystemTime::now());
    let bytes = signed_bytes(name, version, &digest, signed_at);
    let sig = cert::p256_sign(&signer, &bytes).map_err(|_| SignError::Sign)?;
    let signature = PackageSignature {
        name: name.to_string(),
        version: version.to_string(),
        digest,
        signed_at,
        algorithm: ALGORITHM.to_string(),
        signature: base64::engine::general_purpose::STANDARD.encode(sig),
        chain: ders.iter().map(|d| cert::to_pem(d)).collect(),
    };
    let path = dir.join(SIGNATURE_FILE);
    let mut json = serde_json::to_vec_pretty(&signature).map_err(|e| SignError::Write {
        path: path.clone(),
        source: io::Error::other(e),
    })?;
    json.push(b'\n');
    write_atomic(&path, &json, PUBLIC_MODE).map_err(|source| SignError::Write { path, source })?;
    Ok(signature)
}

/// Reads and checks the shape of `dir/SIGNATURE` (not its cryptography).
pub fn read_signature(dir: &Path) -> Result<PackageSignature, VerifyError> {
    let path = dir.join(SIGNATURE_FILE);
    let meta = match fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(VerifyError::MissingSignature),
        Err(source) => return Err(VerifyError::ReadSignature { source }),
    };
    if !meta.is_file() {
        return Err(malformed("SIGNATURE is not a regular file"));
    }
    if meta.len() > MAX_SIGNATURE_BYTES {
        return Err(malformed(format!(
            "SIGNATURE is {} bytes, more than the {MAX_SIGNATURE_BYTES} allowed",
            meta.len()
        )));
    }
    let mut bytes = Vec::new();
    fs::File::open(&path)
        .and_then(|f| f.take(MAX_SIGNATURE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|source| VerifyError::ReadSignature { source })?;
    parse_signature(&bytes)
}

/// Parses and checks the shape of `SIGNATURE` bytes.
pub fn parse_signature(bytes: &[u8]) -> Result<PackageSignature, VerifyError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(malformed("SIGNATURE is empty"));
    }
    let sig: PackageSignature =
        serde_json::from_slice(bytes).map_err(|e| malformed(format!("not valid JSON: {e}")))?;
    check_field(&sig.name).map_err(|r| malformed(format!("name {r}")))?;
    check_field(&sig.version).map_err(|r| malformed(format!("version {r}")))?;
    match sig.digest.strip_prefix("sha256:") {
        Some(hex) if is_sha256_hex(hex) => {}
        _ => {
            return Err(malformed(format!(
                "digest {:?} is not sha256:<64 lower-case hex digits>",
                sig.digest
            )))
        }
    }
    if base64::engine::general_purpose::STANDARD
        .decode(&sig.signature)
        .map_or(true, |s| s.is_empty())
    {
        return Err(malformed("signature is not base64"));
    }
    if sig.chain.is_empty() {
        return Err(malformed(
            "chain is empty; it must start with the developer certificate",
        ));
    }
    if sig.chain.len() > cert::MAX_CERTS {
        return Err(malformed(format!(
            "chain has {} certificates, at most {} allowed",
            sig.chain.len(),
            cert::MAX_CERTS
        )));
    }
    Ok(sig)
}

fn malformed(reason: impl Into<String>) -> VerifyError {
    VerifyError::MalformedSignature {
        reason: reason.into(),
    }
}

/// Name and version: non-empty, at most 256 bytes, no control characters.
fn check_field(value: &str) -> Result<(), &'static str> {
    if value.is_empty() {
        Err("empty")
    } else if value.len() > 256 {
        Err("longer than 256 bytes")
    } else if value.chars().any(char::is_control) {
        Err("holding a control character")
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_bytes_are_byte_exact() {
        assert_eq!(
            signed_bytes("hello", "1.2.3", "sha256:ab", 1700000000),
            b"skillbox-signature-v1\nname=hello\nversion=1.2.3\ndigest=sha256:ab\nsigned_at=1700000000\n"
                .to_vec()
        );
    }

    #[test]
    fn parse_signature_rejects_unknown_fields() {
        let err = parse_signature(br#"{"name":"a","extra":1}"#).unwrap_err();
        assert_eq!(err.check(), "signature_file");
    }
}
