//! A context's working folder as it travels with a call (docs/sessions.md): the core keeps
//! the files; with each call made in a context it sends the executor the list of them
//! ([`WorkDir`]); the executor lays them out as the call's working directory, fetching the
//! bytes it does not hold yet with `core.contextFileRead`, and after the call (and after
//! each answer of a session) sends back what the call created, changed or removed
//! (`core.contextFileWrite`, `core.contextFileDelete`). The core judges each of those by
//! the call's context, never by what the executor names.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

mod file_list;
mod held;

pub use file_list::FileList;
pub use held::{HeldLists, MAX_HELD_FILES, MAX_HELD_LISTS};

/// Files at least this large come to the executor over a file stream of the channel
/// (`POST /file`) as raw bytes, when it has one to the core: a [`FileStreamRequest`]
/// line, then a [`FileStreamHead`] line and the bytes. Smaller ones come in
/// `core.contextFileRead` chunks, one round trip on a kept connection each.
pub const STREAM_MIN_BYTES: u64 = 1024 * 1024;

/// Longest line of JSON a file stream starts with, either way.
pub const MAX_STREAM_LINE_BYTES: usize = 64 * 1024;

/// What the executor asks on a file stream, as one line of JSON: a file the call's
/// [`WorkDir`] named, by its path and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileStreamRequest {
    /// The file's path.
    pub path: String,
    /// Its SHA-256 as the [`WorkDir`] gave it.
    pub sha256: String,
}

/// The core's answer on a file stream, as one line of JSON: the file's size (that many
/// raw bytes follow, then the stream ends), or why not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FileStreamHead {
    /// The bytes follow.
    Bytes {
        /// How many.
        size: u64,
    },
    /// Refused or failed, as `core.contextFileRead` would answer it.
    Error(crate::jsonrpc::ErrorObject),
}

/// Largest chunk of a file one `core.contextFileRead` answers or one
/// `core.contextFileWrite` carries (before base64), well under the channel's message limit.
pub const MAX_CHUNK_BYTES: usize = 2 * 1024 * 1024;

/// One file of a context's folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkFile {
    /// Relative, `/`-separated path.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the bytes, lowercase hex.
    pub sha256: String,
    /// Laid out executable (0755, else 0644): a script a command made executable runs in
    /// the next one. Absent: false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub executable: bool,
}

fn is_false(b: &bool) -> bool {
    !b
}

/// What a call made in a context gets: the context's files and the limits on what it may
/// leave there.
///
/// On the wire the list is `files`, and with it, for a call in a context, `list_sha256`
/// ([`FileList::sha256`]): the executor keeps the last list of each context under it.
/// Once a call carried a list whole, later calls may carry the digest alone
/// ([`WorkDir::list_withheld`]); an executor that does not hold that list refuses the call
/// before running anything with [`crate::jsonrpc::code::UNKNOWN_FILE_LIST`], and the core
/// sends it again whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkDir {
    /// Every file of the context's folder. Shared: the core hands out the list it keeps
    /// per context without copying or encoding it again for each call.
    pub files: Arc<FileList>,
    /// Largest file the call may leave (`[files] max_file_bytes`).
    pub max_file_bytes: u64,
    /// Most bytes the folder may hold (`[files] max_total_bytes`).
    pub max_total_bytes: u64,
    /// Most files the folder may hold (`[files] max_files`).
    pub max_files: usize,
    /// The context the folder is: an executor keeps a call's folder after its end and lays
    /// out the next call of the same context from it, moving only what changed. Absent:
    /// laid out anew.
    pub context_id: Option<String>,
    /// The list's SHA-256 as it came (`list_sha256`), on the executor's side; the core's
    /// side writes [`FileList::sha256`] of `files`.
    pub list_sha256: Option<String>,
    /// Whether the list travels as its digest alone: set by the sender for an executor
    /// that may hold it; on the receiver, whether `files` was absent (the list is still to
    /// be found by its digest).
    pub list_withheld: bool,
}

/// A [`WorkDir`] as it is written.
#[derive(Serialize)]
struct WorkDirOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    files: Option<&'a FileList>,
    #[serde(skip_serializing_if = "Option::is_none")]
    list_sha256: Option<&'a str>,
    max_file_bytes: u64,
    max_total_bytes: u64,
    max_files: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    context_id: Option<&'a str>,
}

