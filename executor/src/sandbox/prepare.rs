//! [`Sandbox::prepare`]: one call made ready to spawn, step by step (a user id and scratch
//! dir, the working directory and program, the arguments file, the Landlock ruleset, the
//! memory limit, the seccomp filters and the network's environment, then the command),
//! each step timed.

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::child::{ChildSetup, Seccomp};
use super::limits::{Limits, MemoryLimit};
use super::memcg::CallCgroup;
use super::reaper::{CallUser, Releaser, UserPool};
use super::scratch::{self, Scratch};
use super::slots::Slot;
use super::{env, landlock, mntns, netns, room, trust};
use super::{ArgsFile, CallGuard, Launch, LaunchSpec, PrepareTimings, PreparedCall, Sandbox};
use super::{SandboxError, ARGS_FILE_NAME, WORK_DIR};

/// What a call takes to run in: its user, its scratch dir made ahead and the Landlock
/// ruleset begun on it (each `None` when not made ahead, or not used).
type Taken = (Option<CallUser>, Option<Scratch>, Option<landlock::Begun>);

/// Longest a call waits for a user id that an ended call is still releasing.
const RELEASE_WAIT: Duration = Duration::from_secs(2);

impl Sandbox {
    /// Prepares one call.
    pub fn prepare(&self, spec: LaunchSpec<'_>) -> Result<PreparedCall, SandboxError> {
        self.prepare_as(spec, None)
    }

    /// Prepares one call, as user `prefer` when that id is free on this executor (a
    /// context's next call, whose kept files that user owns); else as any.
    pub fn prepare_as(
        &self,
        spec: LaunchSpec<'_>,
        prefer: Option<u32>,
    ) -> Result<PreparedCall, SandboxError> {
        let program = checked_program(&spec)?;
        let mut timings = PrepareTimings::default();
        let mut step = Instant::now();
        let mut lap = |d: &mut Duration| {
            let now = Instant::now();
            *d = now - step;
            step = now;
        };
        let (user, ready_scratch, begun) = self.take_user(prefer)?;
        lap(&mut timings.user);
        if let Some(skill_dir) = spec.skill_dir {
            if user.is_some() && !self.reachable_by_others(skill_dir) {
                return Err(SandboxError::SkillNotReadable(skill_dir.to_path_buf()));
            }
        }
        let uid = user.as_ref().map(|u| u.uid);
        let scratch = match ready_scratch {
            Some(scratch) => scratch,
            None => self.make_scratch(uid)?,
        };
        // Absolute: joining a call's mount namespace moves the process to its root before
        // it enters this folder.
        let cwd = std::path::absolute(self.working_dir(&spec, &scratch, uid)?)
            .map_err(SandboxError::Spawn)?;
        let program = resolve_program(spec.skill_dir.unwrap_or(&cwd), program)?;
        lap(&mut timings.scratch);
        let mut env = spec.env;
        self.args_file(spec.args_file, &scratch, uid, &mut env)?;
        lap(&mut timings.args_file);
        let network = spec.network.is_some();
        let landlock =
            self.landlock_ruleset(spec.skill_dir, spec.deps, (network, begun), &scratch)?;
        lap(&mut timings.landlock);
        let (mut cgroup, memory) = self.memory_limit(spec.memory_mb, &mut env)?;
        let mut setup = ChildSetup {
            limits: Limits::for_call(
                memory,
                spec.timeout_ms,
                self.config.max_processes,
                spec.max_file_mb,
            ),
            cgroup: cgroup.as_mut().and_then(CallCgroup::take_procs),
            cap_last: self.cap_last,
            user: user.as_ref().map(|u| (u.uid, u.gid())),
            landlock,
            seccomp: self.seccomp(network, spec.unix_sockets)?,
            new_session: self.new_session,
            controlling_terminal: false,
            netns: None,
            mntns: None,
        };
        if spec.unix_sockets {
            if !network {
                return Err(SandboxError::UnixSocketsWithoutNamespace);
            }
            let root = &self.config.scratch_root;
            let needed: Vec<PathBuf> = [spec.skill_dir, spec.deps, Some(root.as_path())]
                .into_iter()
                .flatten()
                .filter_map(|p| std::path::absolute(p).ok())
                .collect();
            let needed: Vec<&Path> = needed.iter().map(PathBuf::as_path).collect();
            let made = mntns::create(scratch.path(), &mntns::empty_dir(root), &needed);
            setup.mntns = Some(made.map_err(SandboxError::MountNamespace)?);
        }
        if let Some((namespace, proxy)) = spec.network {
            if proxy == netns::Proxy::Egress {
                self.proxy_env(&scratch, spec.trust_pem, uid, &mut env)?;
            }
            setup.netns = Some(namespace);
        }
        let launch = Launch::new(
            &program,
            &spec.argv[1..],
            env::base_with_deps(scratch.path(), spec.deps)
                .into_iter()
                .chain(env),
            &cwd,
            setup,
        )
        .map_err(SandboxError::Spawn)?;
        lap(&mut timings.command);
        Ok(PreparedCall {
            launch,
            guard: CallGuard {
                user,
                scratch,
                cgroup,
            },
            timings,
        })
    }
}

