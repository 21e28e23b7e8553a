//! The dependency builds' download cache (docs/sandbox.md, "Dependencies"): package files
//! that one build downloaded, kept by the core so that another build needing the same file
//! gets it without a second download.
//!
//! It lives in the egress proxy, the only place that sees the bytes as upstream served
//! them: a cache the builds could write (pip's `--cache-dir` shared between sandboxes)
//! would let one skill's build (an sdist's `setup.py`, an npm install script) poison
//! another skill's packages. Only the connections of a dependency build's identity use it
//! (`EgressCall::deps_build`), and only for:
//!
//! - a `GET` without `Range` of a path ending `.whl`, `.tar.gz`, `.zip` or `.tgz`
//!   ([`wants`]), answered `200` with no `Content-Range` nor a content coding
//!   ([`answer_fits`]);
//! - keyed by the full URL (scheme, host, port, path and query), stored by content:
//!   `<state>/deps-cache/sha256/<hex>`, with `index.json` mapping each URL to its file's
//!   SHA-256, size, content type and last use.
//!
//! A file is written to a temporary file in the same folder while it streams to the build
//! ([`body::Tee`]), flushed to disk and renamed only when the whole body arrived and its
//! length matches `Content-Length`: nothing half-written is ever served. A hit is read
//! back whole and its SHA-256 checked before a byte is served; a file altered on disk is
//! dropped and fetched again. After each insert the least recently used entries go until
//! the files fit `[deps] cache_mb` (0: no cache).
//!
//! The index is a JSON file beside the files rather than a table of the core's SQLite
//! store: the proxy knows no store (it imports nothing above `state`'s types), the index is
//! small (an entry per package file), and keeping it beside the files means that removing
//! the folder empties the cache whole.

pub mod body;
mod index;
pub mod serve;
#[cfg(test)]
mod tests;

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use http::{HeaderMap, Method, StatusCode};

use self::index::{Entry, Index};

/// The cache's folder in the state folder.
pub const CACHE_DIR: &str = "deps-cache";
/// The endings of the package files cached: wheels, sdists, zips, npm tarballs.
const PACKAGE_ENDINGS: [&str; 4] = [".whl", ".tar.gz", ".zip", ".tgz"];
/// Bytes read at once when hashing a file.
const READ_CHUNK: usize = 256 * 1024;

/// Why the cache could not keep or give a file.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// Creating, writing, syncing or renaming a file failed.
    #[error("{step} {path}: {source}")]
    Io {
        /// What was being done.
        step: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The body ended at another length than the answer's `Content-Length`.
    #[error("the body has {got} bytes, its Content-Length says {expected}: not kept")]
    Length {
        /// `Content-Length`.
        expected: u64,
        /// Bytes received.
        got: u64,
    },
}

/// A file found in the cache, checked against its SHA-256, ready to be read from the start.
#[derive(Debug)]
pub struct Hit {
    /// The file, positioned at its start.
    pub file: std::fs::File,
    /// Its size.
    pub size: u64,
    /// The `Content-Type` it was served with.
    pub content_type: Option<String>,
}

/// The download cache of the dependency builds (see the module docs).
#[derive(Debug)]
pub struct DepsCache {
    dir: PathBuf,
    /// The most bytes of files kept; 0: the cache is off.
    limit: AtomicU64,
    index: Mutex<Index>,
}

impl DepsCache {
    /// The cache in `state`'s `deps-cache/` folder, keeping at most `limit` bytes (0: off).
    /// Entries whose file is missing and temporary files left by a crash are dropped.
    pub fn open(state: &Path, limit: u64) -> Arc<Self> {
        let dir = state.join(CACHE_DIR);
        let index = Index::read(&dir);
        let cache = Self {
            dir,
            limit: AtomicU64::new(limit),
            index: Mutex::new(index),
        };
        cache.evict();
        Arc::new(cache)
    }

    /// Keeps at most `limit` bytes from now on (a reload's `[deps] cache_mb`), evicting
    /// at once when it is lower than before.
    pub fn set_limit(&self, limit: u64) {
        if self.limit.swap(limit, Ordering::AcqRel) > limit {
            self.evict();
        }
    }

    /// Whether the cache is on (`[deps] cache_mb` above 0).
    pub fn enabled(&self) -> bool {
        self.limit.load(Ordering::Acquire) > 0
    }

    /// The bytes of files kept now.
    pub fn size(&self) -> u64 {
        self.lock().total()
    }

    /// The file kept for `url`, its bytes checked against their SHA-256; `None` when there
    /// is none or it no longer matches (then it is dropped). Reads the whole file: call it
    /// off the async threads.
    pub fn hit(&self, url: &str) -> Option<Hit> {
        if !self.enabled() {
            return None;
        }
        let entry = self.lock().get(url)?;
        let path = self.blob(&entry.sha256);
        match check_file(&path, &entry) {
            Ok(mut file) => {
                file.rewind().ok()?;
                self.lock().touch(url, &self.dir);
                Some(Hit {
                    file,
                    size: entry.size,
                    content_type: entry.content_type,
                })
            }
            Err(why) => {
                tracing::warn!(%url, path = %path.display(), %why, "deps cache: a kept file is dropped and fetched again");
                let mut index = self.lock();
                index.remove(url);
                if !index.references(&entry.sha256) {
                    let _ = std::fs::remove_file(&path);
                }
                index.write(&self.dir);
                None
            }
        }
    }

