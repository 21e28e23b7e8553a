//! Warm starts (`execution.prestart`): a prestarted process runs its call and returns, gets
//! the call's id in its request, is never used twice, keeps nothing from one call to the
//! next (scratch files, memory), and dies with its scratch dir when the pool is cleared (a
//! skill reload, the executor's stop). The escape tests run their key attacks against a
//! prestarted process too (`Start::Prestarted`).
//!
//! The first two tests go through `exec` like the rest of the suite; the others drive one
//! executor's `Registry`, `Sandbox` and warm pool in this process, the way the daemon does
//! across calls.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use skillbox_executor::registry::Registry;
use skillbox_executor::sandbox::{self, ArgsFile, LaunchSpec, Sandbox, SandboxConfig};

use super::harness::{in_process, is_dead, scratch_root, SkillRoot, Start};

/// Longest a test waits for the pool to have its processes blocked on stdin.
const SETTLE: Duration = Duration::from_secs(10);

#[test]
fn prestarted_call_runs_and_gets_the_real_call_id_in_its_request() {
    let root = SkillRoot::new();
    root.python_skill_as(
        Start::Prestarted,
        "warm",
        r#"
        reply({"env_call_id": os.environ["SKILLBOX_CALL_ID"], "call_id": call_id, "args": args})
        "#,
    );
    let outcome = root.call("warm:run").args(json!({"x": 1})).run();
    Start::Prestarted.check(&outcome);
    let data = outcome.data();
    assert_eq!(data["env_call_id"], "prestarted");
    assert_eq!(data["call_id"], outcome.call_id());
    assert_eq!(data["args"], json!({"x": 1}));
}

#[test]
fn prestarted_plain_tool_gets_its_args_on_stdin_and_in_the_args_file() {
    let root = SkillRoot::new();
    root.skill(
        "plainwarm",
        "name: plainwarm\n\
         description: a prestarted plain tool\n\
         execution: { prestart: 1 }\n\
         tools:\n  \
           - name: run\n    \
             description: echoes its arguments\n    \
             command: [\"sh\", \"tool.sh\"]\n    \
             protocol: plain\n    \
             parameters: {type: object}\n",
        &[(
            "tool.sh",
            "read -r line\nprintf '%s|' \"$line\"\ncat \"$SKILLBOX_ARGS_FILE\"\nprintf '|%s' \"$SKILLBOX_CALL_ID\"\n",
        )],
    );
    let outcome = root.call("plainwarm:run").args(json!({"y": 2})).run();
    let data = outcome.data();
    assert_eq!(data["exit_code"], 0, "{data}");
    assert_eq!(data["stdout"], "{\"y\":2}|{\"y\":2}|prestarted", "{data}");
}

/// A tool that reports its process, its scratch dir, and whether it sees what an earlier
/// call left (a file in its scratch dir, a module global), then leaves both behind.
const REMEMBER: &str = r#"
marker = os.path.join(os.environ["HOME"], "marker")
seen_file = os.path.exists(marker)
seen_global = globals().get("_touched", False)
_touched = True
with open(marker, "w") as f:
    f.write(call_id)
reply({
    "pid": os.getpid(),
    "uid": os.getuid(),
    "home": os.environ["HOME"],
    "env_call_id": os.environ["SKILLBOX_CALL_ID"],
    "call_id": call_id,
    "seen_file": seen_file,
    "seen_global": seen_global,
})
"#;

