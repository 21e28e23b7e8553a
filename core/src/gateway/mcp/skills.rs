//! Skills over MCP (extension `io.modelcontextprotocol/skills`, SEP-2640): `skills/list`
//! and `skills/get` give each skill's `skill://<name>/SKILL.md` uri, its frontmatter and
//! every file with its SHA-256 and size; `resources/list` and `resources/read` serve the
//! files (each skill's `SKILL.md` listed, verbatim).
//!
//! The digests are the installed ones: the files are hashed as the package digest hashes
//! them, and for a skill in the install lock the listing must hash to the lock's digest,
//! else the skill is refused as changed since its install.

use std::path::Path;

use serde_json::{json, Map, Value};
use skillbox_protocol::skill::{self, frontmatter, nesting, InstallLock, Skill};

use super::errors::McpError;
use crate::auth::Caller;
use crate::contexts::disclosure::{self, DisclosureError};
use crate::gateway::Gateway;

/// The extension's identifier.
pub const EXTENSION: &str = "io.modelcontextprotocol/skills";
/// The uri scheme of skill files.
const SCHEME: &str = "skill://";
/// The instructions file every listed skill has.
const SKILL_MD: &str = "SKILL.md";

/// The uri of `path` in skill `name`.
pub fn uri(name: &str, path: &str) -> String {
    format!("{SCHEME}{name}/{path}")
}

/// The skill name and file path of a `skill://` uri.
fn parse_uri(uri: &str) -> Option<(&str, &str)> {
    uri.strip_prefix(SCHEME)?
        .split_once('/')
        .filter(|(name, path)| !name.is_empty() && !path.is_empty())
}

/// The frontmatter of `SKILL.md` text as JSON (empty when it has none or it is not YAML).
fn frontmatter_of(text: &str) -> Map<String, Value> {
    frontmatter::split(text)
        .ok()
        .filter(|s| nesting::check_yaml(s.yaml, nesting::MAX_MANIFEST_DEPTH).is_ok())
        .and_then(|s| serde_norway::from_str::<Value>(s.yaml).ok())
        .and_then(|v| match v {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_default()
}

/// Whether `skill` is served as a SEP-2640 skill: it has a `SKILL.md`.
fn has_skill_md(skill: &Skill) -> bool {
    skill.dir.join(SKILL_MD).is_file()
}

/// One skill: uri, frontmatter (name and description always present) and its files.
fn describe(
    skill: &Skill,
    workspace: &Path,
    lock: Option<&InstallLock>,
) -> Result<Value, McpError> {
    let text = read(skill, SKILL_MD, workspace)?;
    let mut fm = frontmatter_of(&String::from_utf8_lossy(&text));
    fm.entry("name")
        .or_insert_with(|| skill.name.clone().into());
    fm.entry("description")
        .or_insert_with(|| skill.description.clone().into());
    Ok(json!({
        "uri": uri(&skill.name, SKILL_MD),
        "frontmatter": fm,
        "resources": manifest(skill, lock)?,
    }))
}

/// Every file of `skill` with `sha256:<hex>` and size, as the package digest lists them.
fn manifest(skill: &Skill, lock: Option<&InstallLock>) -> Result<Vec<Value>, McpError> {
    let locked = lock.and_then(|l| l.get(&skill.name));
    let changed = |why: String| match locked {
        Some(_) => McpError::NotAsInstalled {
            skill: skill.name.clone(),
            why,
        },
        None => McpError::FilesUnlisted {
            skill: skill.name.clone(),
            why,
        },
    };
    let digest = skill::package_digest(&skill.dir).map_err(|e| changed(e.to_string()))?;
    if let Some(locked) = locked {
        if digest.prefixed() != locked.digest {
            return Err(changed(format!(
                "its files hash to {}, the install lock records {}",
                digest.prefixed(),
                locked.digest
            )));
        }
    }
    digest
        .files
        .iter()
        .map(|f| {
            let size = std::fs::symlink_metadata(skill.dir.join(Path::new(&f.path)))
                .map_err(|e| changed(format!("{}: {e}", f.path)))?
                .len();
            Ok(json!({
                "uri": uri(&skill.name, &f.path),
                "digest": format!("sha256:{}", f.sha256),
                "size": size,
            }))
        })
        .collect()
}

/// A file of `skill` (inside its folder, no links, within the disclosure size limit, never
/// a file of the core's state folder: [`disclosure::read_file`], as the REST route).
fn read(skill: &Skill, path: &str, workspace: &Path) -> Result<Vec<u8>, McpError> {
    disclosure::read_file(skill, path, workspace).map_err(|e| match e {
        DisclosureError::Protected { .. } | DisclosureError::HardLink { .. } => {
            McpError::ResourceRefused {
                uri: uri(&skill.name, path),
                reason: e.to_string(),
            }
        }
        _ => McpError::UnknownResource {
            uri: uri(&skill.name, path),
        },
    })
}

/// A skill `skills/list` cannot describe: listed with its uri, name and description and
/// the reason in `error`, so one bad folder does not hide the others.
fn unlisted(skill: &Skill, e: &McpError) -> Value {
    json!({
        "uri": uri(&skill.name, SKILL_MD),
        "frontmatter": {"name": skill.name, "description": skill.description},
        "resources": [],
        "error": e.to_string(),
    })
}

/// The skills served to `caller` (a bot's own skills), sorted by name.
fn served(gw: &Gateway, caller: &Caller) -> Vec<Skill> {
    let catalog = gw.skills.load.catalog();
    let mut out: Vec<Skill> = catalog
        .skills
        .iter()
        .filter(|s| caller.may_use_skill(&s.name))
        .filter(|s| has_skill_md(s))
        .cloned()
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Runs `f` off the async workers (it reads and hashes files).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, McpError> + Send + 'static,
) -> Result<T, McpError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| McpError::Internal(e.to_string()))?
}

