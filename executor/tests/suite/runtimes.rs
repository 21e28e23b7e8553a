//! Real runtimes under a skill's default limits (256 MiB of memory): Node, the JVM and a
//! Go program start as declared tools, from `run_skill_script` and in an `exec_command`
//! session, under each way this machine has of limiting memory (a memory cgroup per call,
//! and rlimits with room for the address space runtimes reserve). And what the limit
//! still refuses: a Node program allocating past it, processes of one call adding up past
//! it (cgroup), a call moving itself out of its cgroup. Run in this process against a
//! [`FakeCore`]; a runtime the machine lacks is reported SKIPPED by name.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
use skillbox_executor::call;
use skillbox_executor::registry::Registry;
use skillbox_executor::sandbox::memcg::{self, MemoryMode};
use skillbox_executor::sandbox::{Sandbox, SandboxConfig};
use skillbox_executor::session::Sessions;
use skillbox_protocol::methods::{Envelope, ScriptRun, SecretValue, ToolExecuteParams};
use skillbox_protocol::result::{ErrorKind, ToolResult};
use skillbox_protocol::session::{Command, SessionExecParams, SessionLimits};

use super::context_files::runtime;
use super::harness::fake_core::FakeCore;
use super::harness::{assert_mentions, build_go, chmod, have, scratch_root, unique, SkillRoot};

/// A sandbox limiting memory by a cgroup per call (`true`) or by rlimits.
fn sandbox(cgroups: bool) -> Sandbox {
    let sandbox = Sandbox::new(SandboxConfig {
        scratch_root: scratch_root(),
        memory_cgroups: cgroups,
        ..SandboxConfig::default()
    })
    .unwrap();
    let mode = sandbox.kernel().memory_limit;
    assert_eq!(mode != MemoryMode::Rlimit, cgroups, "{mode:?}");
    sandbox
}

/// The modes this machine has: rlimits always, a cgroup per call where one can be had.
fn modes() -> Vec<bool> {
    match memcg::probe_mode() {
        MemoryMode::Rlimit => {
            eprintln!("SKIPPED (cgroup mode): no writable cgroup with the memory controller here");
            vec![false]
        }
        _ => vec![false, true],
    }
}

/// Whether the cgroup mode can be tested here; says SKIPPED with `test` otherwise.
fn cgroup_mode_or_skip(test: &str) -> bool {
    let here = memcg::probe_mode() != MemoryMode::Rlimit;
    if !here {
        eprintln!("SKIPPED {test}: no writable cgroup with the memory controller here");
    }
    here
}

/// A Go program printing a line, built into `dir` with the machine's Go toolchain.
fn go_program(dir: &Path) -> Option<PathBuf> {
    build_go(
        dir,
        "hello-go",
        "package main\nimport \"fmt\"\nfunc main() { fmt.Println(\"hello from go\") }\n",
    )
}

/// The runtimes this machine has, each as (name, argv of a command that starts it, what
/// it prints on stdout or stderr); the Go program is built into the folder of the skill
/// `rt` of `root` (where a call of the skill may read it).
fn runtimes(root: &SkillRoot) -> Vec<(&'static str, Vec<String>, &'static str)> {
    let dir = root.skills().join("rt").join("bin");
    let mut out = Vec::new();
    if have("node") {
        out.push((
            "node",
            vec!["node".into(), "-e".into(), "console.log(1+1)".into()],
            "2",
        ));
        // A WebAssembly memory reserves about 10 GiB of address space (Node's fetch
        // parses HTTP with one): under rlimits, RLIMIT_AS must leave room for it.
        out.push((
            "wasm",
            vec![
                "node".into(),
                "-e".into(),
                "new WebAssembly.Memory({initial: 1}); console.log(\"wasm ok\")".into(),
            ],
            "wasm ok",
        ));
    }
    if have("java") {
        out.push(("java", vec!["java".into(), "-version".into()], "version"));
    }
    if let Some(go) = go_program(&dir) {
        let go = go.to_string_lossy().into_owned();
        out.push(("go", vec![go], "hello from go"));
    }
    out
}

