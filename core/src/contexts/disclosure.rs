//! Progressive disclosure (the agent-skills seed): an agent sees names and descriptions
//! first, reads a skill's body with the built-in tool `load_skill`, one reference file
//! with `GET /v1/skills/{name}/files/{path}`, and runs a script with `run_skill_script`.
//!
//! `run_skill_script` runs only a script under `scripts/` that a declared tool of the skill
//! already runs (its `command` names the file): the call is then that tool's call, through
//! the dispatcher, with the tool's sandbox, limits, permissions and approvals. A script no
//! tool declares is refused with what to do, so the built-in never becomes a way around
//! the manifest.

use skillbox_protocol::ToolRef;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use serde_json::{json, Value};
use skillbox_protocol::result::ErrorKind;
use skillbox_protocol::skill::{Catalog, Skill, ToolEntry};

use crate::state::protected::{refuse_protected, ProtectedError};

/// The built-in tool that returns a skill's instructions.
pub const LOAD_SKILL: &str = skillbox_protocol::Target::LOAD_SKILL;
/// The built-in tool that runs a script of a skill through the tool that declares it.
pub const RUN_SKILL_SCRIPT: &str = skillbox_protocol::Target::RUN_SKILL_SCRIPT;
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
    /// The script is not run by any declared tool of the skill.
    #[error("{script:?} is not run by any declared tool of skill {skill:?}; run_skill_script only runs a script under scripts/ that a tool in the skill's manifest runs, so it gets that tool's sandbox, limits and approvals: declare a tool whose command runs it")]
    UndeclaredScript {
        /// The skill.
        skill: String,
        /// The script asked for.
        script: String,
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
            | DisclosureError::HardLink { .. }
            | DisclosureError::UndeclaredScript { .. } => ErrorKind::PermissionDenied,
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

/// The built-in tools as `GET /v1/tools` lists them; `name` is an enum of `available`.
pub fn builtin_tools(available: &[String]) -> Vec<Value> {
    vec![
        json!({
            "name": LOAD_SKILL,
            "description": "Read a skill's instructions (the body of its SKILL.md) and its file list.",
            "parameters": {
                "type": "object",
                "properties": {"name": {"type": "string", "enum": available}},
                "required": ["name"],
                "additionalProperties": false
            },
            "security": "read",
            "builtin": true,
        }),
        json!({
            "name": RUN_SKILL_SCRIPT,
            "description": "Run a script under a skill's scripts/ folder through the declared tool that runs it (same sandbox and approvals).",
            "parameters": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "enum": available},
                    "script": {"type": "string", "description": "path under scripts/, e.g. scripts/price.py"},
                    "args": {"type": "object"}
                },
                "required": ["name", "script"],
                "additionalProperties": false
            },
            "security": "read",
            "builtin": true,
        }),
    ]
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
    Ok(
        json!({"name": skill.name, "description": skill.description, "body": body, "files": files, "tools": tools}),
    )
}

/// The skill a built-in's arguments name (`name`), if they name one.
pub fn named_skill(args: &Value) -> Option<&str> {
    args.get("name").and_then(Value::as_str)
}

/// `run_skill_script {name, script, args?}`: the tool whose command runs the script
/// (under `scripts/`), and the arguments to call it with.
pub fn resolve_script(
    catalog: &Catalog,
    args: &Value,
) -> Result<(ToolRef, Value), DisclosureError> {
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
    let tool = skill.tools.iter().find(|t| match &t.entry {
        ToolEntry::Command { argv } => argv
            .iter()
            .any(|a| plain_relative(a).is_ok_and(|p| p == rel)),
        ToolEntry::JsExport { .. } => false,
    });
    let Some(tool) = tool else {
        return Err(DisclosureError::UndeclaredScript {
            skill: name,
            script: rel.to_string_lossy().into_owned(),
        });
    };
    let call_args = args.get("args").cloned().unwrap_or_else(|| json!({}));
    Ok((ToolRef::new(&skill.name, &tool.name), call_args))
}
