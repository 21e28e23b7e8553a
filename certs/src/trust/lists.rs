//! `revoked.json` and `retired.json`: the operator's lists of certificates that no longer
//! count. Both are read fail-closed: a list that does not parse stops the load.

use std::fs;
use std::io;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::TrustError;
use crate::fsutil::normalize_fingerprint;

/// File name of the revocation list in the trust folder.
pub const REVOKED_FILE: &str = "revoked.json";
/// File name of the retired-roots list in the trust folder.
pub const RETIRED_FILE: &str = "retired.json";

/// `revoked.json`: `{"revoked": [{"fingerprint", "reason", "revoked_at", "subject"?}]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevocationList {
    pub revoked: Vec<Revocation>,
}

/// One revoked certificate (leaf, intermediate or root), by the SHA-256 of its DER.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Revocation {
    pub fingerprint: String,
    pub reason: String,
    /// Unix seconds.
    pub revoked_at: i64,
    /// The certificate's subject when it was revoked from a PEM (informative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

/// `retired.json`: `{"retired": [{"fingerprint", "retired_at"}]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetiredList {
    pub retired: Vec<Retirement>,
}

/// One retired root, by the SHA-256 of its DER.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retirement {
    pub fingerprint: String,
    /// Unix seconds.
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