impl Sandbox {
    /// A user id and its scratch dir made ahead of calls (with the Landlock ruleset begun
    /// on it, under the sandbox), or a user id now (its scratch dir made next), or neither
    /// without user switching; `prefer` first when it is free.
    fn take_user(&self, prefer: Option<u32>) -> Result<Taken, SandboxError> {
        let of_slot = |slot: Slot| (slot.user, Some(slot.scratch), slot.landlock);
        if let (Some(uid), Some(pool)) = (prefer, &self.users) {
            if let Some(slot) = self.slots.as_ref().and_then(|s| s.take_user(uid)) {
                return Ok(of_slot(slot));
            }
            if let Some(user) = pool.acquire_idle(uid) {
                return Ok((Some(user), None, None));
            }
        }
        Ok(match self.slots.as_ref().and_then(|s| s.take()) {
            Some(slot) => of_slot(slot),
            None => match &self.users {
                Some(pool) => (Some(self.acquire_user(pool)?), None, None),
                None => (None, None, None),
            },
        })
    }

    /// A free user id; when all are held, waits (bounded) for ended calls' releases.
    fn acquire_user(&self, pool: &Arc<UserPool>) -> Result<CallUser, SandboxError> {
        let deadline = Instant::now() + RELEASE_WAIT;
        loop {
            if let Some(user) = pool.acquire() {
                return Ok(user);
            }
            if !Releaser::global().wait_one(deadline) {
                return Err(SandboxError::Busy(self.config.max_concurrent_calls));
            }
        }
    }

    /// A scratch dir made now, waiting for room when the scratch root is full
    /// ([`room::when_room`]).
    fn make_scratch(&self, uid: Option<u32>) -> Result<Scratch, SandboxError> {
        room::when_room(|| Scratch::create(&self.config.scratch_root, uid))
            .map_err(|source| self.scratch_error(source))
    }

    /// A failure to make something in the scratch root, naming it.
    fn scratch_error(&self, source: std::io::Error) -> SandboxError {
        SandboxError::Scratch {
            root: self.config.scratch_root.clone(),
            source,
        }
    }

    /// Where the call runs: its work folder (made here, owned by the call's user) for a
    /// call in a context, else the skill folder, else the scratch dir.
    fn working_dir(
        &self,
        spec: &LaunchSpec<'_>,
        scratch: &Scratch,
        uid: Option<u32>,
    ) -> Result<PathBuf, SandboxError> {
        Ok(match spec.work {
            Some(sub) => {
                let work = scratch.path().join(WORK_DIR);
                let cwd = work.join(sub);
                room::when_room(|| scratch::make_owned_dirs(scratch.path(), &cwd, uid))
                    .map_err(|source| self.scratch_error(source))?;
                cwd
            }
            None => match spec.skill_dir {
                Some(dir) => dir.to_path_buf(),
                None => scratch.path().to_path_buf(),
            },
        })
    }

