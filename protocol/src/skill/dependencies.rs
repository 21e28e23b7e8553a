//! What a skill needs installed beside it, and the environment that makes: its Python
//! requirements (`deps.rs`) and its Node dependencies (`node_deps.rs`), completed by the
//! operator's settings ([`DepsPolicy`]) and named by one digest. One environment per
//! digest holds both (docs/sandbox.md, "Dependencies").

use serde::{Deserialize, Serialize};

use super::deps::{Requirement, Requirements};
use super::node_deps::NodeDeps;

/// A skill's dependencies: what it declares (read at load), what the operator adds, and
/// the environment they make.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependencies {
    /// The requirements, each with the file it came from (`[grants]` for the operator's).
    pub requirements: Vec<Requirement>,
    /// Lines of its files that are not requirements skillbox installs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// Whether source distributions may be built (the operator's grant).
    #[serde(default)]
    pub allow_source: bool,
    /// The operator's pins of what the requirements leave open (`[deps] constraints` then
    /// `[grants.<skill>] constraints`), given to pip as a constraints file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<String>,
    /// Its Node dependencies (`package.json`, `package-lock.json`), when it has some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeDeps>,
    /// The environment's name, set by the core: a SHA-256 of the requirements, the
    /// constraints, the index and `allow_source`, then of the Node manifest, its lock, the
    /// registry and the scripts policy. `None` with nothing to install.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// The operator's settings that complete a skill's dependencies (`[deps]` and its
/// `[grants.<skill>]`).
#[derive(Debug, Clone, Copy)]
pub struct DepsPolicy<'a> {
    /// Requirements added to what the skill declares.
    pub granted: &'a [String],
    /// Whether source distributions may be built.
    pub allow_source: bool,
    /// The Python package index.
    pub index_url: &'a str,
    /// Whether the Node packages' install scripts run.
    pub allow_scripts: bool,
    /// The npm registry.
    pub npm_registry: &'a str,
}

impl Dependencies {
    /// What a skill folder declares: its requirements, and its Node dependencies with
    /// what was refused in its `package.json`.
    pub fn declared(read: Requirements, node: (Option<NodeDeps>, Vec<String>)) -> Self {
        let mut problems = read.problems;
        problems.extend(node.1);
        Self {
            requirements: read.requirements,
            problems,
            allow_source: false,
            constraints: Vec::new(),
            node: node.0,
            digest: None,
        }
    }

    /// Whether there is nothing to install.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty() && self.node.is_none()
    }

    /// The specifiers, in order.
    pub fn specs(&self) -> Vec<String> {
        self.requirements.iter().map(|r| r.spec.clone()).collect()
    }

    /// Adds the operator's requirements and constraints, and names the environment after
    /// them and the rest of `policy`.
    pub fn complete(&mut self, policy: DepsPolicy<'_>, constraints: Vec<String>) {
        let mut all = Requirements {
            requirements: std::mem::take(&mut self.requirements),
            problems: Vec::new(),
        };
        all.add(policy.granted.iter().cloned(), "[grants]");
        self.problems.extend(all.problems);
        self.requirements = all.requirements;
        self.allow_source = policy.allow_source;
        self.constraints = constraints;
        if let Some(node) = self.node.as_mut() {
            node.allow_scripts = policy.allow_scripts;
            node.registry = policy.npm_registry.to_string();
        }
        self.digest = (!self.is_empty()).then(|| {
            let mut text = String::new();
            if !self.requirements.is_empty() {
                text = self.python_text(policy.index_url);
            }
            // The Node part after a separator line no requirement can be: a skill with
            // Python requirements only keeps the name it had before Node builds existed.
            if let Some(node) = &self.node {
                text.push_str("--node--\n");
                text.push_str(&node.digest_text());
            }
            let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
            digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
        });
    }

    /// The Python part of the digest's text.
    fn python_text(&self, index_url: &str) -> String {
        let mut text = format!("{index_url}\n{}\n", self.allow_source);
        for spec in self.specs() {
            text.push_str(&spec);
            text.push('\n');
        }
        // Constraints after a separator line no requirement can be: a constraint changes
        // the environment, but a build without any keeps its old name.
        if !self.constraints.is_empty() {
            text.push_str("--constraints--\n");
            for c in &self.constraints {
                text.push_str(c);
                text.push('\n');
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow_scripts: bool) -> DepsPolicy<'static> {
        DepsPolicy {
            granted: &[],
            allow_source: false,
            index_url: "https://pypi.org/simple",
            allow_scripts,
            npm_registry: "https://registry.npmjs.org/",
        }
    }

    fn node() -> NodeDeps {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("package.json"),
            r#"{"name": "s", "dependencies": {"left-pad": "^1.3.0"}}"#,
        )
        .unwrap();
        super::super::node_deps::read_node_deps(dir.path())
            .0
            .unwrap()
    }

    #[test]
    fn a_python_only_environment_keeps_its_name_and_node_changes_it() {
        let python = Requirements {
            requirements: vec![Requirement {
                spec: "six==1.16.0".into(),
                source: "requirements.txt".into(),
            }],
            problems: Vec::new(),
        };
        let mut only = Dependencies::declared(python.clone(), (None, Vec::new()));
        only.complete(policy(false), Vec::new());
        // The name Python-only environments had before Node builds existed.
        let text = "https://pypi.org/simple\nfalse\nsix==1.16.0\n";
        let old = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
        let old: String = old.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(only.digest.as_deref(), Some(old.as_str()));

        let mut both = Dependencies::declared(python, (Some(node()), Vec::new()));
        both.complete(policy(false), Vec::new());
        assert_ne!(both.digest, only.digest);
        let mut scripts = both.clone();
        scripts.complete(policy(true), Vec::new());
        assert_ne!(
            scripts.digest, both.digest,
            "the scripts policy names it too"
        );

        let mut node_only = Dependencies::declared(Requirements::default(), (Some(node()), vec![]));
        node_only.complete(policy(false), Vec::new());
        assert!(node_only.digest.is_some());
        assert_eq!(
            node_only.node.as_ref().map(|n| n.registry.as_str()),
            Some("https://registry.npmjs.org/")
        );
    }
}
