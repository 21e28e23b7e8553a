//! Resource and lifetime limits: processes (RLIMIT_NPROC, 256 per call user), memory
//! (256 MiB: a memory cgroup per call, or rlimits; `runtimes.rs` has more), file size
//! (RLIMIT_FSIZE, `execution.max_file_mb`, 1024 MiB by default), output (1 MiB),
//! wall-clock time, and processes that try to outlive their call.

use std::time::Duration;

use serde_json::Value;

use super::harness::{
    assert_mentions, chmod, is_dead, running_as_root, unique, Manifest, SkillRoot,
};

/// A skill that caps its files at 64 MiB (`execution.max_file_mb`).
const SMALL_FILES: &str = "execution: { max_file_mb: 64 }";
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

fn uid_of(data: &Value) -> u32 {
    u32::try_from(data["uid"].as_u64().unwrap()).unwrap()
}

#[test]
fn sandbox_limits_fork_flood() {
    let root = SkillRoot::new();
    root.python_skill(
        "attack",
        r#"
        pids, error = [], None
        for _ in range(400):
            try:
                pid = os.fork()
            except OSError as e:
                error = e.errno
                break
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            pids.append(pid)
        reply({"forks": len(pids), "errno": error, "pids": pids, "uid": os.getuid()})
        "#,
    );
    root.python_skill("after", r#"reply("still works")"#);
    let outcome = root.call("attack:run").run();
    let data = outcome.data();
    let forks = data["forks"].as_u64().unwrap();
    assert_eq!(data["errno"], libc::EAGAIN, "fork failed otherwise: {data}");
    assert!(
        (1..256).contains(&forks),
        "{forks} forks succeeded; RLIMIT_NPROC is 256 per call"
    );
    let uid = uid_of(data);
    for pid in data["pids"].as_array().unwrap() {
        is_dead(pid.as_i64().unwrap(), uid).unwrap();
    }
    assert!(
        outcome.elapsed < Duration::from_secs(15),
        "{:?}",
        outcome.elapsed
    );
    let next = root.call("after:run").run();
    assert_eq!(next.data(), "still works");
}

/// `exec`'s flags for each way of limiting memory this machine has: the cgroup per call
/// (where the executor can have one; root here) and rlimits (`--no-memory-cgroups`).
pub fn memory_modes() -> Vec<&'static [&'static str]> {
    let mut modes: Vec<&'static [&'static str]> = vec![&["--no-memory-cgroups"]];
    match skillbox_executor::sandbox::memcg::probe_mode() {
        skillbox_executor::sandbox::memcg::MemoryMode::Rlimit => {
            eprintln!("SKIPPED (cgroup mode): no writable cgroup with the memory controller here; rlimits only");
        }
        _ => modes.push(&[]),
    }
    modes
}

#[test]
fn sandbox_limits_memory_of_2_gib_allocation() {
    let root = SkillRoot::new();
    root.python_skill(
        "attack",
        r#"
        hog = bytearray(2 * 1024 ** 3)
        reply({"allocated": len(hog)})
        "#,
    );
    for flags in memory_modes() {
        let mut call = root.call("attack:run");
        for f in flags {
            call = call.flag(f);
        }
        let outcome = call.run();
        let error = outcome.failure("resource_limit");
        assert_mentions(error, "memory limit of 256 MiB");
        assert_mentions(error, "raise execution.memory_mb");
    }
}

/// A plain tool that Python ends with an uncaught MemoryError exits with code 1, not by a
/// signal: the memory limit stopped it (under rlimits, an allocation failed; under a
/// cgroup, the kernel killed it), and the report says so and names it.
#[test]
fn sandbox_reports_plain_python_tool_out_of_memory_as_memory_limit() {
    let root = SkillRoot::new();
    root.skill(
        "attack",
        "name: attack\n\
         description: allocates 2 GiB\n\
         tools:\n  \
           - name: run\n    \
             description: allocates 2 GiB past the memory limit\n    \
             command: [\"python3\", \"-c\", \"hog = bytearray(2 * 1024 ** 3)\"]\n    \
             protocol: plain\n    \
             parameters: {type: object}\n",
        &[],
    );
    for flags in memory_modes() {
        let mut call = root.call("attack:run");
        for f in flags {
            call = call.flag(f);
        }
        let outcome = call.run();
        let error = outcome.failure("resource_limit");
        assert_mentions(error, "memory limit of 256 MiB");
        match flags.is_empty() {
            true => assert_mentions(error, "the kernel killed a process of the call"),
            false => assert_mentions(error, "MemoryError"),
        }
    }
}

