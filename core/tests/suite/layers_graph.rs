//! How a crate's modules import each other, read from its sources as text (the layers
//! tests of the core, `layers.rs`, and of the executor, which includes this file by
//! path): every `crate::`, `super::` and `self::` path outside comments and `mod tests`
//! blocks names the module it reaches; the table of docs/architecture.md that says what
//! each top-level module may import; the import circles.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path from the crate root (`["gateway", "mcp", "eras"]`; `[]` for lib.rs).
pub type ModPath = Vec<String>;

/// Every source file of the crate whose sources are in `src` that is not a test, by
/// module path.
pub fn modules(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    let mut out = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap().with_extension("");
        let mut path: ModPath = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let is_test = path
            .iter()
            .any(|p| p == "tests" || p.ends_with("_tests") || p == "test");
        if is_test {
            continue;
        }
        if matches!(path.last().map(String::as_str), Some("mod" | "lib")) {
            path.pop();
        }
        out.insert(path, file);
    }
    out
}

/// The code of `file` without its `mod tests` block and without comment lines.
fn code_of(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::a::b`, `super::a` and `self::a` path in `code`: its head and segments.
fn paths_in(code: &str) -> Vec<(&'static str, Vec<String>)> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    for head in ["crate", "super", "self"] {
        let needle = format!("{head}::");
        let mut from = 0;
        while let Some(i) = code[from..].find(&needle) {
            let at = from + i;
            from = at + needle.len();
            let before = at.checked_sub(1).map(|b| bytes[b]);
            if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':') {
                continue;
            }
            let rest = &code[from..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let segments = rest[..end]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            out.push((head, segments));
        }
    }
    out
}

/// The modules each module's code reaches.
pub fn imports(mods: &BTreeMap<ModPath, PathBuf>) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let mut out: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (module, file) in mods {
        let reached = out.entry(module.clone()).or_default();
        for (head, segments) in paths_in(&code_of(file)) {
            // A module's path is its folder's for a mod.rs, so `super::` is its parent.
            let mut base: ModPath = match head {
                "crate" => Vec::new(),
                "self" => module.clone(),
                _ => module[..module.len().saturating_sub(1)].to_vec(),
            };
            let mut rest = segments.as_slice();
            while let Some(("super", tail)) = rest.split_first().map(|(h, t)| (h.as_str(), t)) {
                base.pop();
                rest = tail;
            }
            let full: ModPath = base.iter().cloned().chain(rest.iter().cloned()).collect();
            let target = (1..=full.len())
                .rev()
                .map(|k| full[..k].to_vec())
                .find(|p| mods.contains_key(p));
            if let Some(t) = target.filter(|t| t != module) {
                reached.insert(t);
            }
        }
    }
    out
}

/// Whether one of `a`, `b` is inside the other (a folder and its own submodules).
pub fn nested(a: &ModPath, b: &ModPath) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// The top-level folder of a module (`random` for `random.rs`), or `None` for lib.rs.
pub fn top(m: &ModPath) -> Option<&str> {
    m.first().map(String::as_str)
}

/// The table under `section` (a heading) of `docs`: each folder, top down, and what it
/// imports.
pub fn documented(docs: &Path, section: &str) -> Vec<(String, BTreeSet<String>)> {
    let docs = std::fs::read_to_string(docs).unwrap();
    let section = docs
        .split(section)
        .nth(1)
        .unwrap_or_else(|| panic!("{section:?} is missing from the architecture docs"));
    let mut rows = Vec::new();
    for line in section.lines().skip_while(|l| !l.starts_with("| ")).skip(2) {
        if !line.starts_with("| `") {
            break;
        }
        let cells: Vec<&str> = line.split(" | ").collect();
        let folder = cells[0]
            .trim_start_matches("| `")
            .split('`')
            .next()
            .unwrap()
            .trim_end_matches('/')
            .trim_end_matches(".rs")
            .to_string();
        let last = cells.last().unwrap().trim_end_matches(" |");
        let imports = last
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        rows.push((folder, imports));
    }
    rows
}

/// The top-level modules each top-level module imports (lib.rs left out).
pub fn top_level_imports(mods: &BTreeMap<ModPath, PathBuf>) -> BTreeMap<String, BTreeSet<String>> {
    let mut actual: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, tos) in imports(mods) {
        let Some(from_top) = top(&from) else { continue };
        let reached = actual.entry(from_top.to_string()).or_default();
        for to in tos {
            if let Some(to_top) = top(&to).filter(|t| *t != from_top) {
                reached.insert(to_top.to_string());
            }
        }
    }
    actual
}

/// Checks `actual` against the documented `rows`: the same folders, each importing
/// exactly what its row names, and nothing above it in the table.
pub fn assert_matches_table(
    actual: &BTreeMap<String, BTreeSet<String>>,
    rows: &[(String, BTreeSet<String>)],
) {
    let named: BTreeSet<&str> = rows.iter().map(|(f, _)| f.as_str()).collect();
    let folders: BTreeSet<&str> = actual.keys().map(String::as_str).collect();
    assert_eq!(
        named, folders,
        "the table's folders are not the crate's top-level modules"
    );
    for (i, (folder, documented)) in rows.iter().enumerate() {
        let real = actual.get(folder).cloned().unwrap_or_default();
        assert_eq!(
            &real, documented,
            "{folder}/ imports {real:?}; docs/architecture.md says {documented:?}"
        );
        let above: BTreeSet<&String> = rows[..i].iter().map(|(f, _)| f).collect();
        let upward: Vec<&String> = real.iter().filter(|t| above.contains(t)).collect();
        assert!(
            upward.is_empty(),
            "{folder}/ imports {upward:?}, above it in the table"
        );
    }
}

/// The modules in an import circle (a folder and its own submodules may use each other).
pub fn circles(mods: &BTreeMap<ModPath, PathBuf>) -> Vec<String> {
    let graph: BTreeMap<ModPath, Vec<ModPath>> = imports(mods)
        .into_iter()
        .map(|(from, tos)| {
            let tos = tos.into_iter().filter(|t| !nested(&from, t)).collect();
            (from, tos)
        })
        .collect();
    // Every module's reach, by a walk from it; a module in its own reach is in a circle.
    let mut circles = Vec::new();
    for start in graph.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&ModPath> = graph[start].iter().collect();
        while let Some(m) = stack.pop() {
            if m == start {
                circles.push(start.join("/"));
                break;
            }
            if seen.insert(m) {
                stack.extend(graph.get(m).into_iter().flatten());
            }
        }
    }
    circles
}
