//! Which user ids an executor gives its calls when none is configured: the host's range
//! in the host's PID namespace, another in a PID namespace of its own (a container),
//! since an executor in the host's namespace kills every process of an id it takes,
//! containers' included. The executor runs here as `exec` once as it is and once under
//! `unshare --pid --fork --mount-proc`, a PID namespace of its own as a container has.

use std::process::Command;

use super::harness::{running_as_root, shell_skill, SkillRoot, EXECUTOR};

/// The user id the `shell:run` tool printed, run by `exec` with `wrapper` in front.
fn tool_uid(root: &SkillRoot, wrapper: &[&str]) -> u32 {
    let skills = root.skills().display().to_string();
    let exec = [EXECUTOR, "exec", "--skills", &skills, "--tool", "shell:run"];
    let argv: Vec<&str> = wrapper.iter().chain(exec.iter()).copied().collect();
    let out = Command::new(argv[0]).args(&argv[1..]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let result: serde_json::Value = serde_json::from_str(text.lines().last().unwrap_or("{}"))
        .unwrap_or_else(|e| panic!("{e}: {text} {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(result["success"], true, "{result}");
    let stdout = result["data"]["stdout"].as_str().unwrap_or_default();
    stdout.trim().parse().unwrap_or_else(|_| panic!("{result}"))
}

#[test]
fn an_executor_in_a_pid_namespace_of_its_own_keeps_clear_of_the_hosts_user_ids() {
    if !running_as_root() {
        println!("SKIPPED {}: needs root (per-call user ids)", module_path!());
        return;
    }
    let root = SkillRoot::new();
    shell_skill(&root, "id -u\n");
    let on_host = tool_uid(&root, &[]);
    assert!(
        (2_000_000..3_000_000).contains(&on_host),
        "in the host's namespace the tool ran as {on_host}"
    );
    let contained = tool_uid(&root, &["unshare", "--pid", "--fork", "--mount-proc"]);
    assert!(
        (3_000_000..3_000_032).contains(&contained),
        "in a namespace of its own the tool ran as {contained}"
    );
}
