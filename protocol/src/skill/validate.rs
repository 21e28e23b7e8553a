//! Validation rules. Each rule pushes [`Diagnostic`]s naming the file, the field and what
//! would be valid. Errors make lenient loading skip the skill; warnings are spec
//! deviations that lenient loading keeps and `--strict` rejects.

use std::collections::HashSet;
use std::path::{Component, Path};

use super::diagnostics::Diagnostic;
use super::manifest::Manifest;
use super::model::{Skill, ToolEntry, DEFAULT_MAX_OUTPUT_BYTES};
use super::network::NetworkPattern;

/// Longest skill name (Agent Skills spec).
pub const MAX_NAME_LEN: usize = 64;
/// Longest description in characters (Agent Skills spec).
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Longest `compatibility` in characters (Agent Skills spec).
pub const MAX_COMPATIBILITY_CHARS: usize = 500;
/// Longest tool name.
pub const MAX_TOOL_NAME_LEN: usize = 64;
/// Allowed range of `timeout_ms`.
pub const TIMEOUT_MS_RANGE: (u64, u64) = (1, 3_600_000);
/// Allowed range of `memory_mb`.
pub const MEMORY_MB_RANGE: (u64, u64) = (16, 65_536);
/// Allowed range of `max_file_mb` a skill may declare (the operator's grant may go past).
pub const MAX_FILE_MB_RANGE: (u64, u64) = (1, 16_384);
/// Allowed range of `prestart` (processes kept started per tool).
pub const PRESTART_RANGE: (u64, u64) = (0, 8);
/// Allowed range of `max_output_bytes`.
pub const MAX_OUTPUT_BYTES_RANGE: (u64, u64) = (1024, 256 * DEFAULT_MAX_OUTPUT_BYTES);

mod names;

pub use names::{
    is_env_name, is_reserved_env, is_spec_skill_name, is_tool_name, is_usable_skill_name,
};

/// Checks the skill's identity after merging: name (charset, length, folder) and
/// description. `file` is the manifest that supplied each.
pub(crate) fn identity(
    dir: &Path,
    name: Option<&str>,
    name_file: &Path,
    description: Option<&str>,
    description_file: &Path,
    diags: &mut Vec<Diagnostic>,
) {
    let folder = dir.file_name().and_then(|f| f.to_str()).unwrap_or_default();
    match name {
        None => diags.push(Diagnostic::warning(
            name_file,
            "name",
            format!(
                "missing; required by the Agent Skills spec (the folder name {folder:?} is used)"
            ),
        )),
        Some(n) if !is_usable_skill_name(n) => diags.push(Diagnostic::error(
            name_file,
            "name",
            format!("{n:?} cannot be a skill name: use 1-64 of a-z, 0-9 and single hyphens"),
        )),
        Some(n) => {
            if !is_spec_skill_name(n) {
                diags.push(Diagnostic::warning(
                    name_file,
                    "name",
                    format!("{n:?}: use 1-64 characters of a-z, 0-9 and single hyphens, not at either end"),
                ));
            }
            if n != folder {
                diags.push(Diagnostic::warning(
                    name_file,
                    "name",
                    format!("{n:?} differs from its folder {folder:?}; rename one so they match"),
                ));
            }
        }
    }
    match description.map(str::trim) {
        None | Some("") => diags.push(Diagnostic::error(
            description_file,
            "description",
            "missing or empty; say in 1-1024 characters what the skill does and when to use it",
        )),
        Some(d) => {
            let n = d.chars().count();
            if n > MAX_DESCRIPTION_CHARS {
                diags.push(Diagnostic::warning(
                    description_file,
                    "description",
                    format!(
                        "{n} characters; the Agent Skills spec allows 1-{MAX_DESCRIPTION_CHARS}"
                    ),
                ));
            }
        }
    }
}