    /// The arguments file of a `plain` tool, written now or later, named in `env`.
    fn args_file(
        &self,
        args_file: ArgsFile<'_>,
        scratch: &Scratch,
        uid: Option<u32>,
        env: &mut Vec<(String, String)>,
    ) -> Result<(), SandboxError> {
        if args_file == ArgsFile::None {
            return Ok(());
        }
        let path = scratch.path().join(ARGS_FILE_NAME);
        if let ArgsFile::Write(args) = args_file {
            room::when_room(|| scratch::write_owned(&path, args, uid))
                .map_err(|source| self.scratch_error(source))?;
        }
        env.push((
            "SKILLBOX_ARGS_FILE".to_string(),
            path.to_string_lossy().into_owned(),
        ));
        Ok(())
    }

    /// The call's Landlock ruleset: the skill folder, its dependencies and the scratch
    /// dir, with the network of its own namespace for a `network` call; none without the
    /// sandbox. A ruleset `begun` ahead on this scratch dir is finished when its network
    /// is the call's; else the ruleset is built here.
    fn landlock_ruleset(
        &self,
        skill_dir: Option<&Path>,
        deps: Option<&Path>,
        (network, begun): (bool, Option<landlock::Begun>),
        scratch: &Scratch,
    ) -> Result<Option<landlock::OwnProcRule>, SandboxError> {
        // The ruleset is handed to the child by fd; a sandboxed call without one would run
        // unconfined, so it fails here instead (Landlock is checked at start, too).
        let Some(_) = self.filters else {
            return Ok(None);
        };
        let net = if network {
            landlock::NetAccess::OwnNamespace
        } else {
            landlock::NetAccess::None
        };
        let child = match begun.filter(|b| b.net() == net) {
            Some(begun) => Some(begun.finish(skill_dir, deps)?),
            None => landlock::build(skill_dir, deps, scratch.path(), &self.runtime_rules, net)?,
        };
        Ok(Some(child.ok_or_else(|| SandboxError::Unenforceable {
            problems: vec!["the kernel did not enforce the call's Landlock ruleset".into()],
        })?))
    }

    /// The memory limit: the call's cgroup where the executor has a subtree, rlimits
    /// otherwise (and the JVM told the limit in `env`, which it reads from a cgroup by
    /// itself).
    fn memory_limit(
        &self,
        memory_mb: u64,
        env: &mut Vec<(String, String)>,
    ) -> Result<(Option<CallCgroup>, MemoryLimit), SandboxError> {
        let cgroup = match &self.memcg {
            Some(memcg) => Some(memcg.create(memory_mb).map_err(SandboxError::Cgroup)?),
            None => None,
        };
        let memory = match cgroup {
            Some(_) => MemoryLimit::Cgroup,
            None => {
                env.push((
                    "JAVA_TOOL_OPTIONS".into(),
                    format!("-XX:MaxRAM={memory_mb}m"),
                ));
                MemoryLimit::Rlimit(memory_mb)
            }
        };
        Ok((cgroup, memory))
    }

    /// How the child gets its seccomp filters: none without the sandbox, inherited from a
    /// spawner thread, or installed by a `network` call's process itself.
    fn seccomp(&self, network: bool, unix: bool) -> Result<Seccomp, SandboxError> {
        // A network call's process joins its namespace between clone and exec, which
        // takes `setns`: under the tool filters (inherited from a spawner thread) it
        // would need `setns` on every tool's allow list. So it is cloned from a thread
        // without filters and installs its own after the `setns` (the kernel converts
        // and JIT-compiles them for that process: ~0.12 ms, docs/hot-path.md, next to
        // ~1 ms for the namespace itself).
        if let (Some(_), true, Some(unix_filters)) = (&self.filters, unix, &self.unix_filters) {
            return Ok(Seccomp::Install(Arc::clone(unix_filters)));
        }
        Ok(match (&self.filters, network, &self.network_filters) {
            (None, _, _) => Seccomp::Off,
            (Some(_), false, _) => Seccomp::Inherit,
            (Some(_), true, Some(network)) => Seccomp::Install(Arc::clone(network)),
            (Some(_), true, None) => {
                return Err(SandboxError::NoNetworkNamespaces);
            }
        })
    }

