//! The memory cgroup per call, made ahead of the call that takes it: every call still gets
//! a cgroup of its own, never one an earlier call used, at the limit it asked for, whether
//! the cgroup made ahead had a lower or a higher one. A sandbox in this test process, as
//! `serve` has one, so that calls follow each other in one executor.

use std::path::Path;

use skillbox_executor::sandbox::memcg::MemoryMode;
use skillbox_executor::sandbox::{self, ArgsFile, LaunchSpec, Sandbox, SandboxConfig};
use tokio::io::AsyncReadExt;

use super::harness::{scratch_root, SkillRoot, Start};

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

#[test]
fn each_call_gets_a_fresh_cgroup_at_its_own_limit_though_it_was_made_ahead() {
    if !nix::unistd::geteuid().is_root() {
        println!("SKIPPED {}: needs root (memory cgroups)", module_path!());
        return;
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
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // (limit, fill, fits): the cgroups made ahead after each call carry the last limit,
    // so the next call with another limit rewrites it, up (64 -> 256) and down.
    let steps = [
        (64, 16, true),
        (64, 128, false),
        (256, 128, true),
        (64, 128, false),
        (256, 128, true),
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
    assert_eq!(
        distinct.len(),
        cgroups.len(),
        "a cgroup served twice: {cgroups:?}"
    );
}
