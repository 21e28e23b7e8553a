//! The cache's index: each URL kept → its file's SHA-256, size, content type and last use,
//! in memory and in `<state>/deps-cache/index.json` (written through a temporary file and
//! a rename after each change).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::state::store::unix_ms_now;

/// The index file in the cache's folder.
const INDEX_FILE: &str = "index.json";

/// One URL's file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The file's SHA-256 (its name under `sha256/`).
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
    /// The `Content-Type` it was served with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// Its last use (kept or served), Unix ms; later uses always have larger values.
    pub last_used_ms: i64,
}

/// Every URL kept.
#[derive(Debug, Default)]
pub struct Index {
    entries: BTreeMap<String, Entry>,
    /// The last use handed out: uses in the same millisecond still come in order.
    clock: i64,
}

impl Index {
    /// The index in `dir`, keeping only entries whose file is there, with the temporary
    /// files of writes that never finished removed.
    pub fn read(dir: &Path) -> Self {
        let blobs = dir.join("sha256");
        for entry in std::fs::read_dir(&blobs).into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().starts_with(".tmp-") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        let read: BTreeMap<String, Entry> = std::fs::read(dir.join(INDEX_FILE))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        let entries: BTreeMap<String, Entry> = (read.into_iter())
            .filter(|(_, e)| blobs.join(&e.sha256).is_file())
            .collect();
        let clock = entries.values().map(|e| e.last_used_ms).max().unwrap_or(0);
        Self { entries, clock }
    }

    /// Writes it to `dir` (a failure is logged: the files stay, the index is rebuilt from
    /// memory on the next change).
    pub fn write(&self, dir: &Path) {
        let written = serde_json::to_vec(&self.entries)
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                std::fs::create_dir_all(dir)?;
                skillbox_certs::write_atomic(&dir.join(INDEX_FILE), &bytes, 0o600)
            });
        if let Err(e) = written {
            tracing::warn!(dir = %dir.display(), error = %e, "deps cache: the index was not written");
        }
    }

    /// `url`'s entry.
    pub fn get(&self, url: &str) -> Option<Entry> {
        self.entries.get(url).cloned()
    }

    /// Keeps `entry` for `url`, used now, and writes the index to `dir`.
    pub fn insert(&mut self, url: &str, mut entry: Entry, dir: &Path) {
        entry.last_used_ms = self.tick();
        self.entries.insert(url.to_string(), entry);
        self.write(dir);
    }

    /// Marks `url` used now and writes the index to `dir`.
    pub fn touch(&mut self, url: &str, dir: &Path) {
        let now = self.tick();
        if let Some(e) = self.entries.get_mut(url) {
            e.last_used_ms = now;
            self.write(dir);
        }
    }

    /// Drops `url`'s entry.
    pub fn remove(&mut self, url: &str) -> Option<Entry> {
        self.entries.remove(url)
    }

    /// Whether any entry names the file `sha256`.
    pub fn references(&self, sha256: &str) -> bool {
        self.entries.values().any(|e| e.sha256 == sha256)
    }

    /// The least recently used entry.
    pub fn oldest(&self) -> Option<(String, Entry)> {
        (self.entries.iter())
            .min_by_key(|(_, e)| e.last_used_ms)
            .map(|(u, e)| (u.clone(), e.clone()))
    }

    /// The bytes of the files kept (a file two URLs share counted once).
    pub fn total(&self) -> u64 {
        let mut seen = BTreeSet::new();
        (self.entries.values())
            .filter(|e| seen.insert(e.sha256.as_str()))
            .map(|e| e.size)
            .sum()
    }

    /// Each URL's size (tests).
    #[cfg(test)]
    pub fn sizes(&self) -> BTreeMap<String, u64> {
        (self.entries.iter())
            .map(|(u, e)| (u.clone(), e.size))
            .collect()
    }

    fn tick(&mut self) -> i64 {
        self.clock = unix_ms_now().max(self.clock + 1);
        self.clock
    }
}
