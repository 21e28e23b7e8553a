//! Progressive disclosure (the agent-skills seed): an agent sees names and descriptions
//! first, reads a skill's body with the built-in tool `load_skill`, one reference file
//! with `GET /v1/skills/{name}/files/{path}`, and runs a script with `run_skill_script`.
//!
//! `run_skill_script` runs any file under the skill's `scripts/` (published skills are
//! instructions plus scripts, with no manifest of tools) by its shebang or extension, with
//! command-line arguments, under the skill's envelope: its sandbox, limits, declared env,
//! and the security of its most powerful declared tool (a skill with a `write` tool asks
//! for an approval of each script run, so a script is never a way around one).

use skillbox_protocol::ToolRef;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use serde_json::{json, Value};
use skillbox_protocol::result::ErrorKind;
use skillbox_protocol::skill::{Catalog, Skill};

use crate::state::protected::{refuse_protected, ProtectedError};

/// The built-in tool that returns a skill's instructions.
pub const LOAD_SKILL: &str = skillbox_protocol::Target::LOAD_SKILL;
/// The built-in tool that runs a script of a skill with command-line arguments.
pub const RUN_SKILL_SCRIPT: &str = skillbox_protocol::Target::RUN_SKILL_SCRIPT;
/// OpenClaw's name for a skill's folder in its instructions.
pub const BASE_DIR_TOKEN: &str = "{baseDir}";
/// What `load_skill` puts in its place: the variable every program in the sandbox has,
/// naming the skill's folder as the executor running it sees it (the path differs from
/// one executor to another; a shell expands the variable on each).
pub const SKILL_DIR_VAR: &str = "$SKILLBOX_SKILL_DIR";
/// The largest reference file served.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Why a file of a skill or a built-in tool call is refused.
#[derive(Debug, thiserror::Error)]
pub enum DisclosureError {
    /// No such skill.
    #[error("no skill named {name:?}; list skills with GET /v1/skills")]
    UnknownSkill {
        /// The name asked for.
        name: String,
    },
    /// The path leaves the skill folder or is not a plain relative path.
    #[error(
        "path {path:?} is refused: give a relative path inside the skill folder, without `..`"
    )]
    PathOutside {
        /// The path asked for.
        path: String,
    },
    /// A component of the path is a symbolic link.
    #[error("path {path:?} is refused: {link:?} is a symbolic link, and files are served only from inside the skill folder")]
    Symlink {
        /// The path asked for.
        path: String,
        /// The link met.
        link: PathBuf,
    },
    /// Nothing (or no regular file) at that path.
    #[error("skill {skill:?} has no file {path:?}; GET /v1/skills/{skill} lists its files")]
    NoFile {
        /// The skill.
        skill: String,
        /// The path asked for.
        path: String,
    },
    /// The file is over the size cap.
    #[error(
        "file {path:?} is {size} bytes, over the {MAX_FILE_BYTES}-byte cap for reference files"
    )]
    TooLarge {
        /// The path asked for.
        path: String,
        /// Its size.
        size: u64,
    },
    /// Reading the file failed.
    #[error("could not read {path:?}: {source}")]
    Read {
        /// The path asked for.
        path: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The arguments of a built-in tool are wrong.
    #[error("{tool}: {reason}")]
    BadArgs {
        /// The built-in.
        tool: &'static str,
        /// What is wrong and what to send.
        reason: String,
    },
    /// The file reached is one of the core's protected files (a hard link or mount of a
    /// file of the state folder or of `skillbox.toml`), or they could not be listed.
    #[error("path {path:?} of skill {skill:?} is refused: {source}")]
    Protected {
        /// The skill.
        skill: String,
        /// The path asked for.
        path: String,
        /// The judgement of [`crate::state::protected`].
        source: ProtectedError,
    },
    /// A regular file with more than one name (a hard link): it may be any file of the
    /// core's user, so a skill folder never serves it.
    #[error("path {path:?} of skill {skill:?} is refused: the file has {links} names (a hard link), and a skill folder serves only files with one name, since a hard link may be any file of the core's user; replace the link with a copy of the file")]
    HardLink {
        /// The skill.
        skill: String,
        /// The path asked for.
        path: String,
        /// Its link count.
        links: u64,
    },
}

