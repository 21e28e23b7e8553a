//! The Python with the outside clients installed (`integration-tests/python/requirements.txt`):
//! `SKILLBOX_PYTHON`, else `<repo>/.venv/bin/python` (what `.ci/run` makes). Without either,
//! a test that needs it prints that it is skipped, by name; under CI (`CI` set) it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The venv's Python, or `None` after printing that `test` is skipped.
pub fn python(test: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SKILLBOX_PYTHON") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "SKILLBOX_PYTHON is {} but that is not a file",
            path.display()
        );
        return Some(path);
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    if venv.is_file() {
        return Some(venv);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: no Python client venv under CI (.ci/run makes .venv from integration-tests/python/requirements.txt)"
    );
    println!(
        "SKIPPED {test}: no Python client venv (python3 -m venv .venv && .venv/bin/pip install -r integration-tests/python/requirements.txt)"
    );
    None
}

/// Runs `integration-tests/python/<script>` with `args` under `python`; panics with both
/// output streams when it exits non-zero.
pub fn run_script(python: &Path, script: &str, args: &[&str], envs: &[(&str, &str)]) -> Output {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join(script);
    let out = Command::new(python)
        .arg(&path)
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .expect("start python");
    assert!(
        out.status.success(),
        "{script} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