/// A tool that catches its MemoryError and reports it as its own error was still stopped
/// by the memory limit: `resource_limit` naming the limit, not `tool_error`.
#[test]
fn sandbox_reports_jsonrpc_tool_that_reports_its_memory_error_as_memory_limit() {
    let root = SkillRoot::new();
    root.python_skill(
        "attack",
        r#"
        try:
            hog = bytearray(2 * 1024 ** 3)
            reply({"allocated": len(hog)})
        except MemoryError as e:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": 0, "error": {"code": -32000, "message": "MemoryError: " + repr(e)}}) + "\n")
            sys.stdout.flush()
        "#,
    );
    let outcome = root.call("attack:run").run();
    let error = outcome.failure("resource_limit");
    assert_mentions(error, "memory limit of 256 MiB");
}

/// The limit itself: Python ignores SIGXFSZ, so its writes past the skill's 64 MiB fail
/// with EFBIG and the file stops at the limit.
#[test]
fn sandbox_caps_file_size_at_the_skills_max_file_mb() {
    let root = SkillRoot::new();
    root.python_skill_with(
        "attack",
        r#"
        path = os.environ["HOME"] + "/big"
        chunk = b"\0" * (1 << 20)
        error = None
        with open(path, "wb", buffering=0) as f:
            try:
                for _ in range(1024):
                    f.write(chunk)
            except OSError as e:
                error = e.errno
        reply({"errno": error, "size": os.path.getsize(path)})
        "#,
        Manifest {
            skill: SMALL_FILES,
            ..Manifest::default()
        },
    );
    let outcome = root.call("attack:run").run();
    let data = outcome.data();
    assert_eq!(data["errno"], libc::EFBIG, "{data}");
    assert_eq!(data["size"], MAX_FILE_BYTES, "{data}");
}

/// A tool killed by SIGXFSZ (the default action) is reported as a file-size limit.
#[test]
fn sandbox_stops_shell_tool_writing_1_gib_file() {
    let root = SkillRoot::new();
    root.skill(
        "attack",
        "name: attack\n\
         description: writes 1 GiB\n\
         execution: { max_file_mb: 64 }\n\
         tools:\n  \
           - name: run\n    \
             description: writes 1 GiB into scratch\n    \
             command: [\"sh\", \"-c\", \"exec head -c 1073741824 /dev/zero > \\\"$HOME/big\\\"\"]\n    \
             protocol: plain\n    \
             parameters: {type: object}\n",
        &[],
    );
    let outcome = root.call("attack:run").run();
    let error = outcome.failure("resource_limit");
    assert_mentions(error, "file size");
}

/// A Python tool that lets EFBIG end it (Python ignores SIGXFSZ) hit the file-size limit
/// too, and must be told so.
#[test]
fn sandbox_reports_python_writing_1_gib_file_as_file_size_limit() {
    let root = SkillRoot::new();
    root.python_skill_with(
        "attack",
        r#"
        chunk = b"\0" * (1 << 20)
        with open(os.environ["HOME"] + "/big", "wb", buffering=0) as f:
            for _ in range(1024):
                f.write(chunk)
        reply("wrote 1 GiB")
        "#,
        Manifest {
            skill: SMALL_FILES,
            ..Manifest::default()
        },
    );
    let outcome = root.call("attack:run").run();
    let error = outcome.failure("resource_limit");
    assert_mentions(error, "file size limit of 64 MiB");
    assert_mentions(error, "execution.max_file_mb");
    assert_mentions(error, "[grants.<skill>] max_file_mb");
}

