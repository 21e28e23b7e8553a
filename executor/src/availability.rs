//! What this executor's sandbox can start, reported to the core with `health`: the OS and,
//! for every program the loaded skills name, whether it is an executable file on the
//! sandbox `PATH`. The core judges a skill's availability from this answer, so a program
//! that only the core's host has (or only the executor's image has) is judged right.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use skillbox_protocol::methods::SandboxFacts;

use crate::registry::Registry;
use crate::sandbox::env::SANDBOX_PATH;

/// The facts for the skills of `registry`, on an executor that can (`network_namespaces`)
/// or cannot give a network call a namespace of its own, and limits memory as
/// `memory_limit` says ([`crate::sandbox::memcg::MemoryMode`]).
pub fn sandbox_facts(
    registry: &Registry,
    network_namespaces: bool,
    unix_sockets: bool,
    memory_limit: crate::sandbox::memcg::MemoryMode,
    deps_root: &Path,
) -> SandboxFacts {
    let mut programs = BTreeMap::new();
    for registered in registry.skills() {
        for program in registered.skill.programs() {
            programs
                .entry(program)
                .or_insert_with_key(|name| on_sandbox_path(name));
        }
    }
    SandboxFacts {
        os: os_name().to_string(),
        path: SANDBOX_PATH.to_string(),
        programs,
        network_namespaces,
        unix_sockets,
        memory_limit: memory_limit.as_str().to_string(),
        watched_folders: crate::workdir::kept_folders_watched(),
        scripts: crate::script_facts::script_facts(registry, deps_root, on_sandbox_path),
    }
}

/// Whether `program` (a bare name) is an executable file in a folder of the sandbox PATH.
pub fn on_sandbox_path(program: &str) -> bool {
    !program.contains('/')
        && SANDBOX_PATH.split(':').any(|dir| {
            Path::new(dir)
                .join(program)
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The OS in the prerequisites' words (`linux`, `darwin`, `win32`).
pub fn os_name() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_path_finds_sh_and_not_programs_elsewhere() {
        assert!(on_sandbox_path("sh"));
        assert!(!on_sandbox_path("skillbox-no-such-program"));
        // A path is never a program name on PATH.
        assert!(!on_sandbox_path("/bin/sh"));
    }

    #[test]
    fn facts_name_every_program_of_the_loaded_skills() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("tools");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(
            dir.join("skill.yaml"),
            "name: tools\ndescription: d\n\
             prerequisites: { bins: [sh, skillbox-missing-bin] }\n\
             tools:\n  - name: run\n    description: d\n    command: [\"python3\", \"x.py\"]\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("x.py"),
            "import json\nimport skillbox_no_such_module\nsubprocess.run(['skillbox-no-such-program'])\n",
        )
        .unwrap();
        let facts = sandbox_facts(
            &Registry::load(root.path()),
            false,
            false,
            crate::sandbox::memcg::MemoryMode::Rlimit,
            &root.path().join(".deps"),
        );
        let scripts = &facts.scripts["tools"];
        assert_eq!(scripts.missing_programs, ["skillbox-no-such-program"]);
        if on_sandbox_path("python3") {
            // json is the standard library's; the other module is nobody's.
            assert_eq!(scripts.unprovided_imports, ["skillbox_no_such_module"]);
        }
        assert_eq!(facts.os, "linux");
        assert_eq!(facts.programs.get("sh"), Some(&true));
        assert_eq!(facts.programs.get("skillbox-missing-bin"), Some(&false));
        assert_eq!(
            facts.programs.get("python3"),
            Some(&on_sandbox_path("python3"))
        );
    }
}
