//! Loads one skill folder: finds its manifests, parses each, validates, merges by
//! precedence, and either yields a [`Skill`] (with warnings) or the reasons it was skipped.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::diagnostics::{Diagnostic, Severity};
use super::loaders::{package_json, skill_md, skill_yaml};
use super::manifest::{Manifest, Manifests};
use super::model::{BodyRef, Execution, ManifestFormat, Permissions, Routing, Skill};
use super::validate;

/// A skill folder that could not be loaded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skipped {
    /// The folder.
    pub dir: PathBuf,
    /// Every finding, errors first.
    pub diagnostics: Vec<Diagnostic>,
}

impl Skipped {
    /// The first error, for one-line reports.
    pub fn reason(&self) -> String {
        self.diagnostics
            .iter()
            .find(|d| d.severity == Severity::Error)
            .map_or_else(|| "unknown".into(), ToString::to_string)
    }
}

/// The result of loading one folder.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadOutcome {
    /// The folder holds a usable skill (its warnings are on it).
    Loaded(Box<Skill>),
    /// The folder holds a skill that cannot be used.
    Skipped(Skipped),
    /// The folder holds no manifest.
    NotASkill,
}

/// Which manifests a folder holds, lowest precedence first.
pub fn manifest_files(dir: &Path) -> Vec<ManifestFormat> {
    let mut out = Vec::new();
    if dir.join("SKILL.md").is_file() {
        out.push(ManifestFormat::SkillMd);
    }
    let pkg = dir.join("package.json");
    if pkg.is_file() && package_json::has_skill_field(&pkg) {
        out.push(ManifestFormat::PackageJson);
    }
    if dir.join("skill.yaml").is_file() {
        out.push(ManifestFormat::SkillYaml);
    }
    out
}

/// Loads the skill in `dir` leniently (docs/skill-format.md).
pub fn load_skill(dir: &Path) -> LoadOutcome {
    let formats = manifest_files(dir);
    if formats.is_empty() {
        return LoadOutcome::NotASkill;
    }
    let symlinked = symlinked_manifests(dir, &formats);
    if !symlinked.is_empty() {
        return LoadOutcome::Skipped(Skipped {
            dir: dir.to_path_buf(),
            diagnostics: symlinked,
        });
    }
    let mut diags = Vec::new();
    let mut manifests = Manifests::default();
    let mut body = None;
    let mut unreadable = false;
    for format in formats {
        let file = dir.join(format.file_name());
        let parsed = match format {
            ManifestFormat::SkillMd => skill_md::load(&file, &mut diags).map(|md| {
                body = Some(BodyRef {
                    path: file.clone(),
                    offset: md.body_offset,
                });
                md.manifest
            }),
            ManifestFormat::SkillYaml => skill_yaml::load(&file),
            ManifestFormat::PackageJson => package_json::load(&file),
        };
        match parsed {
            Ok(m) => {
                validate::manifest(&file, dir, &m, &mut diags);
                manifests.push(format, m);
            }
            Err(d) => {
                unreadable = true;
                diags.push(d);
            }
        }
    }
    // A manifest that did not parse may hold the name or description: checking identity
    // without it would report them missing (against a file that may not even exist).
    if unreadable {
        diags.sort_by_key(|d| std::cmp::Reverse(d.severity));
        return LoadOutcome::Skipped(Skipped {
            dir: dir.to_path_buf(),
            diagnostics: diags,
        });
    }
    let merged = manifests.merged();
    let file_of = |pick: &dyn Fn(&super::manifest::Manifest) -> bool| {
        let format = manifests
            .by_precedence
            .iter()
            .find(|(_, m)| pick(m))
            .or(manifests.by_precedence.first())
            .map_or(ManifestFormat::SkillMd, |(f, _)| *f);
        dir.join(format.file_name())
    };
    validate::identity(
        dir,
        merged.name.as_deref(),
        &file_of(&|m| m.name.is_some()),
        merged.description.as_deref(),
        &file_of(&|m| m.description.is_some()),
        &mut diags,
    );
    conflicting_names(dir, &manifests, &mut diags);
    diags.sort_by_key(|d| std::cmp::Reverse(d.severity));
    if diags.iter().any(|d| d.severity == Severity::Error) {
        return LoadOutcome::Skipped(Skipped {
            dir: dir.to_path_buf(),
            diagnostics: diags,
        });
    }
    LoadOutcome::Loaded(Box::new(build_skill(dir, &manifests, merged, body, diags)))
}