/// A skill `rt` with a `plain` tool per runtime (named for it), a script per runtime
/// (`scripts/<name>.sh`, `scripts/hello.js`) and `scripts/hog.js`, which allocates until
/// it is stopped.
fn runtime_skill(root: &SkillRoot, runtimes: &[(&str, Vec<String>, &str)]) {
    let mut manifest = String::from("name: rt\ndescription: runtimes\ntools:\n");
    let mut files: Vec<(String, String)> = vec![
        (
            "scripts/hello.js".into(),
            "console.log('hello from node')\n".into(),
        ),
        (
            "scripts/hog.js".into(),
            "const kept = [];\nfor (;;) kept.push(Buffer.alloc(1 << 20, 1));\n".into(),
        ),
    ];
    for (name, argv, _) in runtimes {
        manifest.push_str(&format!(
            "  - name: {name}\n    description: starts {name}\n    command: {}\n    protocol: plain\n    parameters: {{type: object}}\n",
            json!(argv)
        ));
        let quoted: Vec<String> = argv.iter().map(|a| format!("'{a}'")).collect();
        files.push((
            format!("scripts/{name}.sh"),
            format!("exec {} 2>&1\n", quoted.join(" ")),
        ));
    }
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let dir = root.skill("rt", &manifest, &files);
    // The skill's files are made readable (0644); the Go program must stay executable.
    let go = dir.join("bin").join("hello-go");
    if go.exists() {
        chmod(&go, 0o755);
    }
}

/// Runs `tool` of `rt`, or its script `script`.
fn execute(sandbox: &Sandbox, root: &SkillRoot, tool: &str, script: Option<&str>) -> ToolResult {
    let params = ToolExecuteParams {
        call_id: unique("rt"),
        capability_token: SecretValue("tok".into()),
        skill: "rt".into(),
        tool: tool.into(),
        args: json!({}),
        envelope: Envelope::default(),
        traceparent: None,
        workdir: None,
        script: script.map(|path| ScriptRun {
            path: path.into(),
            args: Vec::new(),
        }),
    };
    let core = FakeCore::with(&[]);
    let registry = Registry::load(root.skills());
    runtime().block_on(call::execute(
        sandbox,
        &registry,
        &core,
        params,
        Instant::now(),
    ))
}

/// What a successful plain run printed, stdout and stderr.
fn printed(r: &ToolResult, what: &str) -> String {
    assert!(r.success, "{what}: {r:?}");
    let data: &Value = r.data.as_ref().unwrap();
    format!(
        "{}{}",
        data["stdout"].as_str().unwrap(),
        data["stderr"].as_str().unwrap()
    )
}

#[test]
fn node_java_and_go_start_under_the_default_memory_limit_as_tools_and_scripts() {
    let root = SkillRoot::new();
    let runtimes = runtimes(&root);
    runtime_skill(&root, &runtimes);
    for cgroups in modes() {
        let sandbox = sandbox(cgroups);
        for (name, _, says) in &runtimes {
            let what = format!("{name} as a declared tool (cgroups: {cgroups})");
            assert_mentions(&printed(&execute(&sandbox, &root, name, None), &what), says);
            let script = format!("scripts/{name}.sh");
            let what = format!("{name} from run_skill_script (cgroups: {cgroups})");
            let r = execute(&sandbox, &root, "run_skill_script", Some(&script));
            assert_mentions(&printed(&r, &what), says);
        }
        if have("node") {
            // `run_skill_script hello.js` answered "killed by signal 5" under the old
            // 256 MiB address-space limit.
            let r = execute(
                &sandbox,
                &root,
                "run_skill_script",
                Some("scripts/hello.js"),
            );
            assert_mentions(&printed(&r, "hello.js"), "hello from node");
        }
    }
}

#[test]
fn node_java_and_go_start_in_an_exec_command_session_of_256_mib() {
    let root = SkillRoot::new();
    let runtimes = runtimes(&root);
    runtime_skill(&root, &runtimes);
    let core = Arc::new(FakeCore::with(&[]));
    let registry = Registry::load(root.skills());
    let rt = runtime();
    for cgroups in modes() {
        let sessions = Sessions::new(sandbox(cgroups), Arc::clone(&core));
        for (name, argv, says) in &runtimes {
            let mut params = session_params(&core, argv.clone());
            params.skill = Some("rt".into());
            let answer = rt.block_on(sessions.exec(&registry, params)).unwrap();
            assert_eq!(
                answer.exit_code,
                Some(0),
                "{name} (cgroups: {cgroups}): {answer:?}"
            );
            assert_mentions(&answer.output, says);
        }
    }
}

