//! The pieces of a skillbox call measured alone: the parent-side steps of `prepare()` and
//! `finish()`, and the child-side steps of `ChildSetup::apply` added one at a time.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{fork, ForkResult};
use skillbox_executor::sandbox::child::{self, ChildSetup, Seccomp};
use skillbox_executor::sandbox::limits::{self, Limits, MemoryLimit};
use skillbox_executor::sandbox::scratch::Scratch;
use skillbox_executor::sandbox::{landlock, reaper, seccomp, Sandbox};

use crate::idle_uid;
use crate::report::percentile;

/// Medians of the pieces of a skillbox call, measured alone, to see what dominates.
pub async fn components(
    sandbox: &Sandbox,
    skill_dir: &Path,
    n: usize,
) -> Result<Vec<(&'static str, Duration)>> {
    let root = sandbox.config().scratch_root.as_path();
    let runtime_paths = landlock::RuntimeRules::open(&landlock::runtime_paths())?;
    let tiny = skill_dir.join("tiny");
    let idle_uid = idle_uid(sandbox)?;
    let mut out = Vec::new();

    let mut timed = |name: &'static str, f: &mut dyn FnMut() -> Result<()>| -> Result<()> {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let start = Instant::now();
            f()?;
            v.push(start.elapsed());
        }
        out.push((name, percentile(&mut v, 0.5)));
        Ok(())
    };
    if sandbox.kernel().user_switch {
        timed(
            "`reaper::kill_user` of a uid that owns no process (one helper, two `kill(-1)`; at release, on the releaser thread)",
            &mut || {
                reaper::kill_user(idle_uid);
                Ok(())
            },
        )?;
    }
    if sandbox.kernel().user_switch {
        timed(
            "a kill helper: fork, setresuid, one kill(-1), wait (for reference)",
            &mut || {
                one_kill(idle_uid)?;
                Ok(())
            },
        )?;
    }
    timed(
        "`Scratch::create` + drop (mkdir, chown, rmdir)",
        &mut || {
            drop(Scratch::create(root, Some(idle_uid))?);
            Ok(())
        },
    )?;
    timed(
        "`landlock::build` (ruleset fd + one rule per runtime path)",
        &mut || {
            let scratch = skill_dir;
            drop(landlock::build(
                Some(skill_dir),
                None,
                scratch,
                &runtime_paths,
                landlock::NetAccess::None,
            )?);
            Ok(())
        },
    )?;
    // What is left of it on a call's path when the slot filler began it (slots.rs).
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let begun = landlock::begin(skill_dir, &runtime_paths, landlock::NetAccess::None)?;
        let start = Instant::now();
        drop(begun.map(|b| b.finish(Some(skill_dir), None)).transpose()?);
        v.push(start.elapsed());
    }
    out.push((
        "the same ruleset begun ahead with a slot: its call's part (`Begun::finish`, the skill folder's rule)",
        percentile(&mut v, 0.5),
    ));

    // tokio without the sandbox: the async spawn path with piped stdio, no pre_exec.
    let mut v = Vec::with_capacity(n);
    if tiny.is_file() {
        for _ in 0..n {
            let start = Instant::now();
            let status = tokio::process::Command::new(&tiny)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()?
                .wait()
                .await?;
            v.push(start.elapsed());
            if !status.success() {
                bail!("tiny exited with {status}");
            }
        }
        out.push((
            "tiny C via `tokio::process`, piped stdio, no sandbox (spawn → exit)",
            percentile(&mut v, 0.5),
        ));
    }
    Ok(out)
}

/// What `kill(-1, SIGKILL)` returns to a helper running as `uid`, which owns no process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillAnswer {
    /// 0: "signalled something", though the uid owns nothing (every target was EPERM).
    Success,
    /// -1 with ESRCH: nothing to signal.
    NoProcess,
    /// Any other failure (or the helper could not switch user).
    Other,
}

/// Forks a helper like `reaper::kill_user` does, switches to `uid`, calls
/// `kill(-1, SIGKILL)` once and reports what it returned.
pub fn one_kill(uid: u32) -> Result<KillAnswer> {
    // SAFETY: the child makes only system calls (setresuid, kill, _exit) and touches no
    // memory shared with other threads, as after any fork in a multi-threaded process.
    match unsafe { fork() }? {
        ForkResult::Child => {
            // SAFETY: plain system calls with integer arguments; _exit never returns.
            unsafe {
                if libc::setresuid(uid, uid, uid) != 0 {
                    libc::_exit(3);
                }
                let code = if libc::kill(-1, libc::SIGKILL) == 0 {
                    0
                } else if *libc::__errno_location() == libc::ESRCH {
                    1
                } else {
                    2
                };
                libc::_exit(code);
            }
        }
        ForkResult::Parent { child } => Ok(match waitpid(child, None)? {
            WaitStatus::Exited(_, 0) => KillAnswer::Success,
            WaitStatus::Exited(_, 1) => KillAnswer::NoProcess,
            _ => KillAnswer::Other,
        }),
    }
}

