//! The Python dependencies a skill declares, from where published skills put them:
//! `requirements.txt` (at its root or in `scripts/`), `pyproject.toml` (`[project]
//! dependencies`) and PEP 723 inline metadata of its scripts (`# /// script` blocks). The
//! operator adds more with `[grants.<skill>] requirements`. docs/skill-format.md.
//!
//! Only requirement specifiers are taken (`name[extras] <op> version ; marker`, with
//! `--hash=sha256:...` pins): options that choose another index, include other files or
//! install from a path or URL are refused, since the operator's index is the build's only
//! network.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Where one requirement was declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requirement {
    /// The specifier as written (continuations joined, comments removed).
    pub spec: String,
    /// The file it came from, relative to the skill folder (`[grants]` for the operator's).
    pub source: String,
}

/// A skill's requirements, and what was refused in its files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requirements {
    /// In declaration order, each once.
    pub requirements: Vec<Requirement>,
    /// Lines that are not requirements skillbox installs, with why.
    pub problems: Vec<String>,
}

impl Requirements {
    /// Whether there is nothing to install.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The specifiers, in order.
    pub fn specs(&self) -> Vec<String> {
        self.requirements.iter().map(|r| r.spec.clone()).collect()
    }

    /// Whether any specifier pins a hash (pip then requires a hash for every one).
    pub fn pins_hashes(&self) -> bool {
        self.requirements.iter().any(|r| r.spec.contains("--hash="))
    }

    fn push(&mut self, spec: String, source: &str) {
        if self.requirements.iter().any(|r| r.spec == spec) {
            return;
        }
        self.requirements.push(Requirement {
            spec,
            source: source.to_string(),
        });
    }

    /// Adds `specs` from `source` (the operator's grant, or a file), checking each.
    pub fn add(&mut self, specs: impl IntoIterator<Item = String>, source: &str) {
        for spec in specs {
            match spec_problem(&spec) {
                None => self.push(spec.trim().to_string(), source),
                Some(why) => self.problems.push(format!("{source}: {spec:?}: {why}")),
            }
        }
    }
}

/// The files read, in order.
pub const REQUIREMENT_FILES: [&str; 2] = ["requirements.txt", "scripts/requirements.txt"];

/// Reads the requirements a skill folder declares (see the module docs).
pub fn read_requirements(dir: &Path) -> Requirements {
    let mut out = Requirements::default();
    for file in REQUIREMENT_FILES {
        if let Ok(text) = std::fs::read_to_string(dir.join(file)) {
            let (specs, problems) = requirements_txt(&text);
            out.problems
                .extend(problems.into_iter().map(|p| format!("{file}: {p}")));
            out.add(specs, file);
        }
    }
    if let Ok(text) = std::fs::read_to_string(dir.join("pyproject.toml")) {
        match pyproject_dependencies(&text) {
            Ok(specs) => out.add(specs, "pyproject.toml"),
            Err(e) => out.problems.push(format!("pyproject.toml: {e}")),
        }
    }
    let mut scripts: Vec<_> = std::fs::read_dir(dir.join("scripts"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .collect();
    scripts.sort();
    for path in scripts {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let name = format!(
            "scripts/{}",
            path.file_name().unwrap_or_default().to_string_lossy()
        );
        match inline_script_dependencies(&text) {
            Ok(Some(specs)) => out.add(specs, &name),
            Ok(None) => {}
            Err(e) => out.problems.push(format!("{name}: {e}")),
        }
    }
    out
}

/// The specifiers of a `requirements.txt` and its lines refused (with why).
pub fn requirements_txt(text: &str) -> (Vec<String>, Vec<String>) {
    let mut specs = Vec::new();
    let mut problems = Vec::new();
    let mut joined = String::new();
    for raw in text.lines() {
        let line = raw.trim_end();
        if let Some(head) = line.strip_suffix('\\') {
            joined.push_str(head);
            joined.push(' ');
            continue;
        }
        joined.push_str(line);
        let full = std::mem::take(&mut joined);
        // A comment starts at `#` at the line's start or after whitespace.
        let content = match full.find(" #") {
            Some(i) => &full[..i],
            None if full.trim_start().starts_with('#') => "",
            None => full.as_str(),
        };
        let content = content.split_whitespace().collect::<Vec<_>>().join(" ");
        if content.is_empty() {
            continue;
        }
        match spec_problem(&content) {
            None => specs.push(content),
            Some(why) => problems.push(format!("{content:?}: {why}")),
        }
    }
    (specs, problems)
}

/// Why `spec` is not a requirement skillbox installs (`None`: it is one).
pub fn spec_problem(spec: &str) -> Option<&'static str> {
    let spec = spec.trim();
    let first = spec.split_whitespace().next().unwrap_or_default();
    if first.starts_with('-') {
        return Some(
            "options are not followed (the index, other files and editable installs are the \
             operator's): list plain requirements, hashes as --hash=sha256:...",
        );
    }
    if spec.contains("://") || spec.contains(" @ ") || first.starts_with('.') || first.contains('/')
    {
        return Some(
            "a path or URL requirement would reach past the package index; name the package \
             and version instead",
        );
    }
    let name_ok = first
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric());
    if !name_ok {
        return Some("not a requirement specifier (name [extras] version ; marker)");
    }
    for word in spec.split_whitespace().skip(1) {
        if word.starts_with('-') && !word.starts_with("--hash=") {
            return Some("only --hash=... may follow a requirement");
        }
    }
    None
}

