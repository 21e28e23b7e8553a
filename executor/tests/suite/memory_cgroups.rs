//! The memory cgroup per call, made ahead of the call that takes it or kept from a call
//! that left nothing in it: every call is held to the limit it asked for, whether the
//! cgroup had a lower or a higher one; an OOM kill in one call is not reported for the
//! next in the same cgroup; a cgroup still charged with a folder kept after its call is
//! never given to another. A sandbox in this test process, as `serve` has one, so that
//! calls follow each other in one executor.

use std::path::Path;
use std::time::Instant;

use serde_json::json;
use skillbox_executor::call;
use skillbox_executor::registry::Registry;
use skillbox_executor::sandbox::memcg::MemoryMode;
use skillbox_executor::sandbox::reaper::Releaser;
use skillbox_executor::sandbox::{self, ArgsFile, LaunchSpec, Sandbox, SandboxConfig};
use skillbox_protocol::methods::{Envelope, SecretValue, ToolExecuteParams};
use skillbox_protocol::result::ToolResult;
use skillbox_protocol::workdir::WorkDir;
use tokio::io::AsyncReadExt;

use super::context_files::runtime;
use super::harness::fake_core::FakeCore;
use super::harness::{scratch_root, shell_skill, SkillRoot, Start};

/// What one call saw: its cgroup line, whether it ended well, whether the kernel's OOM
/// killer ended it.
struct Seen {
    cgroup: String,
    ok: bool,
    oom: bool,
}

/// Runs a tool under `memory_mb` that prints its memory cgroup and then fills `fill_mb`
/// MiB, and releases the call (its cgroup removed, another made ahead) before returning.
async fn fill(sandbox: &Sandbox, skill_dir: &Path, memory_mb: u64, fill_mb: u64) -> Seen {
    let script = format!(
        "import sys\n\
         lines = open('/proc/self/cgroup').read().splitlines()\n\
         print([l for l in lines if ':memory:' in l or l.startswith('0::')][0], flush=True)\n\
         b = b'x' * ({fill_mb} << 20)\n\
         print(len(b))\n"
    );
    let argv: Vec<String> = ["/usr/bin/python3", "-c", &script]
        .map(String::from)
        .to_vec();
    let prepared = sandbox
        .prepare(LaunchSpec {
            deps: None,
            trust_pem: None,
            skill_dir: Some(skill_dir),
            work: None,
            argv: &argv,
            env: Vec::new(),
            memory_mb,
            max_file_mb: 1024,
            timeout_ms: 20_000,
            args_file: ArgsFile::None,
            network: None,
            unix_sockets: false,
        })
        .unwrap();
    let mut child = sandbox.spawn(prepared.launch).unwrap();
    let mut out = String::new();
    let mut stdout = child.stdout.take().unwrap();
    stdout.read_to_string(&mut out).await.unwrap();
    let status = child.wait().await.unwrap();
    child.reap();
    let oom = prepared.guard.oom_killed();
    prepared.guard.release();
    sandbox::wait_idle();
    Seen {
        cgroup: out.lines().next().unwrap_or_default().to_string(),
        ok: status.success(),
        oom,
    }
}

/// A skill `filler`, a sandbox in this process and a runtime for its calls; `None` (the
/// test skipped, saying why) when this process is not root or the sandbox has no memory
/// cgroups.
struct Filler {
    root: SkillRoot,
    skill_dir: std::path::PathBuf,
    sandbox: Sandbox,
    runtime: tokio::runtime::Runtime,
}