/// `skills/list`.
pub async fn list(gw: &Gateway, caller: &Caller) -> Result<Value, McpError> {
    let skills = served(gw, caller);
    let lock = InstallLock::read(&gw.skills_root).ok().flatten();
    let workspace = gw.workspace();
    blocking(move || {
        let listed: Vec<Value> = skills
            .iter()
            .map(|s| describe(s, &workspace, lock.as_ref()).unwrap_or_else(|e| unlisted(s, &e)))
            .collect();
        Ok(json!({ "skills": listed }))
    })
    .await
}

/// `skills/get {uri}`: an unknown uri is -32602.
pub async fn get(
    gw: &Gateway,
    caller: &Caller,
    params: &Map<String, Value>,
) -> Result<Value, McpError> {
    let Some(asked) = params.get("uri").and_then(Value::as_str) else {
        return Err(McpError::BadParams(
            "skills/get needs \"uri\" (a string)".into(),
        ));
    };
    let skill = parse_uri(asked)
        .filter(|(_, path)| *path == SKILL_MD)
        .and_then(|(name, _)| served(gw, caller).into_iter().find(|s| s.name == name))
        .ok_or_else(|| McpError::UnknownSkill {
            uri: asked.to_string(),
        })?;
    let lock = InstallLock::read(&gw.skills_root).ok().flatten();
    let workspace = gw.workspace();
    blocking(move || Ok(json!({ "skill": describe(&skill, &workspace, lock.as_ref())? }))).await
}

/// `resources/list`: each skill's `SKILL.md`.
pub async fn list_resources(gw: &Gateway, caller: &Caller) -> Result<Value, McpError> {
    let resources: Vec<Value> = served(gw, caller)
        .iter()
        .map(|s| {
            json!({
                "uri": uri(&s.name, SKILL_MD),
                "name": format!("{}/{SKILL_MD}", s.name),
                "description": s.description,
                "mimeType": "text/markdown",
            })
        })
        .collect();
    Ok(json!({ "resources": resources }))
}

/// `resources/read {uri}`: a file of a skill, verbatim (text, or base64 `blob` when it is
/// not UTF-8).
pub async fn read_resource(
    gw: &Gateway,
    caller: &Caller,
    params: &Map<String, Value>,
) -> Result<Value, McpError> {
    let Some(asked) = params.get("uri").and_then(Value::as_str) else {
        return Err(McpError::BadParams(
            "resources/read needs \"uri\" (a string)".into(),
        ));
    };
    if asked.starts_with(super::context_files::SCHEME) {
        return super::context_files::read(gw, caller, asked).await;
    }
    let unknown = || McpError::UnknownResource {
        uri: asked.to_string(),
    };
    let (name, path) = parse_uri(asked).ok_or_else(unknown)?;
    let skill = served(gw, caller)
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(unknown)?;
    let path = path.to_string();
    let asked = asked.to_string();
    let workspace = gw.workspace();
    blocking(move || {
        let bytes = read(&skill, &path, &workspace)?;
        let mime = if path.ends_with(".md") {
            "text/markdown"
        } else {
            "text/plain"
        };
        let content = match String::from_utf8(bytes) {
            Ok(text) => json!({"uri": asked, "mimeType": mime, "text": text}),
            Err(e) => {
                use base64::Engine;
                let blob = base64::engine::general_purpose::STANDARD.encode(e.into_bytes());
                json!({"uri": asked, "mimeType": "application/octet-stream", "blob": blob})
            }
        };
        Ok(json!({ "contents": [content] }))
    })
    .await
}
