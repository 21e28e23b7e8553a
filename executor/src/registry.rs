//! The skills this executor can run, loaded from its skills root, with each tool's
//! argument schema compiled once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use skillbox_protocol::methods::ToolInfo;
use skillbox_protocol::skill::{discover, DiscoveryOptions, Skill, Skipped, Tool};

/// A skill and its compiled validators.
#[derive(Debug)]
pub struct RegisteredSkill {
    /// The skill.
    pub skill: Skill,
    validators: HashMap<String, jsonschema::Validator>,
}

impl RegisteredSkill {
    /// The tool and its validator.
    pub fn tool(&self, name: &str) -> Option<(&Tool, &jsonschema::Validator)> {
        let tool = self.skill.tool(name)?;
        Some((tool, self.validators.get(name)?))
    }
}

/// Runnable skills by name.
#[derive(Debug, Default)]
pub struct Registry {
    root: PathBuf,
    skills: HashMap<String, Arc<RegisteredSkill>>,
    /// Folders that could not be loaded.
    pub skipped: Vec<Skipped>,
}

impl Registry {
    /// Loads every skill under `root`.
    pub fn load(root: &Path) -> Self {
        let catalog = discover(&[root.to_path_buf()], DiscoveryOptions::default());
        let mut skipped = catalog.skipped;
        let mut skills = HashMap::new();
        for skill in catalog.skills {
            let mut validators = HashMap::new();
            let mut broken = None;
            for tool in &skill.tools {
                match jsonschema::validator_for(&tool.parameters) {
                    Ok(v) => {
                        validators.insert(tool.name.clone(), v);
                    }
                    Err(e) => {
                        broken = Some(format!("tool {}: schema does not compile: {e}", tool.name))
                    }
                }
            }
            if let Some(reason) = broken {
                skipped.push(Skipped {
                    dir: skill.dir.clone(),
                    diagnostics: vec![skillbox_protocol::skill::Diagnostic::error(
                        &skill.dir, "tools", reason,
                    )],
                });
                continue;
            }
            skills.insert(
                skill.name.clone(),
                Arc::new(RegisteredSkill { skill, validators }),
            );
        }
        Self {
            root: root.to_path_buf(),
            skills,
            skipped,
        }
    }

    /// The skills root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A skill by name.
    pub fn skill(&self, name: &str) -> Option<Arc<RegisteredSkill>> {
        self.skills.get(name).cloned()
    }

    /// Number of runnable skills.
    pub fn len(&self) -> usize {
        self.skills.len()
    }

    /// Whether no skill is runnable.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// Every tool, sorted by full name.
    pub fn tools(&self) -> Vec<ToolInfo> {
        let mut out: Vec<ToolInfo> = self
            .skills
            .values()
            .flat_map(|s| {
                s.skill.tools.iter().map(|t| ToolInfo {
                    name: format!("{}:{}", s.skill.name, t.name),
                    description: t.description.clone(),
                    parameters: t.parameters.clone(),
                    security: t.security,
                })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}