/// A [`WorkDir`] as it is read.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkDirIn {
    #[serde(default)]
    files: Option<FileList>,
    #[serde(default)]
    list_sha256: Option<String>,
    max_file_bytes: u64,
    max_total_bytes: u64,
    max_files: usize,
    #[serde(default)]
    context_id: Option<String>,
}

impl Serialize for WorkDir {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        // Named only in a context: the executor keeps lists per context.
        let list_sha256 = match &self.context_id {
            Some(_) => Some(self.files.sha256().map_err(S::Error::custom)?),
            None => None,
        };
        let withheld = self.list_withheld && list_sha256.is_some();
        WorkDirOut {
            files: (!withheld).then_some(&*self.files),
            list_sha256,
            max_file_bytes: self.max_file_bytes,
            max_total_bytes: self.max_total_bytes,
            max_files: self.max_files,
            context_id: self.context_id.as_deref(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for WorkDir {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let w = WorkDirIn::deserialize(deserializer)?;
        if w.files.is_none() && (w.list_sha256.is_none() || w.context_id.is_none()) {
            return Err(serde::de::Error::custom(
                "a work dir needs `files`, or `list_sha256` with `context_id`",
            ));
        }
        Ok(WorkDir {
            list_withheld: w.files.is_none(),
            files: Arc::new(w.files.unwrap_or_default()),
            max_file_bytes: w.max_file_bytes,
            max_total_bytes: w.max_total_bytes,
            max_files: w.max_files,
            context_id: w.context_id,
            list_sha256: w.list_sha256,
        })
    }
}

impl WorkDir {
    /// The folder's quotas and context without its list of files (what a sync needs).
    pub fn without_files(&self) -> WorkDir {
        WorkDir {
            files: Arc::default(),
            max_file_bytes: self.max_file_bytes,
            max_total_bytes: self.max_total_bytes,
            max_files: self.max_files,
            context_id: self.context_id.clone(),
            list_sha256: None,
            list_withheld: false,
        }
    }

    /// For an executor that keeps lists: the list travels as its digest alone when a call
    /// carried it whole before (to this executor or another). Returns whether it does.
    pub fn withhold_list_if_sent(&mut self) -> bool {
        self.list_withheld = self.context_id.is_some() && self.files.mark_sent();
        self.list_withheld
    }

    /// The list goes whole again (the executor did not hold it).
    pub fn send_list_whole(&mut self) {
        self.list_withheld = false;
    }
}

/// `core.contextFileRead` request: a chunk of a file the call's [`WorkDir`] named, by its
/// digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextFileReadParams {
    /// The file's path.
    pub path: String,
    /// Its SHA-256 as the [`WorkDir`] gave it.
    pub sha256: String,
    /// First byte.
    pub offset: u64,
    /// Most bytes ([`MAX_CHUNK_BYTES`] at most).
    pub len: u64,
}

/// `core.contextFileRead` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextFileChunk {
    /// The bytes, base64.
    pub data: String,
    /// Whether the chunk reaches the end of the file.
    pub eof: bool,
}

/// `core.contextFileWrite` request: a chunk of a file the call created or changed.
/// Chunks of one file come in order, from offset 0; the last one has `last` and the
/// digest of the whole file, and only then does the file replace the context's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextFileWriteParams {
    /// The file's path in the context's folder.
    pub path: String,
    /// Where the chunk starts.
    pub offset: u64,
    /// The bytes, base64.
    pub data: String,
    /// Whether this is the last chunk.
    pub last: bool,
    /// The SHA-256 of the whole file (lowercase hex), with the last chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Whether the call left it executable (its owner's exec bit), with the last chunk.
    #[serde(default, skip_serializing_if = "is_false")]
    pub executable: bool,
}

/// `core.contextFileWrite` answer, with the last chunk: the file as the context now
/// holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextFileWritten {
    /// The file, once in place (absent before the last chunk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<WorkFile>,
}

/// `core.contextFileDelete` request: a file of the [`WorkDir`] the call removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextFileDeleteParams {
    /// The file's path.
    pub path: String,
}

/// `core.contextFileDelete` answer (nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextFileDeleted {}

#[cfg(test)]
mod tests;
