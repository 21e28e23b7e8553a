//! `revoked.json` and `retired.json`: the operator's lists of certificates that no longer
//! count. Both are read fail-closed: a list that does not parse stops the load.

use std::fs;
use std::io;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::TrustError;
use crate::cert::CertId;
use crate::fsutil::normalize_fingerprint;

/// File name of the revocation list in the trust folder.
pub const REVOKED_FILE: &str = "revoked.json";
/// File name of the retired-roots list in the trust folder.
pub const RETIRED_FILE: &str = "retired.json";

/// `revoked.json`: `{"revoked": [{"fingerprint", "issuer"?, "serial"?, "spki_sha256"?,
/// "reason", "revoked_at", "subject"?}]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevocationList {
    /// The revoked certificates.
    pub revoked: Vec<Revocation>,
}

/// One revoked certificate (leaf, intermediate or root). A certificate on a chain is
/// revoked when any of the recorded names matches it: the SHA-256 of its DER, its issuer
/// and serial, or the SHA-256 of its public key (SubjectPublicKeyInfo). The last two are
/// inside what the issuer signed, so a re-encoded copy of the certificate (same content,
/// other bytes, other fingerprint) still matches. Entries written before these fields
/// existed carry only the fingerprint and match by it alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Revocation {
    /// SHA-256 (hex) of the revoked certificate's DER.
    pub fingerprint: String,
    /// The issuer as `CN=…, O=…` (with `serial`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The serial number, lower-case hex without leading zero bytes (with `issuer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// SHA-256 (hex) of the DER SubjectPublicKeyInfo: every certificate for this key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spki_sha256: Option<String>,
    /// The operator's reason for revoking it.
    pub reason: String,
    /// When it was revoked, Unix seconds.
    pub revoked_at: i64,
    /// The certificate's subject when it was revoked from a PEM (informative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

impl Revocation {
    /// Whether this entry names the certificate `id`, and by what.
    pub(crate) fn matches(&self, id: &CertId) -> Option<RevokedBy> {
        if self.fingerprint == id.fingerprint {
            return Some(RevokedBy::Fingerprint);
        }
        if self.issuer.as_deref() == Some(id.issuer.as_str())
            && self.serial.as_deref() == Some(id.serial.as_str())
        {
            return Some(RevokedBy::IssuerSerial);
        }
        if self.spki_sha256.as_deref() == Some(id.spki_sha256.as_str()) {
            return Some(RevokedBy::PublicKey);
        }
        None
    }

    /// Whether the entry names the certificate by more than its fingerprint.
    pub fn names_content(&self) -> bool {
        (self.issuer.is_some() && self.serial.is_some()) || self.spki_sha256.is_some()
    }
}

/// Which recorded name of a revocation matched a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevokedBy {
    /// The SHA-256 of its DER: the very bytes that were revoked.
    Fingerprint,
    /// Its issuer and serial number.
    IssuerSerial,
    /// Its public key.
    PublicKey,
}

impl RevokedBy {
    /// How the refusal names the match.
    pub fn describe(self) -> &'static str {
        match self {
            RevokedBy::Fingerprint => "fingerprint",
            RevokedBy::IssuerSerial => "issuer and serial number",
            RevokedBy::PublicKey => "public key",
        }
    }
}

/// Checks and normalises one entry read from `path`: a SHA-256 fingerprint, issuer and
/// serial together or not at all, a hex serial, a SHA-256 key hash.
pub(crate) fn checked_revocation(path: &Path, mut r: Revocation) -> Result<Revocation, TrustError> {
    let bad = |reason: String| TrustError::List {
        path: path.to_path_buf(),
        reason,
    };
    r.fingerprint = checked_fingerprint(path, &r.fingerprint)?;
    if r.issuer.is_some() != r.serial.is_some() {
        return Err(bad(format!(
            "the entry {} has only one of issuer and serial; give both or neither",
            r.fingerprint
        )));
    }
    if let Some(serial) = &r.serial {
        let digits: String = serial
            .chars()
            .filter(|c| *c != ':')
            .map(|c| c.to_ascii_lowercase())
            .collect();
        let bytes = (digits.len() % 2 == 0 && !digits.is_empty())
            .then(|| {
                (0..digits.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(digits.get(i..i + 2)?, 16).ok())
                    .collect::<Option<Vec<u8>>>()
            })
            .flatten()
            .ok_or_else(|| bad(format!("serial {serial:?} is not hex")))?;
        r.serial = Some(crate::cert::serial_hex(&bytes));
    }
    if let Some(spki) = &r.spki_sha256 {
        r.spki_sha256 = Some(normalize_fingerprint(spki).ok_or_else(|| {
            bad(format!(
                "spki_sha256 {spki:?} is not a SHA-256 (64 hex digits)"
            ))
        })?);
    }
    Ok(r)
}

/// `retired.json`: `{"retired": [{"fingerprint", "retired_at"}]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetiredList {
    /// The retired roots.
    pub retired: Vec<Retirement>,
}

/// One retired root, by the SHA-256 of its DER.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retirement {
    /// SHA-256 (hex) of the retired root's DER.
    pub fingerprint: String,
    /// When it was retired, Unix seconds.
    pub retired_at: i64,
}

/// Reads a list; a missing file is an empty list.
pub(crate) fn read_list<T: DeserializeOwned + Default>(path: &Path) -> Result<T, TrustError> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| TrustError::List {
            path: path.to_path_buf(),
            reason: e.to_string(),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(T::default()),
        Err(source) => Err(TrustError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Checks that every fingerprint of a list is a SHA-256 and returns them normalised.
pub(crate) fn checked_fingerprint(path: &Path, fp: &str) -> Result<String, TrustError> {
    normalize_fingerprint(fp).ok_or_else(|| TrustError::List {
        path: path.to_path_buf(),
        reason: format!("{fp:?} is not a SHA-256 fingerprint (64 hex digits)"),
    })
}