/// One cumulative step of the child setup.
#[derive(Debug, Clone, Copy)]
struct Step {
    name: &'static str,
    /// Install a `pre_exec` at all (std then forks instead of using vfork/posix_spawn).
    pre_exec: bool,
    /// Run `ChildSetup::apply` (setsid, rlimits, close_range, caps, no_new_privs).
    setup: bool,
    user: bool,
    landlock: bool,
    seccomp: bool,
}

/// Medians of the tiny tool spawned by `std::process` (stdio null) with more and more of
/// `ChildSetup::apply` in `pre_exec`, steps interleaved round by round; and the seccomp
/// programs' sizes.
pub fn child_steps(
    sandbox: &Sandbox,
    skill_dir: &Path,
    n: usize,
) -> Result<(Vec<(&'static str, Duration)>, String)> {
    let tiny = skill_dir.join("tiny");
    if !tiny.is_file() {
        return Ok((Vec::new(), String::new()));
    }
    let root = sandbox.kernel().user_switch;
    let idle_uid = idle_uid(sandbox)?;
    let filters = Arc::new(seccomp::compile()?);
    let described = format!("{filters:?}");
    let runtime_paths = landlock::RuntimeRules::open(&landlock::runtime_paths())?;
    let scratch = Scratch::create(&sandbox.config().scratch_root, root.then_some(idle_uid))?;
    let off = Step {
        name: "",
        pre_exec: false,
        setup: false,
        user: false,
        landlock: false,
        seccomp: false,
    };
    let mut steps = vec![
        Step {
            name: "no `pre_exec` (std may use vfork / posix_spawn)",
            ..off
        },
        Step {
            name: "empty `pre_exec` (forces a full fork)",
            pre_exec: true,
            ..off
        },
        Step {
            name: "+ setsid, rlimits, close_range, caps drop, no_new_privs",
            pre_exec: true,
            setup: true,
            ..off
        },
    ];
    if root {
        steps.push(Step {
            name: "+ per-call uid (setgroups, setresgid, setresuid)",
            pre_exec: true,
            setup: true,
            user: true,
            ..off
        });
    }
    steps.push(Step {
        name: "+ Landlock `restrict_self`",
        pre_exec: true,
        setup: true,
        user: root,
        landlock: true,
        ..off
    });
    steps.push(Step {
        name: "+ seccomp (the full child setup)",
        pre_exec: true,
        setup: true,
        user: root,
        landlock: true,
        seccomp: true,
    });

    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(n); steps.len()];
    for _ in 0..n {
        for (step, v) in steps.iter().zip(samples.iter_mut()) {
            let mut command = Command::new(&tiny);
            command
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if step.pre_exec {
                let setup = if step.setup {
                    Some(ChildSetup {
                        limits: Limits::for_call(
                            MemoryLimit::Rlimit(512),
                            10_000,
                            sandbox.config().max_processes,
                            limits::DEFAULT_MAX_FILE_MB,
                        ),
                        cap_last: child::cap_last(),
                        user: step.user.then_some((idle_uid, idle_uid)),
                        landlock: if step.landlock {
                            landlock::build(
                                Some(skill_dir),
                                None,
                                scratch.path(),
                                &runtime_paths,
                                landlock::NetAccess::None,
                            )?
                        } else {
                            None
                        },
                        seccomp: if step.seccomp {
                            Seccomp::Install(Arc::clone(&filters))
                        } else {
                            Seccomp::Off
                        },
                        new_session: true,
                        controlling_terminal: false,
                        netns: None,
                        mntns: None,
                        cgroup: None,
                    })
                } else {
                    None
                };
                // SAFETY: as in `Sandbox::prepare`: `ChildSetup::apply` only makes system
                // calls with data prepared here; the empty step does nothing.
                unsafe {
                    command.pre_exec(move || match setup.as_ref() {
                        Some(setup) => setup.apply(false, child::MovedFds::default()),
                        None => Ok(()),
                    });
                }
            }
            let start = Instant::now();
            let status = command.status()?;
            v.push(start.elapsed());
            if !status.success() {
                bail!("tiny exited with {status} at step {:?}", step.name);
            }
        }
    }
    let medians = steps
        .iter()
        .zip(samples.iter_mut())
        .map(|(step, v)| (step.name, percentile(v, 0.5)))
        .collect();
    Ok((medians, described))
}
