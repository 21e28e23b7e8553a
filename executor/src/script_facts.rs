//! What the loaded skills' scripts use that this executor's sandbox lacks
//! ([`skillbox_protocol::skill::script_uses`]): programs not on the sandbox `PATH`, and
//! Python modules that neither the sandbox's `python3` nor the skill's built environment
//! provides. Reported with `health` ([`skillbox_protocol::status::SandboxFacts::scripts`])
//! for `skillbox doctor` and `skill info`; availability never depends on it.
//!
//! The modules the sandbox's Python has are listed once per executor: its `sys.path`
//! folders (asked of `python3 -I` with the tools' `PATH`) read for top-level names, plus
//! its built-in modules. A skill's built environment is read on each report (a folder
//! listing).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;

use skillbox_protocol::status::ScriptFacts;

use crate::registry::Registry;
use crate::sandbox::env::SANDBOX_PATH;

/// Skill name → what its scripts miss here, for the skills of `registry` that miss
/// something; `deps_root` holds the built environments (`<scratch root>/.deps`),
/// `on_path` says whether a program is on the sandbox `PATH`.
pub fn script_facts(
    registry: &Registry,
    deps_root: &Path,
    on_path: impl Fn(&str) -> bool,
) -> BTreeMap<String, ScriptFacts> {
    let mut out = BTreeMap::new();
    for registered in registry.skills() {
        let uses = &registered.script_uses;
        let missing_programs: Vec<String> = (uses.programs.iter())
            .filter(|p| !on_path(p))
            .cloned()
            .collect();
        let mut unprovided_imports = Vec::new();
        if !uses.python_imports.is_empty() {
            if let Some(system) = system_modules() {
                let built = built_modules(deps_root, &registered.skill.name);
                unprovided_imports = (uses.python_imports.iter())
                    .filter(|m| !system.contains(*m) && !built.contains(*m))
                    .cloned()
                    .collect();
            }
        }
        let facts = ScriptFacts {
            missing_programs,
            unprovided_imports,
        };
        if !facts.is_empty() {
            out.insert(registered.skill.name.clone(), facts);
        }
    }
    out
}

/// The top-level modules the sandbox's `python3` can import with no environment: `None`
/// without a `python3` on the sandbox `PATH` (its scripts' missing program says it).
fn system_modules() -> Option<&'static BTreeSet<String>> {
    static MODULES: OnceLock<Option<BTreeSet<String>>> = OnceLock::new();
    MODULES.get_or_init(ask_python).as_ref()
}

const LIST_PATH: &str = "import sys\nprint('\\n'.join(sys.builtin_module_names))\n\
print('--')\nprint('\\n'.join(p for p in sys.path if p))";

fn ask_python() -> Option<BTreeSet<String>> {
    let out = std::process::Command::new("python3")
        .args(["-I", "-c", LIST_PATH])
        .env_clear()
        .env("PATH", SANDBOX_PATH)
        .env("LANG", "C.UTF-8")
        .stdin(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let (builtins, paths) = text.split_once("\n--\n")?;
    let mut modules: BTreeSet<String> = builtins.lines().map(str::to_string).collect();
    for dir in paths.lines() {
        modules.extend(modules_in(Path::new(dir)));
    }
    Some(modules)
}

/// The modules of a built environment of `skill` under `deps_root` (the folder whose
/// `skillbox-skill` file names it), empty when none is built.
fn built_modules(deps_root: &Path, skill: &str) -> BTreeSet<String> {
    let Ok(envs) = std::fs::read_dir(deps_root) else {
        return BTreeSet::new();
    };
    let mut out = BTreeSet::new();
    for env in envs.flatten().map(|e| e.path()) {
        let owner = std::fs::read_to_string(env.join(crate::deps::SKILL_FILE));
        if owner.is_ok_and(|o| o.trim() == skill) {
            out.extend(modules_in(&env));
            out.extend(modules_in(&env.join("python")));
        }
    }
    out
}

/// Top-level module names in one `sys.path` folder: `x.py`, `x/`, `x.cpython-311-...so`,
/// `x.so`, `x.pth`-free. Other files are ignored.
fn modules_in(dir: &Path) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            let (stem, rest) = name.split_once('.').unwrap_or((&name, ""));
            let module = if is_dir {
                rest.is_empty()
            } else {
                rest == "py" || rest == "pyc" || rest.ends_with("so")
            };
            module.then(|| stem.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_python_provides_its_standard_library_and_not_more() {
        let Some(modules) = system_modules() else {
            println!("SKIPPED: no python3 on the sandbox PATH");
            return;
        };
        for m in ["sys", "json", "os", "socket", "subprocess", "sqlite3"] {
            assert!(modules.contains(m), "{m} missing from {modules:?}");
        }
        assert!(!modules.contains("skillbox_no_such_module"));
    }

    #[test]
    fn a_built_environment_provides_its_packages_to_its_own_skill_only() {
        let root = tempfile::tempdir().unwrap();
        let env = root.path().join("ab".repeat(32));
        std::fs::create_dir_all(env.join("openpyxl")).unwrap();
        std::fs::create_dir_all(env.join("openpyxl-3.1.5.dist-info")).unwrap();
        std::fs::write(env.join("six.py"), "").unwrap();
        std::fs::write(
            env.join("_cffi_backend.cpython-311-x86_64-linux-gnu.so"),
            "",
        )
        .unwrap();
        std::fs::write(env.join(crate::deps::SKILL_FILE), "sheets\n").unwrap();
        let built = built_modules(root.path(), "sheets");
        assert_eq!(
            built,
            ["_cffi_backend", "openpyxl", "six"]
                .map(String::from)
                .into_iter()
                .collect()
        );
        assert!(built_modules(root.path(), "other").is_empty());
    }
}