fn session_params(core: &FakeCore, argv: Vec<String>) -> SessionExecParams {
    SessionExecParams {
        session_id: unique("s"),
        call_id: "session-call".into(),
        capability_token: SecretValue("tok".into()),
        skill: None,
        cmd: Command::Argv(argv),
        workdir: None,
        files: core.workdir(),
        envelope: Envelope::default(),
        yield_ms: 20_000,
        max_output_bytes: 1 << 20,
        tty: false,
        limits: SessionLimits {
            idle_timeout_ms: 30_000,
            lifetime_ms: 60_000,
            output_kept_bytes: 1 << 20,
            memory_mb: 256,
            quiet_ms: skillbox_protocol::session::DEFAULT_QUIET_MS,
        },
        traceparent: None,
    }
}

/// The attack the larger reserve must not open: a Node program that keeps allocating is
/// stopped at 256 MiB in either mode, and the call says which limit and how to raise it.
#[test]
fn node_allocating_past_the_memory_limit_is_stopped_as_resource_limit() {
    if !have("node") {
        return;
    }
    let root = SkillRoot::new();
    runtime_skill(&root, &[]);
    for cgroups in modes() {
        let r = execute(
            &sandbox(cgroups),
            &root,
            "run_skill_script",
            Some("scripts/hog.js"),
        );
        assert_eq!(
            r.error_kind,
            Some(ErrorKind::ResourceLimit),
            "cgroups: {cgroups}: {r:?}"
        );
        let error = r.error.as_deref().unwrap_or_default();
        assert_mentions(error, "memory limit of 256 MiB");
        assert_mentions(error, "raise execution.memory_mb");
    }
}

/// Under rlimits each process has its own 256 MiB; a memory cgroup counts the call's
/// processes together: three children of 120 MiB each are more than the call may use.
#[test]
fn memory_of_a_calls_processes_together_is_limited_by_its_cgroup() {
    if !cgroup_mode_or_skip("memory_of_a_calls_processes_together_is_limited_by_its_cgroup") {
        return;
    }
    let root = SkillRoot::new();
    root.skill(
        "rt",
        "name: rt\ndescription: forks\ntools: []\n",
        &[(
            "scripts/fork.py",
            "import os, time\n\
             pids = []\n\
             for _ in range(3):\n\
             \x20   pid = os.fork()\n\
             \x20   if pid == 0:\n\
             \x20       hog = bytearray(120 * 1024 * 1024)\n\
             \x20       time.sleep(5)\n\
             \x20       os._exit(0)\n\
             \x20   pids.append(pid)\n\
             codes = [os.waitpid(p, 0)[1] for p in pids]\n\
             print(codes)\n\
             raise SystemExit(0 if all(c == 0 for c in codes) else 1)\n",
        )],
    );
    let r = execute(
        &sandbox(true),
        &root,
        "run_skill_script",
        Some("scripts/fork.py"),
    );
    assert_eq!(r.error_kind, Some(ErrorKind::ResourceLimit), "{r:?}");
    assert_mentions(
        r.error.as_deref().unwrap_or_default(),
        "memory limit of 256 MiB",
    );
}