    /// A writer keeping the body of `url`'s answer as it streams (`expected`: its
    /// `Content-Length`), or `None` when the cache is off or cannot write.
    pub fn writer(
        self: &Arc<Self>,
        url: &str,
        expected: Option<u64>,
        content_type: Option<String>,
    ) -> Option<Writer> {
        if !self.enabled() {
            return None;
        }
        let folder = self.dir.join("sha256");
        let made = std::fs::create_dir_all(&folder).and_then(|()| {
            tempfile::Builder::new()
                .prefix(".tmp-")
                .tempfile_in(&folder)
        });
        match made {
            Ok(tmp) => Some(Writer {
                cache: Arc::clone(self),
                url: url.to_string(),
                tmp,
                hasher: ring::digest::Context::new(&ring::digest::SHA256),
                written: 0,
                expected,
                content_type,
            }),
            Err(e) => {
                tracing::warn!(folder = %folder.display(), error = %e, "deps cache: cannot write");
                None
            }
        }
    }

    fn blob(&self, sha256: &str) -> PathBuf {
        self.dir.join("sha256").join(sha256)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops the least recently used entries (and their files) until the files fit.
    fn evict(&self) {
        let limit = self.limit.load(Ordering::Acquire);
        let mut index = self.lock();
        let mut changed = false;
        while index.total() > limit {
            let Some((url, entry)) = index.oldest() else {
                break;
            };
            index.remove(&url);
            if !index.references(&entry.sha256) {
                let _ = std::fs::remove_file(self.blob(&entry.sha256));
            }
            changed = true;
        }
        if changed {
            index.write(&self.dir);
        }
    }
}

/// One answer's body being kept: a temporary file in the cache's folder, hashed as it is
/// written; [`Writer::commit`] renames it into place, dropping it removes it.
pub struct Writer {
    cache: Arc<DepsCache>,
    url: String,
    tmp: tempfile::NamedTempFile,
    hasher: ring::digest::Context,
    written: u64,
    expected: Option<u64>,
    content_type: Option<String>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("url", &self.url)
            .field("written", &self.written)
            .field("expected", &self.expected)
            .finish_non_exhaustive()
    }
}

impl Writer {
    /// Appends `bytes` of the body.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), CacheError> {
        self.tmp.write_all(bytes).map_err(|source| CacheError::Io {
            step: "writing",
            path: self.tmp.path().to_path_buf(),
            source,
        })?;
        self.hasher.update(bytes);
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Keeps the body, which arrived whole: checked against `Content-Length`, flushed to
    /// disk, renamed to its SHA-256, entered in the index; then evicts what no longer fits.
    pub fn commit(self) -> Result<(), CacheError> {
        if let Some(expected) = self.expected.filter(|e| *e != self.written) {
            return Err(CacheError::Length {
                expected,
                got: self.written,
            });
        }
        if self.written > self.cache.limit.load(Ordering::Acquire) {
            // Larger than the whole cache: kept, it would only evict everything else.
            return Ok(());
        }
        let sha256 = hex(self.hasher.finish().as_ref());
        let path = self.cache.blob(&sha256);
        let io = |step, source| CacheError::Io {
            step,
            path: path.clone(),
            source,
        };
        self.tmp
            .as_file()
            .sync_all()
            .map_err(|e| io("syncing", e))?;
        self.tmp
            .persist(&path)
            .map_err(|e| io("renaming", e.error))?;
        if let Ok(folder) = std::fs::File::open(path.parent().unwrap_or(Path::new("."))) {
            let _ = folder.sync_all();
        }
        let entry = Entry {
            sha256,
            size: self.written,
            content_type: self.content_type,
            last_used_ms: 0,
        };
        self.cache.lock().insert(&self.url, entry, &self.cache.dir);
        self.cache.evict();
        Ok(())
    }
}

/// Whether a request is one whose answer the cache serves or keeps: a `GET` without
/// `Range` of a package file (`path_and_query`'s path ends with a package ending).
pub fn wants(method: &Method, path_and_query: &str, headers: &HeaderMap) -> bool {
    let path = path_and_query.split('?').next().unwrap_or_default();
    let lower = path.to_ascii_lowercase();
    *method == Method::GET
        && !headers.contains_key(http::header::RANGE)
        && PACKAGE_ENDINGS.iter().any(|e| lower.ends_with(e))
}

/// Whether an answer is kept: `200`, whole (no `Content-Range`), not coded.
pub fn answer_fits(status: StatusCode, headers: &HeaderMap) -> bool {
    let coded = (headers.get_all(http::header::CONTENT_ENCODING).iter())
        .any(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"));
    status == StatusCode::OK && !headers.contains_key(http::header::CONTENT_RANGE) && !coded
}

/// The file at `path` when its size and SHA-256 are `entry`'s; why not otherwise.
fn check_file(path: &Path, entry: &Entry) -> Result<std::fs::File, String> {
    let mut file = std::fs::File::open(path).map_err(|e| format!("cannot open it: {e}"))?;
    let mut hasher = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; READ_CHUNK];
    let mut size = 0u64;
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| format!("cannot read it: {e}"))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    let sha256 = hex(hasher.finish().as_ref());
    if size != entry.size || sha256 != entry.sha256 {
        return Err(format!(
            "its bytes changed on disk: {size} bytes of SHA-256 {sha256}, kept as {} bytes of \
             {}",
            entry.size, entry.sha256
        ));
    }
    Ok(file)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The entries by URL (tests).
#[cfg(test)]
fn urls(cache: &DepsCache) -> std::collections::BTreeMap<String, u64> {
    cache.lock().sizes()
}
