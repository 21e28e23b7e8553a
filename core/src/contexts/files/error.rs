//! Why a context's file could not be written, read or removed, and the kind each refusal
//! is to the caller.

use nix::errno::Errno;
use skillbox_protocol::result::ErrorKind;

use crate::state::store::StoreError;

/// Why a context's file could not be written, read or removed.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The path breaks a rule.
    #[error("file path {path:?} is not valid: {rule}")]
    BadPath {
        /// The path given.
        path: String,
        /// The rule it breaks.
        rule: &'static str,
    },
    /// No such file in the context.
    #[error(
        "no file {path:?} in context {context:?}; list them with GET /v1/contexts/{context}/files"
    )]
    NotFound {
        /// The context.
        context: String,
        /// The path.
        path: String,
    },
    /// The path names a folder, or something that is not a regular file.
    #[error("{path:?} is not a regular file in the context's folder")]
    NotAFile {
        /// The path.
        path: String,
    },
    /// The file is over `[files] max_file_bytes`.
    #[error("the file is over the {limit}-byte limit of one file ([files] max_file_bytes)")]
    FileTooLarge {
        /// The limit.
        limit: u64,
    },
    /// The context's files would be over `[files] max_total_bytes`.
    #[error("context {context:?} would hold over {limit} bytes ([files] max_total_bytes); remove files first")]
    OverQuota {
        /// The context.
        context: String,
        /// The limit.
        limit: u64,
    },
    /// The context holds `[files] max_files` already.
    #[error(
        "context {context:?} holds {limit} files already ([files] max_files); remove files first"
    )]
    TooManyFiles {
        /// The context.
        context: String,
        /// The limit.
        limit: usize,
    },
    /// The upload did not arrive in time.
    #[error(
        "the file did not arrive within {ms} ms (gateway.body_timeout_ms); send it without pausing"
    )]
    TimedOut {
        /// The limit.
        ms: u128,
    },
    /// The upload's connection broke.
    #[error("reading the upload failed: {0}")]
    Broken(String),
    /// The file system refused a step.
    #[error("could not {step} in the context's folder: {source}")]
    Io {
        /// What was being done.
        step: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl FileError {
    /// The docs/http-api.md kind of this error.
    pub fn error_kind(&self) -> ErrorKind {
        match self {
            FileError::BadPath { .. } | FileError::NotAFile { .. } | FileError::Broken(_) => {
                ErrorKind::InvalidArgs
            }
            FileError::NotFound { .. } => ErrorKind::NotFound,
            FileError::FileTooLarge { .. }
            | FileError::OverQuota { .. }
            | FileError::TooManyFiles { .. } => ErrorKind::ResourceLimit,
            FileError::TimedOut { .. } => ErrorKind::Timeout,
            FileError::Io { .. } | FileError::Store(_) => ErrorKind::Unavailable,
        }
    }

    pub(super) fn io(step: &'static str) -> impl Fn(Errno) -> FileError {
        move |e| FileError::Io {
            step,
            source: std::io::Error::from(e),
        }
    }
}
