//! What a skill's scripts use from the machine they run on, read from their text: the
//! programs they start and the Python modules they import. Published skills declare
//! neither (their `SKILL.md` says "run `soffice ...`", their scripts `import openpyxl`), so
//! this is how `skillbox doctor` and `skillbox skill info` can say, before a call fails,
//! that a program is missing where the skill runs or that an import has no package.
//!
//! It reads, with bounds ([`MAX_FILES`], [`MAX_FILE_BYTES`]):
//! - every script's `#!` line (`#!/usr/bin/env python3` uses `python3`);
//! - Python: `import a.b`, `from a import b` (not relative ones, not `__future__`, not
//!   those inside a `try:` block, which a script means as optional), and the program of
//!   `subprocess.run(["soffice", ...])` and its siblings, `os.system("...")` and
//!   `shutil.which("...")` when it is written as a literal;
//! - JavaScript: the program of `spawn("...")`, `execFile`, `exec("...")` and their
//!   `Sync` forms, as literals;
//! - shell scripts and the `bash`/`sh`/`shell`/`console` blocks of `SKILL.md`: the first
//!   word of each command (after `|`, `&&`, `||`, `;`, `$(`), less shell keywords,
//!   builtins, assignments, variables and paths of the skill's own.
//!
//! A heuristic, never a verdict on availability: a program named only in a branch a
//! script never takes is listed too. The modules the skill ships itself (its own `.py`
//! files and packages) are not imports to provide.

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The most files read from one skill folder.
pub const MAX_FILES: usize = 500;
/// The largest file read; longer ones are skipped.
pub const MAX_FILE_BYTES: u64 = 512 * 1024;
/// The most names kept of each kind.
pub const MAX_NAMES: usize = 100;
const MAX_DEPTH: usize = 8;

/// The programs and Python modules a skill's scripts use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptUses {
    /// Bare program names, as a `PATH` lookup would take them.
    pub programs: BTreeSet<String>,
    /// Top-level Python modules imported and not shipped by the skill.
    pub python_imports: BTreeSet<String>,
}

impl ScriptUses {
    /// Reads the skill folder `dir` (its `SKILL.md` and its scripts).
    pub fn scan(dir: &Path) -> Self {
        let mut found = Found::default();
        let mut files = Vec::new();
        walk(dir, 0, &mut files);
        for path in &files {
            let Ok(text) = std::fs::read_to_string(path) else {
                continue;
            };
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.ends_with(".py") {
                // Its folders are packages of the skill's own (`scripts/office/x.py`).
                let inside = path.strip_prefix(dir).unwrap_or(path);
                for folder in inside.parent().into_iter().flat_map(Path::components) {
                    found
                        .local_modules
                        .insert(folder.as_os_str().to_string_lossy().into_owned());
                }
            }
            found.read_file(name, &text);
        }
        let mut out = ScriptUses {
            programs: found.programs,
            python_imports: found.imports,
        };
        out.python_imports
            .retain(|m| !found.local_modules.contains(m) && !is_ignored_module(m));
        out.programs.retain(|p| !found.local_programs.contains(p));
        for set in [&mut out.programs, &mut out.python_imports] {
            while set.len() > MAX_NAMES {
                set.pop_last();
            }
        }
        out
    }
}

#[derive(Default)]
struct Found {
    programs: BTreeSet<String>,
    imports: BTreeSet<String>,
    local_modules: BTreeSet<String>,
    local_programs: BTreeSet<String>,
}

impl Found {
    fn read_file(&mut self, name: &str, text: &str) {
        let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
        self.local_programs.insert(name.to_string());
        if let Some(program) = shebang_program(text) {
            self.programs.insert(program);
        }
        match ext {
            "py" => {
                if let Some((stem, _)) = name.rsplit_once('.') {
                    self.local_modules.insert(stem.to_string());
                }
                python_imports(text, &mut self.imports);
                literal_programs(text, PYTHON_CALLS, &mut self.programs);
            }
            "js" | "mjs" | "cjs" | "ts" => literal_programs(text, JS_CALLS, &mut self.programs),
            "sh" | "bash" => shell_programs(text, &mut self.programs),
            "md" if name.eq_ignore_ascii_case("SKILL.md") => {
                for block in shell_blocks(text) {
                    shell_programs(&block, &mut self.programs);
                }
            }
            _ => {}
        }
    }
}