    /// The proxy environment of a call with egress, and the certificates its programs
    /// trust (`trust_pem` with the system roots, in the scratch dir).
    fn proxy_env(
        &self,
        scratch: &Scratch,
        trust_pem: Option<&str>,
        uid: Option<u32>,
        env: &mut Vec<(String, String)>,
    ) -> Result<(), SandboxError> {
        env.extend(env::proxy());
        let bundle = room::when_room(|| trust::bundle_for(scratch.path(), trust_pem, uid))
            .map_err(|source| self.scratch_error(source))?;
        env.extend(bundle.as_deref().map(trust::env).unwrap_or_default());
        Ok(())
    }

    /// Whether the call's user can reach `skill_dir` ([`others_can_read`]), walked once
    /// per folder: the walk canonicalizes the path and reads the mode of every parent, a
    /// dozen system calls on every call otherwise. A folder found reachable is not walked
    /// again; one closed later fails in the tool with "Permission denied" instead.
    fn reachable_by_others(&self, skill_dir: &Path) -> bool {
        let known = |set: &HashSet<PathBuf>| set.contains(skill_dir);
        if self.reachable.lock().is_ok_and(|s| known(&s)) {
            return true;
        }
        let reachable = others_can_read(skill_dir);
        if reachable {
            if let Ok(mut set) = self.reachable.lock() {
                remember(&mut set, skill_dir, MAX_REMEMBERED_FOLDERS);
            }
        }
        reachable
    }
}

/// The spec's argv[0], once its work folder (plain names only) and its argv are found
/// sound.
fn checked_program<'a>(spec: &LaunchSpec<'a>) -> Result<&'a String, SandboxError> {
    if let Some(sub) = spec.work {
        if !sub
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
        {
            return Err(SandboxError::WorkDir(sub.to_path_buf()));
        }
    }
    spec.argv.first().ok_or(SandboxError::ProgramNotFound {
        program: String::new(),
        path: env::SANDBOX_PATH,
    })
}

/// Finds argv[0]: a path with `/` is taken relative to the skill folder; a bare name is
/// looked up on the sandbox PATH.
fn resolve_program(skill_dir: &Path, program: &str) -> Result<PathBuf, SandboxError> {
    if program.contains('/') {
        return Ok(skill_dir.join(program));
    }
    env::SANDBOX_PATH
        .split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
        .ok_or(SandboxError::ProgramNotFound {
            program: program.to_string(),
            path: env::SANDBOX_PATH,
        })
}

/// Most skill folders [`Sandbox::reachable_by_others`] remembers before starting over.
const MAX_REMEMBERED_FOLDERS: usize = 4096;

/// Adds `folder` to `set`, which starts over once it holds `max` (a long-running executor
/// sees the folder of every installed version of every skill).
fn remember(set: &mut HashSet<PathBuf>, folder: &Path, max: usize) {
    if set.len() >= max {
        set.clear();
    }
    set.insert(folder.to_path_buf());
}

/// Whether a user other than the owner can reach `dir`: o+x on every ancestor, o+rx on it.
fn others_can_read(dir: &Path) -> bool {
    let Ok(dir) = dir.canonicalize() else {
        return false;
    };
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.permissions().mode())
            .unwrap_or(0)
    };
    dir.ancestors().skip(1).all(|a| mode(a) & 0o001 != 0) && mode(&dir) & 0o005 == 0o005
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_folders_start_over_at_the_limit() {
        let mut set = HashSet::new();
        remember(&mut set, Path::new("/a"), 2);
        remember(&mut set, Path::new("/b"), 2);
        assert_eq!(set.len(), 2);
        remember(&mut set, Path::new("/c"), 2);
        assert_eq!(set, HashSet::from([PathBuf::from("/c")]));
    }
}
