//! The executor's cache of context file contents, by SHA-256: a call made in a context
//! copies each file it needs from here, and asks the core (`core.contextFileRead`) only
//! for what is missing. Root-owned (folder 0700, files 0600) under
//! `<scratch root>/.blobs/<executor pid>/`: one folder per executor, so executors that
//! share a scratch root never remove each other's blobs; the folders of executors that
//! are gone (and this one's, from an earlier run under the same pid) are removed at
//! start. Bounded by [`BlobCache::cap_bytes`]: the blobs used longest ago go first.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The folder of the scratch root that holds the caches.
pub const BLOBS_DIR: &str = ".blobs";

/// Default most bytes the cache holds (`SandboxConfig::blob_cache_bytes`); the work
/// folders kept between calls (`workdir::shelf`) hold as many again at most.
pub const DEFAULT_CAP_BYTES: u64 = 512 * 1024 * 1024;

/// One blob held: its size and when it was last used (a counter).
#[derive(Debug, Clone, Copy)]
struct Held {
    size: u64,
    used: u64,
}

/// The cache (see the module docs).
#[derive(Debug)]
pub struct BlobCache {
    id: u64,
    dir: PathBuf,
    cap_bytes: u64,
    held: Mutex<HashMap<String, Held>>,
    clock: AtomicU64,
}

impl BlobCache {
    /// Opens an empty cache under `scratch_root` that holds at most `cap_bytes`, removing
    /// what earlier executors left.
    pub fn new(scratch_root: &Path, cap_bytes: u64) -> std::io::Result<Self> {
        let root = scratch_root.join(BLOBS_DIR);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&root)?;
        remove_stale(&root);
        let dir = root.join(std::process::id().to_string());
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Ok(Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            dir,
            cap_bytes,
            held: Mutex::default(),
            clock: AtomicU64::new(0),
        })
    }

    /// The cache's folder (this executor's, removed at its next start).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// This cache among the caches the process opened (the folder of one opened later
    /// may be the same).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Most bytes held.
    pub fn cap_bytes(&self) -> u64 {
        self.cap_bytes
    }

    /// The blob of `sha256`, open for reading, when the cache holds it.
    pub fn open(&self, sha256: &str) -> Option<File> {
        if !is_digest(sha256) {
            return None;
        }
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut held = self.held.lock().ok()?;
        let entry = held.get_mut(sha256)?;
        entry.used = tick;
        match File::open(self.dir.join(sha256)) {
            Ok(f) => Some(f),
            Err(_) => {
                held.remove(sha256);
                None
            }
        }
    }

    /// A new file to fetch a blob into, inside the cache folder (removed on drop unless
    /// [`BlobCache::keep`] takes it).
    pub fn incoming(&self) -> std::io::Result<Incoming> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = self
            .dir
            .join(format!(".in-{}", NEXT.fetch_add(1, Ordering::Relaxed)));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        Ok(Incoming {
            path: Some(path),
            file,
        })
    }

    /// Keeps a fetched blob whose bytes were checked against `sha256` (a blob larger
    /// than the whole cache is not kept), and drops the blobs used longest ago while the
    /// cache holds more than its cap. Returns the file, open, rewound.
    pub fn keep(&self, mut incoming: Incoming, sha256: &str, size: u64) -> std::io::Result<File> {
        use std::io::Seek;
        incoming.file.flush()?;
        incoming.file.rewind()?;
        let file = incoming.file.try_clone()?;
        let Some(from) = incoming.path.take() else {
            return Ok(file);
        };
        if size > self.cap_bytes || !is_digest(sha256) {
            let _ = std::fs::remove_file(&from);
            return Ok(file);
        }
        std::fs::rename(&from, self.dir.join(sha256))?;
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        let Ok(mut held) = self.held.lock() else {
            return Ok(file);
        };
        held.insert(sha256.to_string(), Held { size, used: tick });
        let mut total: u64 = held.values().map(|h| h.size).sum();
        while total > self.cap_bytes {
            let Some((oldest, h)) = held
                .iter()
                .min_by_key(|(_, h)| h.used)
                .map(|(k, h)| (k.clone(), *h))
            else {
                break;
            };
            held.remove(&oldest);
            let _ = std::fs::remove_file(self.dir.join(&oldest));
            total -= h.size;
        }
        Ok(file)
    }

    /// Bytes held now.
    pub fn held_bytes(&self) -> u64 {
        self.held
            .lock()
            .map(|h| h.values().map(|h| h.size).sum())
            .unwrap_or(0)
    }
}

/// A blob being fetched: a file in the cache folder, removed on drop unless kept.
#[derive(Debug)]
pub struct Incoming {
    path: Option<PathBuf>,
    /// The file, open read-write.
    pub file: File,
}

impl Drop for Incoming {
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Whether `s` looks like a SHA-256 in lowercase hex (a name safe to use as a file name).
fn is_digest(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Removes the cache folders of executors that are no longer running.
fn remove_stale(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let alive = name
            .parse::<u32>()
            .is_ok_and(|pid| Path::new("/proc").join(pid.to_string()).exists());
        if !alive {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn put(cache: &BlobCache, sha: &str, bytes: &[u8]) {
        let mut incoming = cache.incoming().unwrap();
        incoming.file.write_all(bytes).unwrap();
        let mut f = cache.keep(incoming, sha, bytes.len() as u64).unwrap();
        let mut back = Vec::new();
        f.read_to_end(&mut back).unwrap();
        assert_eq!(back, bytes);
    }

    #[test]
    fn the_cache_drops_the_blobs_used_longest_ago_beyond_its_cap() {
        let root = tempfile::tempdir().unwrap();
        let cache = BlobCache::new(root.path(), 10).unwrap();
        let (a, b, c) = ("a".repeat(64), "b".repeat(64), "c".repeat(64));
        put(&cache, &a, b"1234");
        put(&cache, &b, b"5678");
        assert!(cache.open(&a).is_some());
        put(&cache, &c, b"9012");
        assert!(cache.open(&b).is_none(), "b was used longest ago");
        assert!(cache.open(&a).is_some() && cache.open(&c).is_some());
        assert_eq!(cache.held_bytes(), 8);
        put(&cache, &"d".repeat(64), &[0; 11]);
        assert!(cache.open(&"d".repeat(64)).is_none(), "larger than the cap");
    }

    #[test]
    fn a_name_that_is_not_a_digest_is_never_a_file_name() {
        let root = tempfile::tempdir().unwrap();
        let cache = BlobCache::new(root.path(), 10).unwrap();
        assert!(cache.open("../../etc/passwd").is_none());
    }
}
