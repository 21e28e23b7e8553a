//! A context's working folder as it travels with a call (docs/sessions.md): the core keeps
//! the files; with each call made in a context it sends the executor the list of them
//! ([`WorkDir`]); the executor lays them out as the call's working directory, fetching the
//! bytes it does not hold yet with `core.contextFileRead`, and after the call (and after
//! each answer of a session) sends back what the call created, changed or removed
//! (`core.contextFileWrite`, `core.contextFileDelete`). The core judges each of those by
//! the call's context, never by what the executor names.

use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

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

/// A context's list of files as it travels with its calls, encoded once: the core sends
/// the list it keeps per context with every call in that context, and each request
/// carries the same JSON (in a profile of unchanged calls in a context of 1,000 files,
/// encoding the list was a quarter of the core's time). Reads as the `Vec` it holds.
#[derive(Default)]
pub struct FileList {
    files: Vec<WorkFile>,
    /// The list as JSON, made at its first encoding.
    json: OnceLock<Box<RawValue>>,
}

impl FileList {
    /// The list of `files`.
    pub fn new(files: Vec<WorkFile>) -> Self {
        Self {
            files,
            json: OnceLock::new(),
        }
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
        let json = match self.json.get() {
            Some(json) => json,
            None => {
                let text = serde_json::to_string(&self.files).map_err(S::Error::custom)?;
                let raw = RawValue::from_string(text).map_err(S::Error::custom)?;
                self.json.get_or_init(|| raw)
            }
        };
        json.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for FileList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<WorkFile>::deserialize(deserializer).map(Self::new)
    }
}

/// What a call made in a context gets: the context's files and the limits on what it may
/// leave there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
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
        }
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
mod tests {
    use super::*;
    use serde_json::json;

    /// The list encoded once is what the `Vec` encodes to, every time it is written, in a
    /// request line or a JSON tree.
    #[test]
    fn a_file_list_is_encoded_once_as_its_vec_is() {
        let file = |i: u32| WorkFile {
            path: format!("d/f{i}"),
            size: u64::from(i),
            sha256: format!("{i:064x}"),
            executable: i % 2 == 0,
        };
        let files: Vec<WorkFile> = (0..3).map(file).collect();
        let list = FileList::new(files.clone());
        let want = serde_json::to_string(&files).unwrap();
        assert_eq!(serde_json::to_string(&list).unwrap(), want);
        assert_eq!(
            serde_json::to_string(&list).unwrap(),
            want,
            "from its kept text"
        );
        assert_eq!(
            serde_json::to_value(&list).unwrap(),
            serde_json::to_value(&files).unwrap()
        );
        let back: FileList = serde_json::from_str(&want).unwrap();
        assert_eq!(back, list);
        assert_eq!(*back, files);
    }

    #[test]
    fn a_work_dir_travels_as_json_and_refuses_unknown_fields() {
        let w = WorkDir {
            files: Arc::new(FileList::new(vec![WorkFile {
                path: "in/a.pdf".into(),
                size: 3,
                sha256: "ab".into(),
                executable: false,
            }])),
            max_file_bytes: 10,
            max_total_bytes: 20,
            max_files: 2,
            context_id: Some("c1".into()),
        };
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(serde_json::from_value::<WorkDir>(v.clone()).unwrap(), w);
        let bad = json!({"path": "a", "size": 1, "sha256": "x", "mode": 7});
        assert!(serde_json::from_value::<WorkFile>(bad).is_err());
        // The exec bit travels only when set.
        assert!(!v.to_string().contains("executable"));
        let script = json!({"path": "run.sh", "size": 1, "sha256": "x", "executable": true});
        assert!(
            serde_json::from_value::<WorkFile>(script)
                .unwrap()
                .executable
        );
    }
}
