//! A collection index (docs/skill-index.md): a JSON file listing skills and where each
//! comes from, read from a local file or an `http(s)://` URL. The top level is strict
//! (unknown keys and versions are refused: a newer format must not be half read); an
//! entry may carry fields this version does not know (a collection's `license`,
//! `homepage`), which are ignored, so collections can add them without breaking readers.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use skillbox_protocol::skill::validate::is_spec_skill_name;

use super::fetch::{self, FetchError};

/// The one index format version this build reads.
pub const INDEX_VERSION: u64 = 1;

/// A collection index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Index {
    /// The format version, [`INDEX_VERSION`].
    pub version: u64,
    /// The collection's name, shown where a match was found.
    pub name: String,
    /// The skills it lists.
    pub skills: Vec<IndexEntry>,
}

/// One skill of an index: what it is and where to get it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// The skill's name (a valid skill name: 1-64 of a-z, 0-9 and single inner -).
    pub name: String,
    /// What it does.
    pub description: String,
    /// Where it comes from: a GitHub `owner/repo`, a git URL, or an archive URL.
    pub source: String,
    /// The skill's folder inside `source`, relative, without `..`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The git ref (branch, tag or commit) to take `source` at.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub git_ref: Option<String>,
    /// Free words to search by.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

impl IndexEntry {
    /// Where the entry points, as `source[/path][@ref]`.
    pub fn location(&self) -> String {
        let mut out = self.source.clone();
        if let Some(p) = &self.path {
            out.push('/');
            out.push_str(p.trim_matches('/'));
        }
        if let Some(r) = &self.git_ref {
            out.push('@');
            out.push_str(r);
        }
        out
    }
}

/// Why an index could not be used.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The location is neither a path nor an http(s) URL.
    #[error("index {location}: {reason}")]
    Location {
        /// The location as given.
        location: String,
        /// What is wrong and what to do.
        reason: String,
    },
    /// The local file could not be read.
    #[error("index {}: {source}; check the path ([skills] indexes are relative to the workspace, --index to the current folder)", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The local file is over the size cap.
    #[error("index {}: larger than {limit} bytes; split the collection", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap.
        limit: u64,
    },
    /// The URL could not be fetched.
    #[error("index {url}: {source}")]
    Fetch {
        /// The URL.
        url: String,
        /// What went wrong.
        source: FetchError,
    },
    /// Not JSON, or not of the index format.
    #[error(
        "index {location}: not a skill index ({reason}); see docs/skill-index.md for the format"
    )]
    Parse {
        /// The location.
        location: String,
        /// What the parser said.
        reason: String,
    },
    /// A version this build does not read.
    #[error("index {location}: version {version} is unknown (this skillbox reads version {INDEX_VERSION}); update skillbox or ask the collection for a version {INDEX_VERSION} index")]
    Version {
        /// The location.
        location: String,
        /// The version found.
        version: String,
    },
    /// An entry breaks a rule of the format.
    #[error("index {location}: skill #{position} ({name:?}): {reason}; fix the index")]
    Entry {
        /// The location.
        location: String,
        /// The entry's position, from 1.
        position: usize,
        /// Its name as written.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// Reads the index at `location`: an `http://` or `https://` URL (fetched with a 20 s
/// timeout and a 4 MiB cap, [`fetch::get`]) or a file path, relative to `workspace_root`
/// unless absolute. Blocks; from inside a tokio runtime it fetches on a thread of its own.
pub fn load_index(location: &str, workspace_root: &Path) -> Result<Index, IndexError> {
    let location = location.trim();
    let bytes = if location.starts_with("http://") || location.starts_with("https://") {
        fetch::get_blocking(location).map_err(|source| IndexError::Fetch {
            url: location.to_string(),
            source,
        })?
    } else if location.contains("://") {
        return Err(IndexError::Location {
            location: location.to_string(),
            reason: "only file paths and http:// or https:// URLs are read; download it and give its path".into(),
        });
    } else if location.is_empty() {
        return Err(IndexError::Location {
            location: String::new(),
            reason: "an empty location; name a file or a URL".into(),
        });
    } else {
        read_file(&workspace_root.join(location))?
    };
    parse_index(&bytes, location)
}

fn read_file(path: &Path) -> Result<Vec<u8>, IndexError> {
    let read = |source| IndexError::Read {
        path: path.to_path_buf(),
        source,
    };
    let len = std::fs::metadata(path).map_err(read)?.len();
    if len > fetch::MAX_INDEX_BYTES as u64 {
        return Err(IndexError::TooLarge {
            path: path.to_path_buf(),
            limit: fetch::MAX_INDEX_BYTES as u64,
        });
    }
    std::fs::read(path).map_err(read)
}

/// Parses and checks an index read from `location` (named in errors).
pub fn parse_index(bytes: &[u8], location: &str) -> Result<Index, IndexError> {
    let parse = |e: serde_json::Error| IndexError::Parse {
        location: location.to_string(),
        reason: e.to_string(),
    };
    // The version first: a newer format is refused as such, not by its first new field.
    let raw: serde_json::Value = serde_json::from_slice(bytes).map_err(parse)?;
    match raw.get("version") {
        Some(v) if v.as_u64() == Some(INDEX_VERSION) => {}
        Some(v) => {
            return Err(IndexError::Version {
                location: location.to_string(),
                version: v.to_string(),
            })
        }
        None => {
            return Err(IndexError::Parse {
                location: location.to_string(),
                reason: "no \"version\"".into(),
            })
        }
    }
    let index: Index = serde_json::from_value(raw).map_err(parse)?;
    check(&index, location)?;
    Ok(index)
}

/// The rules serde does not check: names, required text, relative paths, one entry per
/// name (`skill add --skill NAME` must find exactly one).
fn check(index: &Index, location: &str) -> Result<(), IndexError> {
    if index.name.trim().is_empty() {
        return Err(IndexError::Parse {
            location: location.to_string(),
            reason: "\"name\" is empty".into(),
        });
    }
    for (i, entry) in index.skills.iter().enumerate() {
        let refuse = |reason: String| IndexError::Entry {
            location: location.to_string(),
            position: i + 1,
            name: entry.name.clone(),
            reason,
        };
        if !is_spec_skill_name(&entry.name) {
            return Err(refuse(
                "the name is not a valid skill name (1-64 of a-z, 0-9 and single inner -)".into(),
            ));
        }
        if entry.description.trim().is_empty() {
            return Err(refuse("\"description\" is empty".into()));
        }
        if entry.source.trim().is_empty() {
            return Err(refuse("\"source\" is empty".into()));
        }
        if let Some(p) = &entry.path {
            let escapes = Path::new(p)
                .components()
                .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
            if p.is_empty() || escapes {
                return Err(refuse(format!(
                    "\"path\" {p:?} must be a relative folder inside the source, without .."
                )));
            }
        }
        if index.skills[..i].iter().any(|e| e.name == entry.name) {
            return Err(refuse("another entry has the same name".into()));
        }
    }
    Ok(())
}
