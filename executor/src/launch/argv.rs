//! The command line of a skill's tool process, cold or prestarted: a declared command as
//! written, a JavaScript tool through the executor's runner with V8's heap capped at the
//! skill's memory limit (so V8 collects garbage before the limit stops it); in a context,
//! the skill's relative paths made absolute. The memory limit itself is the same for
//! every program (`crate::sandbox::limits`, `crate::sandbox::memcg`).

use skillbox_protocol::skill::{Skill, Tool, ToolEntry};

/// The argv of a tool's process (cold or warm).
pub fn launch_argv(node_runner: &std::path::Path, skill: &Skill, tool: &Tool) -> Vec<String> {
    match &tool.entry {
        ToolEntry::Command { argv } => argv.clone(),
        ToolEntry::JsExport { main } => vec![
            "node".into(),
            format!("--max-old-space-size={}", skill.execution.memory_mb),
            node_runner.to_string_lossy().into_owned(),
            main.clone(),
            tool.name.clone(),
        ],
    }
}

/// For a call made in a context, whose working directory is the context's folder:
/// the arguments of `argv` (after the program) that name a file or folder of the skill by
/// a relative path (`scripts/price.py`, a JavaScript tool's main module) become absolute,
/// so that they still name it ("relative paths are inside the skill").
pub fn absolutize_skill_paths(argv: &mut [String], skill_dir: &std::path::Path) {
    for arg in argv.iter_mut().skip(1) {
        let relative = !arg.is_empty()
            && !arg.starts_with('-')
            && !arg.starts_with('/')
            && !arg.split('/').any(|s| s == "..");
        if relative && std::fs::symlink_metadata(skill_dir.join(&*arg)).is_ok() {
            *arg = skill_dir.join(&*arg).to_string_lossy().into_owned();
        }
    }
}
