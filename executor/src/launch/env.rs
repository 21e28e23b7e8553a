//! The per-call part of a process's environment, for every plan (`plan.rs`): the
//! `SKILLBOX_*` variables of a skill's process, and the values the core supplied for the
//! names the skill may receive; the installer's fixed set for a dependency build. The base
//! set (`PATH`, `HOME`, ...), the proxy variables and the CA bundle are the sandbox's
//! (`sandbox/env.rs`, applied by `Sandbox::prepare`), and come after these so that nothing
//! here overrides them.

use std::collections::BTreeMap;

use skillbox_protocol::methods::SecretValue;
use skillbox_protocol::skill::Skill;

/// The variables every process of `skill` gets: the skill, the tool (`exec_command` for a
/// session), the call id and the skill's folder (`SKILLBOX_SKILL_DIR`, readable; in a
/// context the working directory is the context's folder instead).
pub fn skill_env(skill: &Skill, tool: &str, call_id: &str) -> Vec<(String, String)> {
    vec![
        ("SKILLBOX_SKILL".to_string(), skill.name.clone()),
        ("SKILLBOX_TOOL".to_string(), tool.to_string()),
        ("SKILLBOX_CALL_ID".to_string(), call_id.to_string()),
        (
            "SKILLBOX_SKILL_DIR".to_string(),
            skill.dir.to_string_lossy().into_owned(),
        ),
    ]
}

/// Whether the process may have `name` set: the skill declares it in `permissions.env` or
/// binds it in `permissions.secrets` (the core then sends a placeholder, never the
/// value), or the operator granted it.
pub fn may_receive(skill: &Skill, granted: &[String], name: &str) -> bool {
    skill.permissions.env.iter().any(|e| e == name)
        || skill.permissions.secret_names().any(|s| s == name)
        || granted.iter().any(|g| g == name)
}

/// The values of `supplied` whose names `skill` may receive; any other is dropped and
/// logged (the core sends only those, so one more is a bug or a forged request).
pub fn declared_values(
    skill: &Skill,
    granted: &[String],
    supplied: &BTreeMap<String, SecretValue>,
) -> Vec<(String, String)> {
    let mut values = Vec::new();
    for (name, value) in supplied {
        if may_receive(skill, granted, name) {
            values.push((name.clone(), value.0.clone()));
        } else {
            tracing::warn!(skill = %skill.name, name = %name, "env value for an undeclared name dropped");
        }
    }
    values
}

/// The environment of a dependency build's installer: pip reads no configuration file,
/// asks nothing, and installs into a folder of its own.
pub fn installer_env() -> Vec<(String, String)> {
    [
        ("PIP_CONFIG_FILE", "/dev/null"),
        ("PIP_BREAK_SYSTEM_PACKAGES", "1"),
        ("PIP_NO_INPUT", "1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}