/// Checks everything one manifest file declares, other than identity.
pub(crate) fn manifest(file: &Path, dir: &Path, m: &Manifest, diags: &mut Vec<Diagnostic>) {
    let mut v = Rules { file, dir, diags };
    if let Some(c) = &m.compatibility {
        let n = c.chars().count();
        if n == 0 || n > MAX_COMPATIBILITY_CHARS {
            v.warn(
                "compatibility",
                format!("{n} characters; the Agent Skills spec allows 1-{MAX_COMPATIBILITY_CHARS}"),
            );
        }
    }
    if let Some(version) = &m.version {
        if semver::Version::parse(version).is_err() {
            v.error(
                "version",
                format!("{version:?} is not a semantic version such as 1.2.3"),
            );
        }
    }
    for (field, list) in [
        ("triggers", &m.triggers),
        ("anti_triggers", &m.anti_triggers),
    ] {
        for (i, t) in list.iter().flatten().enumerate() {
            if t.trim().is_empty() || t.chars().count() > 128 {
                v.error(&format!("{field}[{i}]"), "must be 1-128 characters of text");
            }
        }
    }
    if let Some(p) = &m.prerequisites {
        for (field, bins) in [
            ("prerequisites.bins", &p.bins),
            ("prerequisites.any_bins", &p.any_bins),
        ] {
            for (i, b) in bins.iter().enumerate() {
                if b.is_empty() || b.contains(['/', '\0']) || b.chars().any(char::is_whitespace) {
                    v.error(
                        &format!("{field}[{i}]"),
                        format!("{b:?}: give a program name looked up on PATH, like \"python3\""),
                    );
                }
            }
        }
        for (i, e) in p.env.iter().enumerate() {
            if !is_env_name(e) {
                v.error(
                    &format!("prerequisites.env[{i}]"),
                    format!("{e:?} is not an env name ([A-Za-z_][A-Za-z0-9_]*)"),
                );
            }
        }
    }
    v.permissions(m);
    v.limits(m);
    v.tools(m);
}

struct Rules<'a> {
    file: &'a Path,
    dir: &'a Path,
    diags: &'a mut Vec<Diagnostic>,
}