/// The skill's files worth reading, and the names of its Python packages (folders).
fn walk(dir: &Path, depth: usize, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if out.len() >= MAX_FILES {
            return;
        }
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || matches!(&*name, "node_modules" | "__pycache__") {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() && depth < MAX_DEPTH {
            walk(&path, depth + 1, out);
        } else if kind.is_file()
            && is_read(&name)
            && entry.metadata().is_ok_and(|m| m.len() <= MAX_FILE_BYTES)
        {
            out.push(path);
        }
    }
}

fn is_read(name: &str) -> bool {
    let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    name.eq_ignore_ascii_case("SKILL.md")
        || matches!(
            ext,
            "py" | "js" | "mjs" | "cjs" | "ts" | "sh" | "bash" | "rb" | "pl"
        )
}

/// Python's `import` lines: the top-level module of each.
fn python_imports(text: &str, out: &mut BTreeSet<String>) {
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let names: Vec<&str> = if let Some(rest) = trimmed.strip_prefix("import ") {
            rest.split(',')
                .map(|part| part.split_whitespace().next().unwrap_or(""))
                .collect()
        } else if let Some(rest) = trimmed.strip_prefix("from ") {
            match rest.split_whitespace().collect::<Vec<_>>().as_slice() {
                [module, "import", ..] => vec![*module],
                _ => continue,
            }
        } else {
            continue;
        };
        if in_try_block(&lines, i) {
            continue;
        }
        for name in names {
            let top = name.split('.').next().unwrap_or("");
            if is_identifier(top) {
                out.insert(top.to_string());
            }
        }
    }
}

/// Whether the indented line `i` sits in a `try:` block (its nearest less indented line).
fn in_try_block(lines: &[&str], i: usize) -> bool {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let own = indent(lines[i]);
    if own == 0 {
        return false;
    }
    lines[..i]
        .iter()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .find(|l| indent(l) < own)
        .is_some_and(|l| l.trim() == "try:")
}

const PYTHON_CALLS: &[&str] = &[
    "subprocess.run(",
    "subprocess.call(",
    "subprocess.check_call(",
    "subprocess.check_output(",
    "subprocess.Popen(",
    "os.system(",
    "os.popen(",
    "shutil.which(",
];
const JS_CALLS: &[&str] = &[
    "spawn(",
    "spawnSync(",
    "execFile(",
    "execFileSync(",
    "exec(",
    "execSync(",
];

/// The program of each call in `calls` whose first argument is a string literal (or a
/// list starting with one): its first word.
fn literal_programs(text: &str, calls: &[&str], out: &mut BTreeSet<String>) {
    for call in calls {
        for (at, _) in text.match_indices(call) {
            // `myspawn(` and `re.exec(` are not these calls; `child_process.exec(` is.
            let head = &text[..at];
            match head.chars().next_back() {
                Some(c) if c.is_alphanumeric() || c == '_' => continue,
                Some('.') => {
                    let object = head[..head.len() - 1]
                        .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .next()
                        .unwrap_or("");
                    if !matches!(object, "child_process" | "childProcess" | "cp") {
                        continue;
                    }
                }
                _ => {}
            }
            let rest = text[at + call.len()..].trim_start();
            let rest = rest.strip_prefix('[').unwrap_or(rest).trim_start();
            let Some(quote) = rest
                .chars()
                .next()
                .filter(|c| matches!(c, '"' | '\'' | '`'))
            else {
                continue;
            };
            let literal = rest[1..].split(quote).next().unwrap_or("");
            if let Some(program) = literal.split_whitespace().next().and_then(program_name) {
                out.insert(program);
            }
        }
    }
}