fn sandbox() -> Sandbox {
    Sandbox::new(SandboxConfig {
        scratch_root: scratch_root(),
        ..SandboxConfig::default()
    })
    .unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn run_call(sandbox: &Sandbox, registry: &Registry, skill: &str, call_id: &str) -> Value {
    let result = in_process::execute(sandbox, registry, (skill, "run"), call_id, json!({})).await;
    assert_eq!(result["success"], true, "{result}");
    result["data"].clone()
}

/// Waits until `n` processes of `skill:run` are waiting and blocked reading stdin.
async fn wait_ready(registry: &Registry, skill: &str, n: usize) {
    let deadline = Instant::now() + SETTLE;
    while registry.warm().waiting(skill, "run") < n {
        assert!(
            Instant::now() < deadline,
            "the pool never got {n} processes"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        registry.warm().settled(SETTLE).await,
        "the prestarted processes never blocked on stdin"
    );
}

#[test]
fn prestarted_process_is_never_used_twice_and_nothing_crosses_between_calls() {
    let root = SkillRoot::new();
    root.python_skill_as(Start::Prestarted, "warm", REMEMBER);
    let sandbox = sandbox();
    let registry = Registry::load(root.skills());
    runtime().block_on(async {
        registry.warm().enable_refill();
        registry
            .warm()
            .fill(&sandbox, registry.skills().map(|r| &r.skill));
        wait_ready(&registry, "warm", 1).await;
        let waiting = registry.warm().pids();
        let first = run_call(&sandbox, &registry, "warm", "call-1").await;
        assert!(
            waiting.contains(&u32::try_from(first["pid"].as_u64().unwrap()).unwrap()),
            "call 1 did not run in the prestarted process {waiting:?}: {first}"
        );
        // The pool starts a replacement; call 2 takes it, never call 1's process.
        wait_ready(&registry, "warm", 1).await;
        let replacement = registry.warm().pids();
        assert!(
            !replacement.contains(&u32::try_from(first["pid"].as_u64().unwrap()).unwrap()),
            "the used process is back in the pool: {replacement:?}"
        );
        let second = run_call(&sandbox, &registry, "warm", "call-2").await;
        for (data, id) in [(&first, "call-1"), (&second, "call-2")] {
            assert_eq!(data["env_call_id"], "prestarted", "{data}");
            assert_eq!(data["call_id"], id, "{data}");
            assert_eq!(data["seen_file"], false, "{data}");
            assert_eq!(data["seen_global"], false, "{data}");
        }
        assert_ne!(first["pid"], second["pid"]);
        assert_ne!(first["home"], second["home"]);
        is_dead(
            first["pid"].as_i64().unwrap(),
            u32::try_from(first["uid"].as_u64().unwrap()).unwrap(),
        )
        .unwrap();
        registry.warm().clear();
    });
    sandbox::wait_idle();
}

#[test]
fn prestart_pool_stops_at_max_prestarted() {
    let root = SkillRoot::new();
    root.python_skill_as(Start::Prestarted, "first", REMEMBER);
    root.python_skill_as(Start::Prestarted, "second", REMEMBER);
    let sandbox = Sandbox::new(SandboxConfig {
        scratch_root: scratch_root(),
        max_prestarted: 1,
        ..SandboxConfig::default()
    })
    .unwrap();
    let registry = Registry::load(root.skills());
    runtime().block_on(async {
        registry
            .warm()
            .fill(&sandbox, registry.skills().map(|r| &r.skill));
        let deadline = Instant::now() + SETTLE;
        while registry.warm().pids().is_empty() {
            assert!(Instant::now() < deadline, "no process was prestarted");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(registry.warm().pids().len(), 1, "over the limit of 1");
        let second = registry.skill("second").unwrap();
        let (tool, _) = second.tool("run").unwrap();
        let refused = registry
            .warm()
            .start_one(&sandbox, &second.skill, tool)
            .unwrap_err();
        assert!(
            refused.to_string().contains("--max-prestarted"),
            "{refused}"
        );
        registry.warm().clear();
    });
    sandbox::wait_idle();
}

/// Process id, user id and scratch dir of every process waiting in `registry`'s pool.
fn waiting_processes(registry: &Registry) -> Vec<(u32, u32, String)> {
    registry
        .warm()
        .pids()
        .into_iter()
        .map(|pid| {
            use std::os::unix::fs::MetadataExt;
            let uid = std::fs::metadata(format!("/proc/{pid}")).unwrap().uid();
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
            let home = String::from_utf8_lossy(&environ)
                .split('\0')
                .find_map(|kv| kv.strip_prefix("HOME=").map(str::to_string))
                .unwrap();
            assert!(std::path::Path::new(&home).is_dir(), "{home}");
            (pid, uid, home)
        })
        .collect()
}

#[test]
fn reload_kills_the_old_pool_and_starts_the_new_one() {
    let root = SkillRoot::new();
    root.python_skill_with(
        "warm",
        REMEMBER,
        super::harness::Manifest {
            skill: "execution: { prestart: 2 }",
            ..Default::default()
        },
    );
    let sandbox = sandbox();
    let old = Registry::load(root.skills());
    let rt = runtime();
    rt.block_on(async {
        skillbox_executor::registry::start_warm_pool(&sandbox, &old);
        wait_ready(&old, "warm", 2).await;
    });
    let before = waiting_processes(&old);
    assert_eq!(before.len(), 2);
    // What `skill.reload` does: a new registry, its pool started, the old one's killed.
    let new = Registry::load(root.skills());
    rt.block_on(async {
        skillbox_executor::registry::reload_warm_pool(&sandbox, &old, &new);
        wait_ready(&new, "warm", 2).await;
    });
    assert_eq!(old.warm().waiting("warm", "run"), 0);
    sandbox::wait_idle();
    for (pid, uid, home) in before {
        is_dead(i64::from(pid), uid).unwrap();
        assert!(
            !std::path::Path::new(&home).exists(),
            "scratch {home} survived"
        );
    }
    let after = waiting_processes(&new);
    assert_eq!(after.len(), 2, "the new pool did not start");
    // The executor stops: the new pool dies the same way.
    new.warm().clear();
    sandbox::wait_idle();
    for (pid, uid, home) in after {
        is_dead(i64::from(pid), uid).unwrap();
        assert!(
            !std::path::Path::new(&home).exists(),
            "scratch {home} survived"
        );
    }
}

#[test]
fn ready_slots_give_every_call_a_fresh_user_and_scratch_dir() {
    let root = SkillRoot::new();
    root.python_skill_as(Start::Cold, "cold", REMEMBER);
    let mut sandbox = sandbox();
    sandbox.keep_ready(2);
    let registry = Registry::load(root.skills());
    // The filler makes two user ids' scratch dirs before any call.
    let prefix = format!("call-{}-", std::process::id());
    let made_ahead = || {
        std::fs::read_dir(scratch_root())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .count()
    };
    let deadline = Instant::now() + SETTLE;
    while made_ahead() < 2 {
        assert!(Instant::now() < deadline, "no scratch dir was made ahead");
        std::thread::sleep(Duration::from_millis(5));
    }
    // A call takes one of them: its scratch dir is one made ahead.
    let ahead: Vec<std::path::PathBuf> = std::fs::read_dir(scratch_root())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    let skill_dir = root.skills().join("cold");
    let prepared = sandbox
        .prepare(LaunchSpec {
            deps: None,
            trust_pem: None,
            skill_dir: Some(&skill_dir),
            work: None,
            argv: &["python3".to_string()],
            env: Vec::new(),
            memory_mb: 256,
            max_file_mb: 1024,
            timeout_ms: 1000,
            args_file: ArgsFile::None,
            network: None,
            unix_sockets: false,
        })
        .unwrap();
    assert!(
        ahead.iter().any(|p| p == prepared.guard.scratch()),
        "{} is not one of the dirs made ahead {ahead:?}",
        prepared.guard.scratch().display()
    );
    prepared.guard.finish(None);
    let runs: Vec<Value> = runtime().block_on(async {
        let mut runs = Vec::new();
        for id in ["slot-1", "slot-2", "slot-3"] {
            // Let the filler make the slot this call takes.
            tokio::time::sleep(Duration::from_millis(50)).await;
            runs.push(run_call(&sandbox, &registry, "cold", id).await);
        }
        runs
    });
    sandbox.stop_ready();
    sandbox::wait_idle();
    for data in &runs {
        assert_eq!(data["env_call_id"], data["call_id"], "{data}");
        assert_eq!(data["seen_file"], false, "{data}");
        assert!(
            !std::path::Path::new(data["home"].as_str().unwrap()).exists(),
            "scratch survived: {data}"
        );
    }
    let homes: std::collections::BTreeSet<&str> =
        runs.iter().map(|d| d["home"].as_str().unwrap()).collect();
    assert_eq!(
        homes.len(),
        runs.len(),
        "a scratch dir was reused: {runs:?}"
    );
}