/// Builds the loaded skill from its merged manifest, filling each field left out with its
/// default (the folder's name for the name).
fn build_skill(
    dir: &Path,
    manifests: &Manifests,
    merged: Manifest,
    body: Option<BodyRef>,
    diags: Vec<Diagnostic>,
) -> Skill {
    let folder = dir
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let defaults = Execution::default();
    Skill {
        name: merged.name.unwrap_or(folder),
        version: merged.version,
        description: merged.description.unwrap_or_default(),
        dir: dir.to_path_buf(),
        formats: manifests.formats(),
        license: merged.license,
        compatibility: merged.compatibility,
        allowed_tools: merged.allowed_tools.unwrap_or_default(),
        routing: Routing {
            triggers: merged.triggers.unwrap_or_default(),
            anti_triggers: merged.anti_triggers.unwrap_or_default(),
            cost_hint: merged.cost_hint,
            parallel_safe: merged.parallel_safe.unwrap_or(false),
            always: merged.always.unwrap_or(false),
        },
        prerequisites: merged.prerequisites.unwrap_or_default(),
        permissions: Permissions {
            env: merged.permissions.env.unwrap_or_default(),
            network: merged.permissions.network.unwrap_or_default(),
            workspace: merged.permissions.workspace.unwrap_or_default(),
            secrets: merged.permissions.secrets.unwrap_or_default(),
            delegate: merged.permissions.delegate.unwrap_or_default(),
        },
        execution: Execution {
            timeout_ms: merged.execution.timeout_ms.unwrap_or(defaults.timeout_ms),
            memory_mb: merged.execution.memory_mb.unwrap_or(defaults.memory_mb),
            max_output_bytes: merged
                .execution
                .max_output_bytes
                .unwrap_or(defaults.max_output_bytes),
            sandbox: merged.execution.sandbox.unwrap_or(defaults.sandbox),
            prestart: merged.execution.prestart.unwrap_or(defaults.prestart),
            max_file_mb: merged.execution.max_file_mb.unwrap_or(defaults.max_file_mb),
            loopback: merged.execution.loopback.unwrap_or(defaults.loopback),
            unix_sockets: (merged.execution.unix_sockets).unwrap_or(defaults.unix_sockets),
        },
        tools: merged.tools.unwrap_or_default(),
        body,
        dependencies: super::model::Dependencies::declared(
            super::deps::read_requirements(dir),
            super::node_deps::read_node_deps(dir),
        ),
        warnings: diags,
    }
}

/// An error for each manifest that is a symlink (it could point outside the skill).
fn symlinked_manifests(dir: &Path, formats: &[ManifestFormat]) -> Vec<Diagnostic> {
    formats
        .iter()
        .map(|f| dir.join(f.file_name()))
        .filter(|p| p.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()))
        .map(|p| {
            Diagnostic::error(
                &p,
                "-",
                "a manifest cannot be a symlink (it could point outside the skill); ship the file itself",
            )
        })
        .collect()
}

/// Two manifests naming the skill differently is a warning: the higher one wins.
fn conflicting_names(dir: &Path, manifests: &Manifests, diags: &mut Vec<Diagnostic>) {
    let named: Vec<_> = manifests
        .by_precedence
        .iter()
        .filter_map(|(f, m)| m.name.as_deref().map(|n| (*f, n)))
        .collect();
    if let Some((winner, name)) = named.first() {
        for (f, other) in named.iter().skip(1).filter(|(_, n)| n != name) {
            diags.push(Diagnostic::warning(
                dir.join(f.file_name()),
                "name",
                format!(
                    "{other:?} differs from {name:?} in {}, which takes precedence; make them equal",
                    winner.file_name()
                ),
            ));
        }
    }
}

/// The verdict of validating one folder.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Validation {
    /// The folder.
    pub dir: PathBuf,
    /// The skill's name, when it loaded.
    pub name: Option<String>,
    /// Every finding.
    pub diagnostics: Vec<Diagnostic>,
    /// Whether the folder passes in the mode asked for.
    pub passed: bool,
}

/// Validates one folder. Lenient: only errors fail it. Strict: warnings fail it too.
pub fn validate_skill(dir: &Path, strict: bool) -> Validation {
    let (name, diagnostics, passed) = match load_skill(dir) {
        LoadOutcome::Loaded(skill) => {
            let passed = !strict || skill.warnings.is_empty();
            (Some(skill.name), skill.warnings, passed)
        }
        LoadOutcome::Skipped(s) => (None, s.diagnostics, false),
        LoadOutcome::NotASkill => (
            None,
            vec![Diagnostic::error(
                dir,
                "-",
                "not a skill: add a SKILL.md, a skill.yaml, or a package.json with an \"owliabot\" field",
            )],
            false,
        ),
    };
    Validation {
        dir: dir.to_path_buf(),
        name,
        diagnostics,
        passed,
    }
}