impl DisclosureError {
    /// The contract kind of this error (the one mapping to the outside).
    pub fn error_kind(&self) -> ErrorKind {
        match self {
            DisclosureError::UnknownSkill { .. } | DisclosureError::NoFile { .. } => {
                ErrorKind::NotFound
            }
            DisclosureError::Protected {
                source: ProtectedError::Scan { .. },
                ..
            } => ErrorKind::Unavailable,
            DisclosureError::PathOutside { .. }
            | DisclosureError::Symlink { .. }
            | DisclosureError::Protected { .. }
            | DisclosureError::HardLink { .. } => ErrorKind::PermissionDenied,
            DisclosureError::TooLarge { .. } => ErrorKind::ResourceLimit,
            DisclosureError::Read { .. } => ErrorKind::Unavailable,
            DisclosureError::BadArgs { .. } => ErrorKind::InvalidArgs,
        }
    }
}

/// A relative path of plain components, or the refusal.
fn plain_relative(path: &str) -> Result<PathBuf, DisclosureError> {
    let outside = || DisclosureError::PathOutside {
        path: path.to_string(),
    };
    let p = Path::new(path);
    if path.is_empty() || p.is_absolute() || path.contains('\0') || path.contains('\\') {
        return Err(outside());
    }
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => return Err(outside()),
        }
    }
    if out.as_os_str().is_empty() {
        return Err(outside());
    }
    Ok(out)
}

/// One file of a skill: inside its folder only (no `..`, no absolute path, no symbolic
/// link on the way), a regular file of at most [`MAX_FILE_BYTES`], judged once opened
/// like readFile judges a workspace file: never a file of `workspace`'s state folder or
/// its configuration by device and inode ([`refuse_protected`]), and never a file with
/// more than one name.
pub fn read_file(skill: &Skill, path: &str, workspace: &Path) -> Result<Vec<u8>, DisclosureError> {
    let rel = plain_relative(path)?;
    let mut at = skill.dir.clone();
    for c in rel.components() {
        at.push(c);
        let meta = std::fs::symlink_metadata(&at).map_err(|_| DisclosureError::NoFile {
            skill: skill.name.clone(),
            path: path.to_string(),
        })?;
        if meta.file_type().is_symlink() {
            return Err(DisclosureError::Symlink {
                path: path.to_string(),
                link: at.strip_prefix(&skill.dir).unwrap_or(&at).to_path_buf(),
            });
        }
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
    let read_err = |source| DisclosureError::Read {
        path: path.to_string(),
        source,
    };
    let file = options.open(&at).map_err(read_err)?;
    let meta = file.metadata().map_err(read_err)?;
    if !meta.is_file() {
        return Err(DisclosureError::NoFile {
            skill: skill.name.clone(),
            path: path.to_string(),
        });
    }
    refuse_protected(workspace, path, &meta).map_err(|source| DisclosureError::Protected {
        skill: skill.name.clone(),
        path: path.to_string(),
        source,
    })?;
    if meta.nlink() > 1 {
        return Err(DisclosureError::HardLink {
            skill: skill.name.clone(),
            path: path.to_string(),
            links: meta.nlink(),
        });
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(DisclosureError::TooLarge {
            path: path.to_string(),
            size: meta.len(),
        });
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(DisclosureError::TooLarge {
            path: path.to_string(),
            size: bytes.len() as u64,
        });
    }
    Ok(bytes)
}

/// The answer of `GET /v1/skills/{name}/files/{path}`: UTF-8 text as `content`, anything
/// else base64 with `"encoding": "base64"`.
pub fn file_response(
    skill: &Skill,
    path: &str,
    workspace: &Path,
) -> Result<Value, DisclosureError> {
    let bytes = read_file(skill, path, workspace)?;
    let size = bytes.len();
    Ok(match String::from_utf8(bytes) {
        Ok(text) => json!({"skill": skill.name, "path": path, "size": size, "content": text}),
        Err(e) => {
            use base64::Engine;
            let b64 = base64::engine::general_purpose::STANDARD.encode(e.into_bytes());
            json!({"skill": skill.name, "path": path, "size": size, "encoding": "base64", "content": b64})
        }
    })
}

fn string_arg(tool: &'static str, args: &Value, key: &str) -> Result<String, DisclosureError> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| DisclosureError::BadArgs {
            tool,
            reason: format!("argument {key:?} (a string) is required"),
        })
}