/// The default fits media: a 200 MiB file is written and read back whole, and the limit
/// every program of the call has is the default 1024 MiB.
#[test]
fn media_file_of_200_mib_is_written_and_read_back_under_the_default() {
    let root = SkillRoot::new();
    root.python_skill(
        "media",
        r#"
        import hashlib
        path = os.environ["HOME"] + "/video.bin"
        chunk = bytes(range(256)) * 4096
        with open(path, "wb") as f:
            for _ in range(200):
                f.write(chunk)
        with open(path, "rb") as f:
            digest = hashlib.sha256()
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        limit = [l for l in open("/proc/self/limits") if l.startswith("Max file size")][0]
        reply({"size": os.path.getsize(path), "sha256": digest.hexdigest(), "limit": limit.split()[3]})
        "#,
    );
    let data = root.call("media:run").run().data().clone();
    assert_eq!(data["size"], 200 * 1024 * 1024, "{data}");
    let chunk: Vec<u8> = (0..=255u8).cycle().take(1024 * 1024).collect();
    let mut hash = ring::digest::Context::new(&ring::digest::SHA256);
    for _ in 0..200 {
        hash.update(&chunk);
    }
    let want: String = hash
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(data["sha256"], want.as_str(), "{data}");
    assert_eq!(data["limit"], "1073741824", "{data}");
}

#[test]
fn sandbox_kills_double_forked_setsid_grandchild() {
    let root = SkillRoot::new();
    root.python_skill(
        "attack",
        r#"
        r, w = os.pipe()
        child = os.fork()
        if child == 0:
            os.setsid()
            if os.fork() == 0:
                # The grandchild reports itself: /proc of other processes is not readable.
                os.write(w, json.dumps([os.getpid(), os.getppid(), os.getsid(0)]).encode())
                os.close(w)
                time.sleep(30)
                os._exit(0)
            os._exit(0)
        os.close(w)
        os.waitpid(child, 0)
        pid, ppid, sid = json.loads(os.read(r, 128))
        alive = attempt(lambda: os.kill(pid, 0))
        reply({
            "pid": pid, "state": "alive" if alive["ok"] else "gone", "ppid": ppid, "sid": sid,
            "me": os.getpid(), "my_sid": os.getsid(0), "uid": os.getuid(),
        })
        "#,
    );
    let outcome = root.call("attack:run").run();
    let data = outcome.data();
    assert_ne!(
        data["ppid"], data["me"],
        "the grandchild left the tree: {data}"
    );
    assert_ne!(
        data["sid"], data["my_sid"],
        "the grandchild left the session: {data}"
    );
    assert_eq!(
        data["state"], "alive",
        "the grandchild was alive during the call: {data}"
    );
    if running_as_root() {
        is_dead(data["pid"].as_i64().unwrap(), uid_of(data)).unwrap();
    } else {
        eprintln!("not root: a double-forked grandchild is out of reach (documented limit)");
    }
}