impl Rules<'_> {
    fn error(&mut self, field: &str, message: impl Into<String>) {
        self.diags
            .push(Diagnostic::error(self.file, field, message));
    }

    fn warn(&mut self, field: &str, message: impl Into<String>) {
        self.diags
            .push(Diagnostic::warning(self.file, field, message));
    }

    /// `permissions.secrets`: env names bound to valid host patterns, each named once and
    /// not also a plain `permissions.env` name.
    fn secrets(&mut self, m: &Manifest) {
        let env = m.permissions.env.as_deref().unwrap_or_default();
        let mut seen = std::collections::BTreeSet::new();
        for (i, s) in m.permissions.secrets.iter().flatten().enumerate() {
            let field = format!("permissions.secrets[{i}]");
            let name = &s.name;
            if !is_env_name(name) {
                self.error(
                    &field,
                    format!("name {name:?} is not an env name ([A-Za-z_][A-Za-z0-9_]*)"),
                );
            } else if is_reserved_env(name) {
                self.error(&field, format!("name {name:?} is reserved (set by skillbox or changes how programs load); choose another name"));
            } else if env.contains(name) {
                self.error(&field, format!("{name:?} is also in permissions.env, which would put its value in the tool's environment; keep it in permissions.secrets only"));
            } else if !seen.insert(name) {
                self.error(
                    &field,
                    format!("{name:?} is bound twice; list all its hosts in one entry"),
                );
            }
            if s.hosts.is_empty() {
                self.error(
                    &field,
                    format!(
                        "{name:?} is bound to no host; list the hosts that may receive it in hosts"
                    ),
                );
            }
            for (j, h) in s.hosts.iter().enumerate() {
                if let Err(e) = NetworkPattern::parse(h) {
                    self.error(&format!("{field}.hosts[{j}]"), e.to_string());
                }
            }
        }
    }

    /// `permissions.delegate`: skill names or `skill:tool`, never the skill itself.
    fn delegate(&mut self, m: &Manifest) {
        for (i, d) in m.permissions.delegate.iter().flatten().enumerate() {
            let field = format!("permissions.delegate[{i}]");
            let (skill, tool) = match d.split_once(':') {
                Some((s, t)) => (s, Some(t)),
                None => (d.as_str(), None),
            };
            let tool_ok = tool.is_none_or(is_tool_name);
            if !is_spec_skill_name(skill) || !tool_ok {
                self.error(&field, format!("{d:?} is not a skill name or skill:tool"));
            } else if m.name.as_deref() == Some(skill) {
                self.error(
                    &field,
                    format!("{d:?} is the skill itself; a skill calls its own tools directly"),
                );
            }
        }
    }

    fn permissions(&mut self, m: &Manifest) {
        for (i, e) in m.permissions.env.iter().flatten().enumerate() {
            let field = format!("permissions.env[{i}]");
            if !is_env_name(e) {
                self.error(
                    &field,
                    format!("{e:?} is not an env name ([A-Za-z_][A-Za-z0-9_]*)"),
                );
            } else if is_reserved_env(e) {
                self.error(&field, format!("{e:?} is reserved (set by skillbox or changes how programs load); choose another name"));
            }
        }
        for (i, n) in m.permissions.network.iter().flatten().enumerate() {
            if let Err(e) = NetworkPattern::parse(n) {
                self.error(&format!("permissions.network[{i}]"), e.to_string());
            }
        }
        self.secrets(m);
        self.delegate(m);
        if let Some(ws) = &m.permissions.workspace {
            let mut any_whole = false;
            for (i, g) in ws.read.iter().enumerate() {
                let field = format!("permissions.workspace.read[{i}]");
                if let Some(reason) = relative_path_problem(g) {
                    self.error(&field, format!("{g:?}: {reason}; give a glob relative to the workspace, like \"notes/**\""));
                } else if let Err(e) = globset::Glob::new(g) {
                    self.error(&field, format!("{g:?} is not a valid glob: {e}"));
                } else if covers_whole_workspace(std::slice::from_ref(g)) {
                    any_whole = true;
                    self.warn(
                        &field,
                        format!("{g:?} covers the whole workspace: {READ_EVERYTHING}"),
                    );
                }
            }
            if !any_whole && ws.read.len() > 1 && covers_whole_workspace(&ws.read) {
                self.warn(
                    "permissions.workspace.read",
                    format!(
                        "{:?} together cover the whole workspace: {READ_EVERYTHING}",
                        ws.read
                    ),
                );
            }
        }
    }

    fn limits(&mut self, m: &Manifest) {
        let e = &m.execution;
        self.range("execution.timeout_ms", e.timeout_ms, TIMEOUT_MS_RANGE);
        self.range("execution.memory_mb", e.memory_mb, MEMORY_MB_RANGE);
        self.range(
            "execution.max_output_bytes",
            e.max_output_bytes,
            MAX_OUTPUT_BYTES_RANGE,
        );
        self.range("execution.prestart", e.prestart, PRESTART_RANGE);
        self.range("execution.max_file_mb", e.max_file_mb, MAX_FILE_MB_RANGE);
    }

    fn range(&mut self, field: &str, value: Option<u64>, (lo, hi): (u64, u64)) {
        if let Some(v) = value {
            if v < lo || v > hi {
                self.error(field, format!("{v} is out of range; allowed {lo}-{hi}"));
            }
        }
    }

    fn tools(&mut self, m: &Manifest) {
        let mut seen = HashSet::new();
        for (i, t) in m.tools.iter().flatten().enumerate() {
            let f = |s: &str| format!("tools[{i}].{s}");
            if !is_tool_name(&t.name) {
                self.error(
                    &f("name"),
                    format!("{:?}: use 1-64 of a-z, 0-9 and _", t.name),
                );
            } else if !seen.insert(t.name.as_str()) {
                self.error(
                    &f("name"),
                    format!(
                        "{:?} is declared twice; tool names are unique in a skill",
                        t.name
                    ),
                );
            }
            self.range(&f("timeout_ms"), t.timeout_ms, TIMEOUT_MS_RANGE);
            match &t.entry {
                ToolEntry::Command { argv } => self.command(&f("command"), argv),
                ToolEntry::JsExport { main } => self.skill_file(&f("main"), main),
            }
            if !t.parameters.is_object() {
                self.error(
                    &f("parameters"),
                    "must be a JSON Schema object such as {\"type\": \"object\"}",
                );
            } else if let Err(e) = jsonschema::validator_for(&t.parameters) {
                self.error(
                    &f("parameters"),
                    format!("JSON Schema does not compile: {e}"),
                );
            }
            if let Some(schema) = &t.output_schema {
                if schema.get("type").and_then(serde_json::Value::as_str) != Some("object") {
                    self.error(
                        &f("output_schema"),
                        "must be a JSON Schema of an object, such as {\"type\": \"object\"} (the result's data)",
                    );
                } else if let Err(e) = jsonschema::validator_for(schema) {
                    self.error(
                        &f("output_schema"),
                        format!("JSON Schema does not compile: {e}"),
                    );
                }
            }
        }
    }

    fn command(&mut self, field: &str, argv: &[String]) {
        let Some(program) = argv.first() else {
            self.error(
                field,
                "empty; give an argv such as [\"python3\", \"scripts/tool.py\"]",
            );
            return;
        };
        if argv.iter().any(|a| a.contains('\0')) {
            self.error(field, "arguments cannot contain NUL bytes");
            return;
        }
        if program.is_empty() {
            self.error(&format!("{field}[0]"), "the program name is empty");
        } else if program.contains('/') && !program.starts_with('/') {
            self.skill_file(&format!("{field}[0]"), program);
        }
        for (i, arg) in argv.iter().enumerate().skip(1) {
            if arg.contains('/') && !arg.starts_with('/') && has_parent_component(arg) {
                self.error(&format!("{field}[{i}]"), format!("{arg:?} leaves the skill folder; relative paths stay inside it (no \"..\")"));
            }
        }
    }

    /// A path relative to the skill folder that must exist inside it, symlinks resolved.
    fn skill_file(&mut self, field: &str, rel: &str) {
        if let Some(reason) = relative_path_problem(rel) {
            self.error(
                field,
                format!("{rel:?}: {reason}; give a path inside the skill folder"),
            );
            return;
        }
        let (Ok(real), Ok(root)) = (self.dir.join(rel).canonicalize(), self.dir.canonicalize())
        else {
            self.error(field, format!("{rel:?} does not exist in the skill folder"));
            return;
        };
        if !real.starts_with(&root) {
            self.error(
                field,
                format!(
                    "{rel:?} resolves outside the skill folder (symlink); ship the file inside it"
                ),
            );
        } else if !real.is_file() {
            self.error(field, format!("{rel:?} is not a regular file"));
        }
    }
}