/// `load_skill {name}`: the skill's body and file list.
pub fn load_skill(catalog: &Catalog, args: &Value) -> Result<Value, DisclosureError> {
    let name = string_arg(LOAD_SKILL, args, "name")?;
    let skill = catalog
        .get(&name)
        .ok_or(DisclosureError::UnknownSkill { name: name.clone() })?;
    let body = skill.read_body().map_err(|source| DisclosureError::Read {
        path: "SKILL.md".into(),
        source,
    })?;
    let files: Vec<String> = skill
        .list_files()
        .unwrap_or_default()
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let tools: Vec<String> = skill
        .tools
        .iter()
        .map(|t| ToolRef::new(&skill.name, &t.name).to_string())
        .collect();
    let body = body.replace(BASE_DIR_TOKEN, SKILL_DIR_VAR);
    Ok(
        json!({"name": skill.name, "description": skill.description, "body": body, "files": files, "tools": tools, "base_dir": SKILL_DIR_VAR}),
    )
}

/// A `run_skill_script` call: the skill and what the executor runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptCall {
    /// The skill.
    pub skill: String,
    /// The script (`scripts/...`) and its arguments.
    pub run: skillbox_protocol::methods::ScriptRun,
}

/// Most arguments of one `run_skill_script`.
pub const MAX_SCRIPT_ARGS: usize = 256;

/// `run_skill_script {name, script, args?: [..]}`: a regular file under the skill's
/// `scripts/` (a bare name is looked up there), reached without a symbolic link, and its
/// arguments (strings; numbers and booleans are written as text).
pub fn resolve_script(catalog: &Catalog, args: &Value) -> Result<ScriptCall, DisclosureError> {
    let name = string_arg(RUN_SKILL_SCRIPT, args, "name")?;
    let script = string_arg(RUN_SKILL_SCRIPT, args, "script")?;
    let skill = catalog
        .get(&name)
        .ok_or(DisclosureError::UnknownSkill { name: name.clone() })?;
    let rel = plain_relative(&script)?;
    let rel = if rel.starts_with("scripts") {
        rel
    } else {
        Path::new("scripts").join(rel)
    };
    let shown = rel.to_string_lossy().into_owned();
    let mut at = skill.dir.clone();
    for c in rel.components() {
        at.push(c);
        let meta = std::fs::symlink_metadata(&at).map_err(|_| DisclosureError::NoFile {
            skill: skill.name.clone(),
            path: shown.clone(),
        })?;
        if meta.file_type().is_symlink() {
            return Err(DisclosureError::Symlink {
                path: shown.clone(),
                link: at.strip_prefix(&skill.dir).unwrap_or(&at).to_path_buf(),
            });
        }
    }
    if !at.is_file() {
        return Err(DisclosureError::NoFile {
            skill: skill.name.clone(),
            path: shown,
        });
    }
    let script_args = match args.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) if items.len() <= MAX_SCRIPT_ARGS => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                Value::Number(n) => Ok(n.to_string()),
                Value::Bool(b) => Ok(b.to_string()),
                _ => Err(DisclosureError::BadArgs {
                    tool: RUN_SKILL_SCRIPT,
                    reason: "each of \"args\" is a string (a command-line argument)".into(),
                }),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(DisclosureError::BadArgs {
                tool: RUN_SKILL_SCRIPT,
                reason: format!(
                    "\"args\" is a list of at most {MAX_SCRIPT_ARGS} command-line arguments, e.g. [\"in.pdf\", \"out.pdf\"]"
                ),
            })
        }
    };
    Ok(ScriptCall {
        skill: skill.name.clone(),
        run: skillbox_protocol::methods::ScriptRun {
            path: shown,
            args: script_args,
        },
    })
}
