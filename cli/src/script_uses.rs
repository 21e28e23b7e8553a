//! `skill info`'s lines on what a skill's scripts use: the programs and Python modules
//! read from its files, and, when a core runs for the workspace, what its executors'
//! sandboxes lack of them (the same judgement `skillbox doctor` prints).

use skillbox_protocol::skill::script_uses::ScriptUses;
use skillbox_protocol::skill::Skill;

use super::client::{self, CoreClient};
use super::up;

/// Prints the lines for `skill`; `workspace` names the running core to ask, if any.
pub fn print(skill: &Skill, workspace: Option<&std::path::Path>, ask_core: bool) {
    let uses = ScriptUses::scan(&skill.dir);
    if !uses.programs.is_empty() {
        println!("scripts run: {}", join(&uses.programs));
    }
    if !uses.python_imports.is_empty() {
        println!("imports:     {}", join(&uses.python_imports));
    }
    if ask_core {
        for w in judged_by_core(workspace, &skill.name) {
            println!("warning:     {w}");
        }
    }
}

fn join(names: &std::collections::BTreeSet<String>) -> String {
    names.iter().cloned().collect::<Vec<_>>().join(", ")
}

/// The running core's `script_warnings` for `name`; nothing when no core answers.
fn judged_by_core(workspace: Option<&std::path::Path>, name: &str) -> Vec<String> {
    let Ok(ws) = up::workspace(workspace) else {
        return Vec::new();
    };
    let Ok(core) = CoreClient::for_workspace(&ws) else {
        return Vec::new();
    };
    let path = format!("/v1/skills/{name}");
    let Ok(rt) = client::runtime() else {
        return Vec::new();
    };
    let Ok(answer) = rt.block_on(core.json("GET", &path, None)) else {
        return Vec::new();
    };
    (answer["script_warnings"].as_array().into_iter().flatten())
        .filter_map(|w| w.as_str().map(str::to_string))
        .collect()
}