/// A call cannot leave its memory cgroup, nor raise its limit: the cgroup files are not
/// reachable (Landlock grants nothing under /sys), so each write to one of them that
/// exists on this host fails with EACCES.
#[test]
fn tool_cannot_move_out_of_its_memory_cgroup_or_raise_its_limit() {
    if !cgroup_mode_or_skip("tool_cannot_move_out_of_its_memory_cgroup_or_raise_its_limit") {
        return;
    }
    let root = SkillRoot::new();
    root.skill(
        "rt",
        "name: rt\ndescription: escapes\ntools: []\n",
        &[(
            "scripts/escape.py",
            "import errno, json, os\n\
             line = [l for l in open('/proc/self/cgroup') if ':memory:' in l or l.startswith('0::')][0]\n\
             path = line.strip().split(':', 2)[2]\n\
             tries = {}\n\
             for name, target in [\n\
             \x20   ('parent procs', '/sys/fs/cgroup/memory' + os.path.dirname(path) + '/cgroup.procs'),\n\
             \x20   ('root procs', '/sys/fs/cgroup/memory/cgroup.procs'),\n\
             \x20   ('v2 root procs', '/sys/fs/cgroup/cgroup.procs'),\n\
             \x20   ('own limit', '/sys/fs/cgroup/memory' + path + '/memory.limit_in_bytes'),\n\
             \x20   ('own v2 limit', '/sys/fs/cgroup' + path + '/memory.max')]:\n\
             \x20   if not os.path.exists(target):\n\
             \x20       continue\n\
             \x20   try:\n\
             \x20       with open(target, 'w') as f:\n\
             \x20           f.write(str(os.getpid()))\n\
             \x20       tries[name] = 'written'\n\
             \x20   except OSError as e:\n\
             \x20       tries[name] = errno.errorcode[e.errno]\n\
             print(json.dumps({'cgroup': path, 'tries': tries}))\n",
        )],
    );
    let r = execute(
        &sandbox(true),
        &root,
        "run_skill_script",
        Some("scripts/escape.py"),
    );
    let out = printed(&r, "escape.py");
    let seen: Value = serde_json::from_str(out.trim()).unwrap();
    assert!(
        seen["cgroup"].as_str().unwrap().contains("/call-"),
        "the call runs in its own cgroup: {seen}"
    );
    let tries = seen["tries"].as_object().unwrap();
    assert!(tries.len() >= 3, "{seen}");
    for (name, outcome) in tries {
        assert_eq!(outcome, "EACCES", "{name}: {seen}");
    }
}

/// An `exec_command` session whose process the kernel killed at the limit ends its
/// output with a line naming the limit and how to raise it.
#[test]
fn session_killed_at_its_memory_limit_says_so_in_its_output() {
    if !cgroup_mode_or_skip("session_killed_at_its_memory_limit_says_so_in_its_output") {
        return;
    }
    let core = Arc::new(FakeCore::with(&[]));
    let skills = tempfile::tempdir().unwrap();
    let registry = Registry::load(skills.path());
    let sessions = Sessions::new(sandbox(true), Arc::clone(&core));
    let argv = vec![
        "python3".into(),
        "-c".into(),
        "b = bytearray(1 << 30)".into(),
    ];
    let answer = runtime()
        .block_on(sessions.exec(&registry, session_params(&core, argv)))
        .unwrap();
    assert_eq!(answer.exit_code, Some(128 + libc::SIGKILL), "{answer:?}");
    assert_mentions(
        &answer.output,
        "[skillbox: resource_limit: memory limit of 256 MiB",
    );
    assert_mentions(&answer.output, "raise [exec] memory_mb");
}

/// Headless Chromium under rlimits (the shipped containers, where the executor has no
/// cgroup of its own): its allocator's pools and V8's sandbox cage need more address
/// space than the old 32 GiB reserve (it trapped at start), and `RLIMIT_DATA` counts what
/// it reserves writable, so a browser skill declares 1024 MiB. The page's script runs.
#[test]
fn headless_chromium_starts_under_rlimits_with_a_browser_skills_memory() {
    if !have("chromium-headless-shell") {
        eprintln!("SKIPPED: chromium-headless-shell is not installed here");
        return;
    }
    let root = SkillRoot::new();
    root.skill(
        "browser",
        "name: browser\n\
         description: renders a page\n\
         execution: { memory_mb: 1024, timeout_ms: 60000 }\n\
         tools:\n  \
           - name: run\n    \
             description: dumps the DOM of a page whose script writes its text\n    \
             command: [\"chromium-headless-shell\", \"--no-sandbox\", \"--no-zygote\", \"--in-process-gpu\", \"--disable-gpu\", \"--disable-dev-shm-usage\", \"--dump-dom\", \"data:text/html,<p id=m>static</p><script>m.textContent='ran '+6*7</script>\"]\n    \
             protocol: plain\n    \
             parameters: {type: object}\n",
        &[],
    );
    for _ in 0..3 {
        let outcome = root.call("browser:run").flag("--no-memory-cgroups").run();
        let stdout = outcome.data()["stdout"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(stdout.contains("ran 42"), "{stdout}");
    }
}