/// The fenced shell blocks of a `SKILL.md`.
fn shell_blocks(text: &str) -> Vec<String> {
    enum In {
        Prose,
        Shell(String),
        Other,
    }
    let mut out = Vec::new();
    let mut state = In::Prose;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            state = match state {
                In::Shell(block) => {
                    out.push(block);
                    In::Prose
                }
                In::Other => In::Prose,
                In::Prose => match info.trim().to_ascii_lowercase().as_str() {
                    "bash" | "sh" | "shell" | "console" | "zsh" => In::Shell(String::new()),
                    _ => In::Other,
                },
            };
            continue;
        }
        if let In::Shell(block) = &mut state {
            block.push_str(trimmed.strip_prefix("$ ").unwrap_or(trimmed));
            block.push('\n');
        }
    }
    out
}

/// The first word of each command of a shell text.
fn shell_programs(text: &str, out: &mut BTreeSet<String>) {
    let mut continued = false;
    for line in text.lines() {
        let was_continued = continued;
        continued = line.trim_end().ends_with('\\');
        if was_continued {
            continue;
        }
        let line = line.split(" #").next().unwrap_or("");
        if line.trim_start().starts_with('#') {
            continue;
        }
        let line = line.replace("$(", ";").replace('`', ";");
        for segment in line.split(['|', ';', '&', '(', ')', '{', '}']) {
            let mut words = segment.split_whitespace();
            let first = words.find(|w| !w.contains('=') || w.starts_with('-'));
            let Some(word) = first else { continue };
            let word = if matches!(word, "sudo" | "exec" | "time" | "nohup" | "env") {
                match words.find(|w| !w.starts_with('-') && !w.contains('=')) {
                    Some(next) => next,
                    None => word,
                }
            } else {
                word
            };
            if is_shell_word(word) {
                continue;
            }
            if let Some(program) = program_name(word) {
                out.insert(program);
            }
        }
    }
}

/// A bare program name (or the last part of an absolute system path); `None` for paths
/// of the skill's own (`./x`, `scripts/x`), variables, options and placeholders.
fn program_name(word: &str) -> Option<String> {
    let word = word.trim_matches(|c| c == '"' || c == '\'');
    let name = match word.strip_prefix('/') {
        Some(_) if word.starts_with("/usr/") || word.starts_with("/bin/") => {
            word.rsplit('/').next()?
        }
        Some(_) => return None,
        None if word.contains('/') => return None,
        None => word,
    };
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.chars().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-' | '+')
        })
        && !name.ends_with('.')
        && !name.contains("..");
    ok.then(|| name.to_string())
}

/// The program of a `#!` line: `env`'s argument, else the interpreter's file name.
fn shebang_program(text: &str) -> Option<String> {
    let line = text.lines().next()?.strip_prefix("#!")?;
    let mut words = line.split_whitespace();
    let interpreter = words.next()?;
    if interpreter.ends_with("/env") {
        return words.find(|w| !w.starts_with('-')).and_then(program_name);
    }
    program_name(interpreter)
}

fn is_identifier(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_ignored_module(m: &str) -> bool {
    m == "__future__" || m == "__main__"
}

/// Shell keywords and builtins: never programs on `PATH`.
fn is_shell_word(word: &str) -> bool {
    matches!(
        word,
        "if" | "then"
            | "else"
            | "elif"
            | "fi"
            | "for"
            | "while"
            | "until"
            | "do"
            | "done"
            | "case"
            | "esac"
            | "in"
            | "function"
            | "select"
            | "export"
            | "unset"
            | "local"
            | "readonly"
            | "declare"
            | "typeset"
            | "set"
            | "shift"
            | "return"
            | "exit"
            | "break"
            | "continue"
            | "cd"
            | "pwd"
            | "echo"
            | "printf"
            | "read"
            | "source"
            | "."
            | "eval"
            | "test"
            | "["
            | "[["
            | "]]"
            | "true"
            | "false"
            | "trap"
            | "wait"
            | "alias"
            | "type"
            | "command"
            | "builtin"
            | "hash"
            | "umask"
            | "ulimit"
            | "let"
            | "getopts"
            | "shopt"
            | "pushd"
            | "popd"
            | "!"
    )
}

#[cfg(test)]
#[path = "script_uses_tests.rs"]
mod tests;