/// `[project] dependencies` of a `pyproject.toml`.
pub fn pyproject_dependencies(text: &str) -> Result<Vec<String>, String> {
    #[derive(Deserialize)]
    struct Pyproject {
        project: Option<Project>,
    }
    #[derive(Deserialize)]
    struct Project {
        #[serde(default)]
        dependencies: Vec<String>,
    }
    let parsed: Pyproject = toml::from_str(text).map_err(|e| format!("not TOML: {e}"))?;
    Ok(parsed.project.map(|p| p.dependencies).unwrap_or_default())
}

/// The `dependencies` of a script's PEP 723 `# /// script` block (`None`: no block).
pub fn inline_script_dependencies(text: &str) -> Result<Option<Vec<String>>, String> {
    #[derive(Deserialize)]
    struct Script {
        #[serde(default)]
        dependencies: Vec<String>,
    }
    let mut lines = text.lines();
    if !lines.any(|l| l.trim_end() == "# /// script") {
        return Ok(None);
    }
    let mut body = String::new();
    for line in lines {
        let line = line.trim_end();
        if line == "# ///" {
            let parsed: Script =
                toml::from_str(&body).map_err(|e| format!("its `# /// script` block: {e}"))?;
            return Ok(Some(parsed.dependencies));
        }
        let Some(rest) = line.strip_prefix('#') else {
            return Err("its `# /// script` block has a line that is not a comment".into());
        };
        body.push_str(rest.strip_prefix(' ').unwrap_or(rest));
        body.push('\n');
    }
    Err("its `# /// script` block has no closing `# ///`".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_txt_takes_specifiers_and_refuses_options_and_urls() {
        let text = "# pdf tools\npypdf>=3.0  # reading\nPillow==10.0 \\\n    --hash=sha256:abc\n\n\
                    -r other.txt\n--index-url https://evil.test/simple\nfoo @ https://x.test/f.whl\n\
                    ./local\nrequests[socks] ; python_version > '3.8'\n";
        let (specs, problems) = requirements_txt(text);
        assert_eq!(
            specs,
            [
                "pypdf>=3.0",
                "Pillow==10.0 --hash=sha256:abc",
                "requests[socks] ; python_version > '3.8'"
            ]
        );
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[0].contains("options are not followed"));
        assert!(problems[2].contains("reach past the package index"));
    }

    #[test]
    fn pep_723_and_pyproject_dependencies_are_read() {
        let script = "#!/usr/bin/env python3\n# /// script\n# requires-python = \">=3.9\"\n\
                      # dependencies = [\n#   \"pyyaml>=6\",\n# ]\n# ///\nimport yaml\n";
        assert_eq!(
            inline_script_dependencies(script).unwrap(),
            Some(vec!["pyyaml>=6".to_string()])
        );
        assert_eq!(inline_script_dependencies("print(1)\n").unwrap(), None);
        assert!(inline_script_dependencies("# /// script\n# dependencies = []\n").is_err());
        let pyproject = "[project]\nname = \"x\"\ndependencies = [\"openpyxl\"]\n";
        assert_eq!(pyproject_dependencies(pyproject).unwrap(), ["openpyxl"]);
    }

    #[test]
    fn a_folder_declares_from_every_place_each_requirement_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("scripts")).unwrap();
        std::fs::write(dir.path().join("requirements.txt"), "pypdf\n").unwrap();
        std::fs::write(
            dir.path().join("scripts/requirements.txt"),
            "pypdf\nimageio\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("scripts/a.py"),
            "# /// script\n# dependencies = [\"pyyaml\"]\n# ///\n",
        )
        .unwrap();
        let r = read_requirements(dir.path());
        assert_eq!(r.specs(), ["pypdf", "imageio", "pyyaml"]);
        assert_eq!(r.requirements[2].source, "scripts/a.py");
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert!(!r.pins_hashes());
    }
}