/// The end of the warning on a `workspace.read` that covers the whole workspace.
const READ_EVERYTHING: &str = "the skill asks to read every workspace file (the core's \
     state folder and skillbox.toml stay refused); declare only the folders it needs, like \
     \"notes/**\"";

/// Workspace paths no narrow glob covers all of: nested, hidden, with and without an
/// extension. A set of globs that matches every one reads, in effect, every file below
/// the workspace's top level (`**`, `**/*`, `*/**`, `./**`).
const ANY_PATHS: [&str; 4] = ["x/y", "q/r/s.txt", ".h/.k", "a b/c-d/e_f.G"];

/// Whether `globs` together match every path of [`ANY_PATHS`], read as the core's readFile
/// reads them (`*` does not cross `/`, a leading `./` is dropped like the path's).
fn covers_whole_workspace(globs: &[String]) -> bool {
    let mut set = globset::GlobSetBuilder::new();
    for g in globs {
        let mut g = g.as_str();
        while let Some(rest) = g.strip_prefix("./") {
            g = rest.trim_start_matches('/');
        }
        match globset::GlobBuilder::new(g).literal_separator(true).build() {
            Ok(glob) => {
                set.add(glob);
            }
            Err(_) => continue,
        }
    }
    set.build()
        .is_ok_and(|set| ANY_PATHS.iter().all(|p| set.is_match(p)))
}

fn has_parent_component(p: &str) -> bool {
    Path::new(p)
        .components()
        .any(|c| matches!(c, Component::ParentDir))
}

/// Why `p` is not a clean relative path (empty, absolute, `..`), if it is not.
pub fn relative_path_problem(p: &str) -> Option<&'static str> {
    if p.is_empty() {
        Some("empty")
    } else if p.contains('\0') {
        Some("contains a NUL byte")
    } else if p.starts_with('/') {
        Some("absolute paths are not allowed")
    } else if has_parent_component(p) {
        Some("\"..\" is not allowed")
    } else {
        None
    }
}

#[cfg(test)]
mod tests;

/// Advice `skill validate` gives beside its findings (it fails nothing, even with
/// `--strict`): each `permissions.env` name that looks like a credential reaches the
/// tool as its value, where binding it in `permissions.secrets` would not.
pub fn advice(skill: &Skill) -> Vec<String> {
    (skill.permissions.env.iter())
        .filter(|e| looks_like_credential(e))
        .map(|e| {
            format!(
                "permissions.env: {e:?} reaches the tool's environment as its value, which the \
                 tool can send to any host it may reach; if it is a key for an API, bind it to \
                 that API's hosts in permissions.secrets so the tool sees only a placeholder \
                 (docs/permissions.md)"
            )
        })
        .collect()
}

/// Whether an env name looks like a credential (`*KEY`, `*TOKEN*`, `*SECRET*`,
/// `*PASSWORD*`): `skill validate` suggests binding those with `permissions.secrets`.
pub fn looks_like_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.ends_with("KEY")
        || ["TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY"]
            .iter()
            .any(|w| upper.contains(w))
}
