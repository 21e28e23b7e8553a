//! Root rotation statements: "the root with fingerprint OLD accepts NEW as a root",
//! signed by OLD's key (TUF-style: the new root is vouched for by the old one). The
//! statement lives in `<trust>/rotations/<new fp>.json`; the trust store accepts it only
//! when OLD is itself trusted (configured or accepted earlier) and neither retired nor
//! revoked.

use serde::{Deserialize, Serialize};

use crate::cert;
use crate::signature::ALGORITHM;

/// First line of the bytes a rotation statement signs.
pub const ROTATION_VERSION_LINE: &str = "skillbox-rotation-v1";

/// A rotation statement as stored in `<trust>/rotations/<new fp>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotationStatement {
    /// SHA-256 (hex) of the DER of the root that signs this statement.
    pub old_root_fingerprint: String,
    /// SHA-256 (hex) of the DER of the accepted root; must match `new_root_pem`.
    pub new_root_fingerprint: String,
    /// The accepted root certificate, PEM.
    pub new_root_pem: String,
    /// When the statement was made, Unix seconds.
    pub issued_at: i64,
    /// Always `ecdsa-p256-sha256`.
    pub algorithm: String,
    /// Base64 of the ASN.1 DER ECDSA P-256/SHA-256 signature by the old root's key over
    /// [`rotation_signed_bytes`].
    pub signature: String,
}

impl RotationStatement {
    /// The bytes the signature covers.
    pub fn signed_bytes(&self) -> Vec<u8> {
        rotation_signed_bytes(
            &self.old_root_fingerprint,
            &self.new_root_fingerprint,
            self.issued_at,
        )
    }
}

/// `"skillbox-rotation-v1\nold_root={old fp}\nnew_root={new fp}\nissued_at={issued_at}\n"`.
pub fn rotation_signed_bytes(old_fp: &str, new_fp: &str, issued_at: i64) -> Vec<u8> {
    format!(
        "{ROTATION_VERSION_LINE}\nold_root={old_fp}\nnew_root={new_fp}\nissued_at={issued_at}\n"
    )
    .into_bytes()
}

/// Why a rotation statement was refused (and ignored) by the trust store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RotationRefusal {
    #[error("rotation: statement is malformed ({reason}); remove it and run `skillbox certs rotate-root` again")]
    /// The statement does not parse or is not well-formed (wrong algorithm, bad PEM,
    /// signature not base64, new root unusable as a trust anchor).
    Malformed {
        /// What is wrong with it.
        reason: String,
    },
    #[error("rotation: new_root_fingerprint does not match new_root_pem; the statement was altered, remove it")]
    /// `new_root_fingerprint` is not the SHA-256 of `new_root_pem`.
    FingerprintMismatch,
    #[error("rotation: the new root is not a CA certificate; remove the statement")]
    /// The new root certificate is not a CA.
    NewRootNotCa,
    #[error("rotation: signed for root {fingerprint}, which is not trusted here; only a trusted root can vouch for a new one, add it to roots/ or remove the statement")]
    /// The signing (old) root is not trusted by this store.
    UnknownSigner {
        /// SHA-256 (hex) of the signing root.
        fingerprint: String,
    },
    #[error("rotation: signed by root {fingerprint}, which is retired; a retired root vouches for nothing, add the new root to roots/ if you trust it")]
    /// The signing root is trusted but retired.
    SignerRetired {
        /// SHA-256 (hex) of the signing root.
        fingerprint: String,
    },
    #[error("rotation: signed by root {fingerprint}, which is revoked; remove the statement")]
    /// The signing root is on the revocation list.
    SignerRevoked {
        /// SHA-256 (hex) of the signing root.
        fingerprint: String,
    },
    #[error("rotation: the signature does not verify with root {fingerprint}'s key (forged or corrupted); remove the statement")]
    /// The signature does not verify with the signing root's key.
    BadSignature {
        /// SHA-256 (hex) of the signing root.
        fingerprint: String,
    },
}

/// A statement whose shape checked out, with the new root's DER.
#[derive(Debug)]
pub(crate) struct CheckedStatement {
    pub(crate) statement: RotationStatement,
    pub(crate) new_der: Vec<u8>,
    pub(crate) signature: Vec<u8>,
}

/// Parses a statement file and checks everything that does not depend on the signer.
pub(crate) fn check_shape(bytes: &[u8]) -> Result<CheckedStatement, RotationRefusal> {
    use base64::Engine as _;
    let malformed = |reason: String| RotationRefusal::Malformed { reason };
    let statement: RotationStatement =
        serde_json::from_slice(bytes).map_err(|e| malformed(format!("not valid JSON: {e}")))?;
    if statement.algorithm != ALGORITHM {
        return Err(malformed(format!(
            "algorithm {:?}, expected {ALGORITHM:?}",
            statement.algorithm
        )));
    }
    let new_der = cert::single_pem_certificate(&statement.new_root_pem)
        .map_err(|e| malformed(format!("new_root_pem: {e}")))?;
    if cert::fingerprint(&new_der) != statement.new_root_fingerprint {
        return Err(RotationRefusal::FingerprintMismatch);
    }
    let parsed = cert::parse(&new_der).map_err(|e| malformed(format!("new root: {e}")))?;
    if !cert::is_ca(&parsed) {
        return Err(RotationRefusal::NewRootNotCa);
    }
    let signature = base64::engine::general_purpose::STANDARD
        .decode(&statement.signature)
        .map_err(|_| malformed("signature is not base64".to_string()))?;
    Ok(CheckedStatement {
        statement,
        new_der,
        signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_signed_bytes_are_byte_exact() {
        assert_eq!(
            rotation_signed_bytes("aa", "bb", 5),
            b"skillbox-rotation-v1\nold_root=aa\nnew_root=bb\nissued_at=5\n".to_vec()
        );
    }
}
