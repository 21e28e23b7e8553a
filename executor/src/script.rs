//! `run_skill_script` (docs/sessions.md): a file under a skill's `scripts/` run with
//! arguments, no declared tool needed. The script must be a regular file inside
//! `scripts/` (no `..`, no absolute path, no link leading out); it runs by its shebang
//! when the interpreter it names exists in the sandbox, else by its extension (`.py`
//! python3, `.sh` sh, `.js`/`.mjs` node), as `[interpreter, <its absolute path>, args...]`
//! under the skill's `execution` limits, with stdin closed, like a `plain` tool. A
//! non-zero exit fails the call with the exit code and the tails of stdout and stderr.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::json;
use skillbox_protocol::methods::ScriptRun;
use skillbox_protocol::skill::{Security, Skill, Tool, ToolEntry, ToolProtocol};

use crate::call_error::CallError;
use crate::sandbox::env::SANDBOX_PATH;

/// The tool name of a script run (`SKILLBOX_TOOL`).
pub const RUN_SKILL_SCRIPT: &str = "run_skill_script";

/// The folder of a skill its scripts must be in.
pub const SCRIPTS_DIR: &str = "scripts";

/// Bytes of stdout and of stderr a failed run's message keeps (their ends).
pub const FAILURE_TAIL_BYTES: usize = 4096;

/// Interpreters by extension, for a script without a usable shebang line.
const BY_EXTENSION: [(&str, &str); 4] = [
    ("py", "python3"),
    ("sh", "sh"),
    ("js", "node"),
    ("mjs", "node"),
];

/// The tool a script run is: a `plain` command running `run.path` of `skill`.
pub fn script_tool(skill: &Skill, run: &ScriptRun) -> Result<Tool, CallError> {
    let script = locate(&skill.dir, &run.path)?;
    let mut argv = interpreter(&script, &run.path)?;
    argv.push(script.to_string_lossy().into_owned());
    argv.extend(run.args.iter().cloned());
    Ok(Tool {
        name: RUN_SKILL_SCRIPT.into(),
        description: format!("runs {}", run.path),
        entry: ToolEntry::Command { argv },
        protocol: ToolProtocol::Plain,
        security: Security::default(),
        timeout_ms: None,
        parameters: json!({"type": "object"}),
        output_schema: None,
    })
}

/// The script's absolute path, once it is known to be a regular file under `scripts/`.
fn locate(skill_dir: &Path, path: &str) -> Result<PathBuf, CallError> {
    let refuse = |why: &str| {
        CallError::InvalidArgs(format!(
            "script {path:?} is refused: {why}; name a file under the skill's {SCRIPTS_DIR}/ folder, e.g. {SCRIPTS_DIR}/run.py"
        ))
    };
    let parts = crate::workdir::path_segments(path).map_err(refuse)?;
    if parts.len() < 2 || parts[0] != SCRIPTS_DIR {
        return Err(refuse("it is not under scripts/"));
    }
    let not_found = || {
        CallError::NotFound(format!(
            "skill has no script {path:?} (no such regular file under {SCRIPTS_DIR}/)"
        ))
    };
    let scripts = skill_dir
        .join(SCRIPTS_DIR)
        .canonicalize()
        .map_err(|_| not_found())?;
    let full = skill_dir
        .join(path)
        .canonicalize()
        .map_err(|_| not_found())?;
    if !full.starts_with(&scripts) {
        return Err(refuse("it is a link that leads out of scripts/"));
    }
    if !std::fs::metadata(&full).is_ok_and(|m| m.is_file()) {
        return Err(not_found());
    }
    Ok(full)
}

/// The interpreter argv of `script`: its shebang's when that names an interpreter the
/// sandbox has, else by extension.
fn interpreter(script: &Path, shown: &str) -> Result<Vec<String>, CallError> {
    if let Some(argv) = shebang(script) {
        return Ok(argv);
    }
    let ext = script.extension().and_then(|e| e.to_str()).unwrap_or("");
    match BY_EXTENSION.iter().find(|(e, _)| *e == ext) {
        Some((_, program)) => Ok(vec![(*program).to_string()]),
        None => Err(CallError::InvalidArgs(format!(
            "cannot tell how to run {shown}: it has no shebang line naming an interpreter the sandbox has, and its extension is not one of {}",
            BY_EXTENSION
                .iter()
                .map(|(e, p)| format!(".{e} ({p})"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The argv a `#!` line asks for, when the interpreter exists in the sandbox:
/// `#!/usr/bin/env NAME` looks NAME up on the sandbox PATH; `#!/abs/path [ARG]` needs
/// that file.
fn shebang(script: &Path) -> Option<Vec<String>> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = head[..n].split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line.strip_prefix(b"#!")?).ok()?;
    let mut words = line.split_whitespace();
    let program = words.next()?;
    if program == "/usr/bin/env" || program == "/bin/env" {
        let mut name = words.next()?;
        if name == "-S" {
            name = words.next()?;
        }
        let found = SANDBOX_PATH
            .split(':')
            .any(|d| Path::new(d).join(name).is_file());
        return found.then(|| vec![name.to_string()]);
    }
    if !Path::new(program).is_absolute() || !Path::new(program).is_file() {
        return None;
    }
    let rest: Vec<&str> = words.collect();
    let mut argv = vec![program.to_string()];
    if !rest.is_empty() {
        // The kernel passes everything after the interpreter as one argument.
        argv.push(rest.join(" "));
    }
    Some(argv)
}

/// The message of a script that exited with `code`: the code, then the last
/// [`FAILURE_TAIL_BYTES`] of stdout and of stderr, each named.
pub fn failure_message(code: i32, stdout: &[u8], stderr_tail: &str) -> String {
    let tail = |bytes: &[u8]| {
        let from = bytes.len().saturating_sub(FAILURE_TAIL_BYTES);
        String::from_utf8_lossy(&bytes[from..]).into_owned()
    };
    let mut message = format!("exited with code {code}");
    for (name, text) in [
        ("stdout", tail(stdout)),
        ("stderr", tail(stderr_tail.as_bytes())),
    ] {
        if !text.trim().is_empty() {
            message.push_str(&format!(
                "\n--- {name} (last {FAILURE_TAIL_BYTES} bytes at most) ---\n{}",
                text.trim_end()
            ));
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_message_names_both_streams_and_keeps_their_ends() {
        let out = format!("{}usage: x FILE", "a".repeat(10_000));
        let m = failure_message(1, out.as_bytes(), "boom");
        assert!(m.starts_with("exited with code 1\n--- stdout"), "{m}");
        assert!(
            m.contains("usage: x FILE") && m.contains("--- stderr"),
            "{m}"
        );
        assert!(m.len() < 4096 + 200, "{}", m.len());
    }
}