/// A chain of processes that each fork and exit at once races the end-of-call kill: the
/// kernel cancels a fork whose parent was signalled during the kill's walk of the process
/// list, so one `kill(-1)` leaves nothing of the chain. (The executor reaps the chain's
/// dead: left to this host's init, they held the user's process count for seconds, and
/// the next call given that user, here another test's, could not fork.)
#[test]
fn sandbox_kills_a_fork_chain_racing_the_kill() {
    if !running_as_root() {
        // Without a user of its own, a chain that left the tree would outlive the test.
        eprintln!("not root: a process outside the tool's tree is out of reach (documented limit)");
        return;
    }
    let root = SkillRoot::new();
    root.python_skill(
        "attack",
        r#"
        r, w = os.pipe()
        if os.fork() == 0:
            os.setsid()
            os.write(w, str(os.getpid()).encode())
            os.close(w)
            while True:
                if os.fork() != 0:
                    os._exit(0)
        os.close(w)
        sid = int(os.read(r, 32))
        time.sleep(0.2)
        reply({"sid": sid, "uid": os.getuid()})
        "#,
    );
    let outcome = root.call("attack:run").run();
    let data = outcome.data();
    let (sid, uid) = (data["sid"].as_i64().unwrap(), uid_of(data));
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    loop {
        let live = session_members(sid, uid);
        if live.is_empty() {
            break;
        }
        if std::time::Instant::now() >= deadline {
            // Stop the chain before failing, or it outlives the test.
            while !session_members(sid, uid).is_empty() {
                for pid in session_members(sid, uid) {
                    // SAFETY: kill takes plain integers.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            panic!("the fork chain of session {sid} survived the call: {live:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Live processes of `uid` in session `sid`.
fn session_members(sid: i64, uid: u32) -> Vec<i32> {
    use std::os::unix::fs::MetadataExt;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .parse::<i32>()
                .ok()
                .map(|pid| (pid, e))
        })
        .filter(|(_, e)| e.metadata().is_ok_and(|m| m.uid() == uid))
        .filter(|(_, e)| {
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                return false;
            };
            // After the command's closing parenthesis: state, ppid, pgrp, session.
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.split_whitespace().collect())
                .unwrap_or_default();
            fields.first().is_some_and(|s| *s != "Z" && *s != "X")
                && fields.get(3).and_then(|s| s.parse::<i64>().ok()) == Some(sid)
        })
        .map(|(pid, _)| pid)
        .collect()
}

fn timeout_skill(root: &SkillRoot, script: &str) {
    root.python_skill_with(
        "attack",
        script,
        Manifest {
            skill: "execution: { timeout_ms: 30000 }",
            tool: "    timeout_ms: 1500",
            ..Default::default()
        },
    );
}

fn assert_timed_out_at_1500_ms(root: &SkillRoot) {
    let outcome = root.call("attack:run").run();
    let error = outcome.failure("timeout");
    assert_mentions(error, "1500 ms");
    let ms = outcome.duration_ms();
    assert!((1500..6000).contains(&ms), "duration_ms {ms}");
}

#[test]
fn sandbox_times_out_endless_loop() {
    let root = SkillRoot::new();
    timeout_skill(&root, "while True:\n    pass\n");
    assert_timed_out_at_1500_ms(&root);
}

/// A sleeping tool uses no CPU time, so only the wall-clock timeout can end it.
#[test]
fn sandbox_times_out_sleeping_tool() {
    let root = SkillRoot::new();
    timeout_skill(&root, "time.sleep(60)\n");
    assert_timed_out_at_1500_ms(&root);
}

fn assert_output_limit(root: &SkillRoot) {
    let outcome = root.call("attack:run").run();
    let error = outcome.failure("resource_limit");
    assert_mentions(error, "output");
    assert_mentions(error, "1048576 bytes");
    assert!(
        outcome.elapsed < Duration::from_secs(10),
        "{:?}",
        outcome.elapsed
    );
}

#[test]
fn sandbox_limits_stdout_flood_of_50_mb() {
    let root = SkillRoot::new();
    root.python_skill(
        "attack",
        r#"
        chunk = "x" * (1 << 20)
        for _ in range(50):
            sys.stdout.write(chunk)
            sys.stdout.flush()
        reply("flooded")
        "#,
    );
    assert_output_limit(&root);
}

/// Valid JSON-RPC notifications are ignored by the protocol but still count as output.
#[test]
fn sandbox_limits_flood_of_jsonrpc_notifications() {
    let root = SkillRoot::new();
    root.python_skill(
        "attack",
        r#"
        line = json.dumps({"jsonrpc": "2.0", "method": "log", "params": {"text": "x" * 1000}}) + "\n"
        for _ in range(50_000):
            sys.stdout.write(line)
        sys.stdout.flush()
        reply("flooded")
        "#,
    );
    assert_output_limit(&root);
}

#[test]
fn sandbox_limits_stderr_flood_of_50_mb() {
    let root = SkillRoot::new();
    root.python_skill(
        "attack",
        r#"
        chunk = "x" * (1 << 20)
        for _ in range(50):
            sys.stderr.write(chunk)
            sys.stderr.flush()
        reply("flooded")
        "#,
    );
    assert_output_limit(&root);
}

/// The per-call user ids are claimed through host-wide lock files, so executors with
/// different scratch roots never hand out the same id (a call starting under one would
/// otherwise kill, with kill -1 as that user, a call in flight under the other).
#[test]
fn calls_under_different_scratch_roots_get_different_users() {
    assert!(running_as_root(), "per-call users need root");
    let root = SkillRoot::new();
    root.python_skill(
        "slow",
        r#"
        time.sleep(2)
        reply({"uid": os.getuid()})
        "#,
    );
    root.python_skill("quick", r#"reply({"uid": os.getuid()})"#);
    let scratch_a = tempfile::tempdir().unwrap();
    let scratch_b = tempfile::tempdir().unwrap();
    chmod(scratch_a.path(), 0o711);
    chmod(scratch_b.path(), 0o711);
    let (a, b) = (
        scratch_a.path().join(unique("scratch")),
        scratch_b.path().join(unique("scratch")),
    );
    let (slow, quick) = std::thread::scope(|s| {
        let slow = s.spawn(|| root.call("slow:run").scratch_root(&a).run());
        std::thread::sleep(Duration::from_millis(700));
        let quick = root.call("quick:run").scratch_root(&b).run();
        (slow.join().unwrap(), quick)
    });
    let (slow, quick) = (slow.data(), quick.data());
    assert_ne!(
        slow["uid"], quick["uid"],
        "two calls in flight share a user"
    );
}

/// A `plain` tool (a script, as `run_skill_script` runs one) that Python ends with an
/// uncaught EFBIG exits with code 1, not by a signal: still the file-size limit, named.
#[test]
fn plain_tool_exiting_on_efbig_is_reported_as_the_file_size_limit() {
    let root = SkillRoot::new();
    root.skill(
        "attack",
        "name: attack\n\
         description: writes past its limit\n\
         execution: { max_file_mb: 8 }\n\
         tools:\n  \
           - name: run\n    \
             description: writes 9 MiB\n    \
             command: [\"python3\", \"-c\", \"open(__import__('os').environ['HOME'] + '/f', 'wb').write(bytes(9 << 20))\"]\n    \
             protocol: plain\n    \
             parameters: {type: object}\n",
        &[],
    );
    let outcome = root.call("attack:run").run();
    let error = outcome.failure("resource_limit");
    assert_mentions(error, "file size limit of 8 MiB");
}

/// A runtime that crashes where an allocation failed without saying so (V8's failed
/// checks end in a trap: Node 18 in the container died by SIGTRAP with only a native
/// stack trace on stderr) was stopped by the memory limit: a crash by signal with its peak
/// resident set near the limit is `resource_limit`, naming the limit and what was resident.
/// The same crash with little memory in use stays the tool's own failure.
#[test]
fn a_silent_crash_at_the_memory_limit_is_the_memory_limit_and_one_far_below_it_is_not() {
    let root = SkillRoot::new();
    // Touches 220 MiB of the 256 MiB limit (or 8 MiB), then traps itself, printing nothing.
    let crash = |mib: u32| {
        format!(
            "[\"python3\", \"-c\", \"import os, signal; b = bytearray({mib} * 1024 * 1024); \
             b[::4096] = b'x' * len(b[::4096]); os.kill(os.getpid(), signal.SIGTRAP)\"]"
        )
    };
    let manifest = format!(
        "name: crashing\n\
         description: crashes by SIGTRAP\n\
         tools:\n  \
           - name: near\n    \
             description: crashes with most of its memory limit in use\n    \
             command: {near}\n    \
             protocol: plain\n    \
             parameters: {{type: object}}\n  \
           - name: far\n    \
             description: crashes with little memory in use\n    \
             command: {far}\n    \
             protocol: plain\n    \
             parameters: {{type: object}}\n",
        near = crash(220),
        far = crash(8),
    );
    root.skill("crashing", &manifest, &[]);
    let outcome = root.call("crashing:near").flag("--no-memory-cgroups").run();
    let error = outcome.failure("resource_limit");
    assert_mentions(error, "memory limit of 256 MiB");
    assert_mentions(error, "crashed (signal 5)");
    assert_mentions(error, "MiB resident");
    let outcome = root.call("crashing:far").flag("--no-memory-cgroups").run();
    let error = outcome.failure("tool_error");
    assert_mentions(error, "killed by signal 5");
}