impl Filler {
    fn here() -> Option<Self> {
        if !nix::unistd::geteuid().is_root() {
            println!("SKIPPED {}: needs root (memory cgroups)", module_path!());
            return None;
        }
        let root = SkillRoot::new();
        root.python_skill_as(Start::Cold, "filler", "print('x')");
        let skill_dir = root.skills().join("filler");
        let sandbox = Sandbox::new(SandboxConfig {
            scratch_root: scratch_root(),
            ..SandboxConfig::default()
        })
        .unwrap();
        if sandbox.kernel().memory_limit == MemoryMode::Rlimit {
            println!("SKIPPED {}: no memory cgroup per call here", module_path!());
            return None;
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Some(Self {
            root,
            skill_dir,
            sandbox,
            runtime,
        })
    }
}

#[test]
fn each_call_is_held_to_its_own_limit_in_a_cgroup_made_ahead_or_kept() {
    let Some(Filler {
        root: _root,
        skill_dir,
        sandbox,
        runtime,
    }) = Filler::here()
    else {
        return;
    };
    // (limit, fill, fits): a cgroup kept or made ahead carries the last limit, so the
    // next call with another limit rewrites it, up (64 -> 256) and down; a call after an
    // OOM kill may get the same cgroup, whose count of kills is then not zero.
    let steps = [
        (64, 16, true),
        (64, 16, true),
        (64, 128, false),
        (256, 128, true),
        (64, 128, false),
        (256, 128, true),
        (64, 16, true),
    ];
    let mut cgroups = Vec::new();
    for (memory_mb, fill_mb, fits) in steps {
        let seen = runtime.block_on(fill(&sandbox, &skill_dir, memory_mb, fill_mb));
        assert!(
            seen.cgroup.contains("memory") || seen.cgroup.starts_with("0::"),
            "the tool printed no cgroup: {:?}",
            seen.cgroup
        );
        if fits {
            assert!(
                seen.ok && !seen.oom,
                "{fill_mb} MiB under {memory_mb} MiB did not run ({})",
                seen.cgroup
            );
        } else {
            assert!(
                !seen.ok && seen.oom,
                "{fill_mb} MiB under {memory_mb} MiB was not stopped by the OOM killer ({})",
                seen.cgroup
            );
        }
        cgroups.push(seen.cgroup);
    }
    let mut distinct = cgroups.clone();
    distinct.sort();
    distinct.dedup();
    assert!(
        distinct.len() < cgroups.len(),
        "no cgroup was kept for a later call: {cgroups:?}"
    );
}

/// A call leaves a 32 MiB folder on the executor's shelf, on a tmpfs with no swap: its
/// pages stay charged to the call's cgroup after the call. The next call, limited to 64
/// MiB, fills 40 MiB: in that cgroup it would be killed (32 + 40 + Python's own), so
/// the cgroup must not be kept for it.
#[test]
fn a_cgroup_still_charged_with_a_kept_folder_is_not_given_to_the_next_call() {
    if !nix::unistd::geteuid().is_root() {
        println!("SKIPPED {}: needs root (memory cgroups)", module_path!());
        return;
    }
    let tmpfs = tempfile::Builder::new()
        .prefix("skillbox-memcg-")
        .tempdir_in("/dev/shm")
        .unwrap();
    let sandbox = Sandbox::new(SandboxConfig {
        scratch_root: tmpfs.path().join("scratch"),
        max_concurrent_calls: 4,
        max_prestarted: 0,
        // A range of this test process's own (see context_shelf.rs).
        uid_base: 3_300_000 + (std::process::id() % 20_000) * 8,
        ..SandboxConfig::default()
    })
    .unwrap();
    if sandbox.kernel().memory_limit == MemoryMode::Rlimit {
        println!("SKIPPED {}: no memory cgroup per call here", module_path!());
        return;
    }
    let root = SkillRoot::new();
    shell_skill(
        &root,
        "for i in $(seq 1 32); do head -c 1048576 /dev/zero > part-$i.bin; done; echo kept\n",
    );
    root.skill(
        "filler",
        "name: filler\n\
         description: fills memory\n\
         execution: {memory_mb: 64}\n\
         tools:\n  \
           - name: run\n    \
             description: fills 40 MiB\n    \
             command: [\"python3\", \"-c\", \"b = b'x' * (40 << 20); print(len(b))\"]\n    \
             protocol: plain\n    \
             parameters: {type: object}\n",
        &[],
    );
    let core = FakeCore::with(&[]);
    let workdir = WorkDir {
        context_id: Some("big".into()),
        max_file_bytes: 2 << 20,
        max_total_bytes: 64 << 20,
        ..core.workdir()
    };
    let first = execute(&sandbox, &root, &core, "shell", Some(workdir));
    assert!(first.success, "{first:?}");
    assert!(
        core.file("part-32.bin").is_some(),
        "the folder was not synced"
    );
    let second = execute(&sandbox, &root, &core, "filler", None);
    assert!(
        second.success,
        "40 MiB under 64 MiB was stopped after a call left 32 MiB charged: {second:?}"
    );
}

/// An executor started in a PID namespace of its own while sharing this one's cgroup (as
/// `unshare --pid` on the host does) sees none of this process's pids: its start must not
/// take this executor's cgroup subtree for a dead one's and remove it (seen in CI: the
/// next call failed making its cgroup, "No such file or directory").
#[test]
fn an_executor_in_another_pid_namespace_leaves_this_ones_cgroups_alone() {
    let Some(Filler {
        root,
        skill_dir,
        sandbox,
        runtime,
    }) = Filler::here()
    else {
        return;
    };
    let before = runtime.block_on(fill(&sandbox, &skill_dir, 64, 1));
    assert!(before.ok, "{}", before.cgroup);
    let skills = root.skills().display().to_string();
    let out = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", super::harness::EXECUTOR])
        .args(["exec", "--skills", &skills, "--tool", "filler:run"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // It started (its sandbox, its sweep) and answered the call.
    assert!(text.contains(r#""call_id":"exec-1""#), "{text}");
    let after = runtime.block_on(fill(&sandbox, &skill_dir, 64, 1));
    assert!(
        after.ok,
        "the call after the other executor's start: {}",
        after.cgroup
    );
}

/// Runs `skill:run` on `sandbox`, in the folder `workdir` when given, and waits for the
/// call's end (its cgroup given back, its folder on the shelf).
fn execute(
    sandbox: &Sandbox,
    root: &SkillRoot,
    core: &FakeCore,
    skill: &str,
    workdir: Option<WorkDir>,
) -> ToolResult {
    let params = ToolExecuteParams {
        call_id: format!("memcg-{skill}"),
        capability_token: SecretValue("tok".into()),
        skill: skill.into(),
        tool: "run".into(),
        args: json!({}),
        envelope: Envelope::default(),
        traceparent: None,
        workdir,
        script: None,
    };
    let registry = Registry::load(root.skills());
    let result = runtime().block_on(call::execute(
        sandbox,
        &registry,
        core,
        params,
        Instant::now(),
    ));
    Releaser::global().wait_idle();
    result
}
