//! A context's list of files as the core keeps it and sends it: encoded once, named by
//! the SHA-256 of that encoding, sent whole only until an executor holds it.

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use super::WorkFile;

/// A context's list of files as it travels with its calls, encoded once: the core sends
/// the list it keeps per context with every call in that context, and each request
/// carries the same JSON (in a profile of unchanged calls in a context of 1,000 files,
/// encoding the list was a quarter of the core's time). Once an executor holds it, a call
/// names it by [`FileList::sha256`] alone (docs/sessions.md). Reads as the `Vec` it holds.
#[derive(Default)]
pub struct FileList {
    files: Vec<WorkFile>,
    /// The list as JSON, made at its first encoding.
    json: OnceLock<Box<RawValue>>,
    /// The SHA-256 of `json`, lowercase hex.
    sha256: OnceLock<String>,
    /// Whether a call carried it whole (to some executor).
    sent: AtomicBool,
}

impl FileList {
    /// The list of `files`.
    pub fn new(files: Vec<WorkFile>) -> Self {
        Self {
            files,
            json: OnceLock::new(),
            sha256: OnceLock::new(),
            sent: AtomicBool::new(false),
        }
    }

    /// The list as JSON, encoded at the first ask.
    pub fn json(&self) -> Result<&RawValue, serde_json::Error> {
        if let Some(json) = self.json.get() {
            return Ok(json);
        }
        let raw = RawValue::from_string(serde_json::to_string(&self.files)?)?;
        Ok(self.json.get_or_init(|| raw))
    }

    /// The SHA-256 of [`FileList::json`], lowercase hex, computed at the first ask: the
    /// name under which an executor holds the list.
    pub fn sha256(&self) -> Result<&str, serde_json::Error> {
        if let Some(digest) = self.sha256.get() {
            return Ok(digest);
        }
        let json = self.json()?;
        let digest = ring::digest::digest(&ring::digest::SHA256, json.get().as_bytes());
        let hex = crate::skill::digest::hex(digest.as_ref());
        Ok(self.sha256.get_or_init(|| hex))
    }

    /// Records that a call carries the list whole, and says whether one did before (then
    /// an executor may hold it and a call can name it by digest alone).
    pub fn mark_sent(&self) -> bool {
        self.sent.swap(true, Ordering::Relaxed)
    }
}

impl From<Vec<WorkFile>> for FileList {
    fn from(files: Vec<WorkFile>) -> Self {
        Self::new(files)
    }
}

impl FromIterator<WorkFile> for FileList {
    fn from_iter<I: IntoIterator<Item = WorkFile>>(iter: I) -> Self {
        Self::new(iter.into_iter().collect())
    }
}

impl Deref for FileList {
    type Target = Vec<WorkFile>;

    fn deref(&self) -> &Vec<WorkFile> {
        &self.files
    }
}

impl Clone for FileList {
    fn clone(&self) -> Self {
        Self::new(self.files.clone())
    }
}

impl PartialEq for FileList {
    fn eq(&self, other: &Self) -> bool {
        self.files == other.files
    }
}

impl Eq for FileList {}

impl std::fmt::Debug for FileList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.files).finish()
    }
}

impl Serialize for FileList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        self.json().map_err(S::Error::custom)?.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for FileList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<WorkFile>::deserialize(deserializer).map(Self::new)
    }
}
