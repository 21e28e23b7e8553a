//! A call's working folder from its context (docs/sessions.md, `protocol::workdir`): before
//! the spawn, every file of the context is laid out in `<scratch>/work` ([`lay_out`]),
//! its bytes from the executor's [`BlobCache`] or fetched from the core
//! (`core.contextFileRead`, checked against their SHA-256); after the tool ends (and
//! after each answer of a command session) what it created, changed or removed there is
//! sent back ([`sync_back`]: `core.contextFileWrite` in chunks, `core.contextFileDelete`).
//! The walk never follows a link and keeps regular files only; the core judges each file
//! by the call's context, never by what the tool left.

mod fetch_stream;
mod layout;
mod lists;
mod path;
mod place;
pub mod shelf;
mod sync;
mod watch;

pub use crate::blobs::{BlobCache, BLOBS_DIR, DEFAULT_CAP_BYTES};
pub use layout::lay_out;
pub use lists::ContextLists;
pub use path::segments as path_segments;
pub use shelf::{Shelved, WorkShelf};
pub use sync::{sync_back, SyncReport};
pub use watch::kept_folders_watched;

use std::collections::BTreeMap;

use skillbox_protocol::jsonrpc::{code, ErrorObject};
use skillbox_protocol::result::ErrorKind;

/// Deepest folder nesting the sync walks into.
pub const MAX_DEPTH: usize = 32;
/// Most entries the sync looks at; beyond them nothing more is kept and nothing is
/// reported deleted.
pub const MAX_WALK_ENTRIES: usize = 100_000;

/// What identifies a file's state without reading it: inode, size, modification and
/// change times (the change time cannot be set back by the tool).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(st: &nix::sys::stat::FileStat) -> Self {
        Self {
            ino: st.st_ino,
            size: u64::try_from(st.st_size).unwrap_or(0),
            mtime: (st.st_mtime, st.st_mtime_nsec),
            ctime: (st.st_ctime, st.st_ctime_nsec),
        }
    }
}

/// One file of the work folder as the context holds it: its stamp when the executor last
/// wrote or sent it, and its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    stamp: Stamp,
    sha256: String,
    /// Whether it is executable (its owner's exec bit), as the context holds it.
    executable: bool,
}

/// The files of a work folder as the context holds them, by path: what the sync compares
/// against. [`sync_back`] updates it with what the core accepted (a session syncs after
/// every answer).
#[derive(Debug, Clone, Default)]
pub struct Baseline {
    files: BTreeMap<String, Known>,
    /// The call's user, who owns the folder and its files.
    owner: Option<u32>,
    /// Whether the last sync found the folder exactly as `files` says and settled for
    /// good: no process of `owner` left to change it, nothing in it but these files (one
    /// link each, owned by `owner`, 0644 or 0755 as the context holds them) and non-empty
    /// folders (0700, `owner`'s). A context's next call as `owner` then takes the kept
    /// folder without walking it ([`shelf::adopt`]).
    settled: bool,
    /// The folder as the kernel watches it since its last settled sync ([`watch`]): while
    /// nothing changed in it, the sync after a call has nothing to walk.
    tracked: Option<std::sync::Arc<watch::Tracked>>,
}

impl Baseline {
    /// How many files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// Why the context's files could not be laid out.
#[derive(Debug, thiserror::Error)]
pub enum WorkDirError {
    /// A path the core sent breaks the folder's rule.
    #[error("the context's file {path:?} cannot be laid out: {reason}")]
    BadPath {
        /// The path.
        path: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// The core refused or failed a `core.contextFileRead`.
    #[error("reading the context's file {path:?} from the core failed: {}", error.message)]
    Fetch {
        /// The path.
        path: String,
        /// The core's error.
        error: ErrorObject,
    },
    /// The bytes the core sent do not match the size or digest of the file list.
    #[error("the context's file {path:?} from the core does not match its {what}; retry the call")]
    Mismatch {
        /// The path.
        path: String,
        /// `size` or `SHA-256`.
        what: &'static str,
    },
    /// Writing in the work folder or the cache failed.
    #[error("laying out the context's file {path:?} failed: {source}")]
    Write {
        /// The path.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl WorkDirError {
    /// The call's `error_kind` for this failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            WorkDirError::BadPath { .. } => ErrorKind::InvalidArgs,
            WorkDirError::Fetch { error, .. } => core_error_kind(error),
            WorkDirError::Mismatch { .. } => ErrorKind::Unavailable,
            WorkDirError::Write { .. } => ErrorKind::Sandbox,
        }
    }
}

/// The `error_kind` of an error the core answered a file callback with: its quota
/// (`RESOURCE_LIMIT`) is `resource_limit`; a refused path `invalid_args`; a refusal of the
/// call's token `permission_denied`; anything else (the core unreachable) `unavailable`.
pub fn core_error_kind(e: &ErrorObject) -> ErrorKind {
    match e.code {
        code::RESOURCE_LIMIT => ErrorKind::ResourceLimit,
        code::INVALID_PARAMS => ErrorKind::InvalidArgs,
        code::PERMISSION_DENIED => ErrorKind::PermissionDenied,
        _ => ErrorKind::Unavailable,
    }
}

/// SHA-256 of `bytes` as lowercase hex.
pub fn hex(digest: &[u8]) -> String {
    use std::fmt::Write;
    digest.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
