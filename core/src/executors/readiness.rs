//! Whether a skill can run now, the one verdict: [`context_readiness`] judges a skill's
//! prerequisites (programs, the any-of group, env values, the OS, its tools' programs)
//! against a [`Readiness`] — the executors' sandbox facts in the running core
//! ([`super::availability::SandboxReadiness`]), this host's `PATH` in the CLI
//! ([`HostReadiness`]), or [`AssumeReady`] for routing evaluations — and gives the
//! router's score term and the [`Availability`] every caller (routing, `/v1/skills`, the
//! catalogue, `route/execute`, `tools/call`) uses.

use std::path::Path;

use skillbox_protocol::skill::Skill;

/// Whether a skill can run now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    /// Every prerequisite holds.
    Ready,
    /// Something it needs is missing, in words.
    Unavailable(String),
}

impl Availability {
    /// Why it cannot run, if it cannot.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Availability::Ready => None,
            Availability::Unavailable(why) => Some(why),
        }
    }

    /// Whether it can run.
    pub fn is_ready(&self) -> bool {
        matches!(self, Availability::Ready)
    }
}

/// What the host offers a skill's prerequisites.
pub trait Readiness: std::fmt::Debug + Send + Sync {
    /// Whether `bin` is an executable on `PATH`.
    fn has_bin(&self, bin: &str) -> bool;
    /// Whether the core holds a value for env `name`.
    fn has_env(&self, name: &str) -> bool;
    /// The OS in the prerequisites' words (`linux`, `darwin`, `win32`).
    fn os(&self) -> &str;
    /// Whether the skill's OS list admits this host.
    fn on_os(&self, os: &[String]) -> bool {
        os.iter().any(|o| o == self.os())
    }
    /// Whether a network call can have its own network namespace where the tools run
    /// (a skill that declares network needs one, docs/sandbox.md). Assumed unless told.
    fn network_namespaces(&self) -> bool {
        true
    }
    /// Whether a call can have a `/tmp` of its own, for UNIX sockets
    /// (`execution.unix_sockets`). Assumed unless told.
    fn unix_sockets(&self) -> bool {
        true
    }
    /// Why the skill's dependencies keep it from running (`None`: none needed, or built).
    /// Assumed built unless told.
    fn deps_problem(&self, _skill: &Skill) -> Option<String> {
        None
    }
}

/// The real host: `PATH` lookups and an env check supplied by the caller (the
/// dispatcher's secrets in the core, the process environment in the CLI).
pub struct HostReadiness<F> {
    has_env: F,
    path: Vec<std::path::PathBuf>,
}

impl<F> std::fmt::Debug for HostReadiness<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostReadiness")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl<F: Fn(&str) -> bool + Send + Sync> HostReadiness<F> {
    /// Reads `PATH` now; env values are checked with `has_env`.
    pub fn new(has_env: F) -> Self {
        let path = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        Self { has_env, path }
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The OS name of this host in the prerequisites' words.
pub fn host_os() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    }
}

impl<F: Fn(&str) -> bool + Send + Sync> Readiness for HostReadiness<F> {
    fn has_bin(&self, bin: &str) -> bool {
        !bin.contains('/') && self.path.iter().any(|d| is_executable(&d.join(bin)))
    }
    fn has_env(&self, name: &str) -> bool {
        (self.has_env)(name)
    }
    fn os(&self) -> &str {
        host_os()
    }
}

/// A host where every prerequisite holds: for evaluating routing quality apart from
/// the machine it runs on.
#[derive(Debug, Clone, Copy, Default)]
pub struct AssumeReady;

impl Readiness for AssumeReady {
    fn has_bin(&self, _: &str) -> bool {
        true
    }
    fn has_env(&self, _: &str) -> bool {
        true
    }
    fn os(&self) -> &str {
        host_os()
    }
    fn on_os(&self, _: &[String]) -> bool {
        true
    }
}

/// The namespaces `skill`'s calls need and `host` cannot make, pushed on `missing`; how
/// many needs it has (each counts one in the readiness share).
fn namespace_needs(skill: &Skill, host: &dyn Readiness, missing: &mut Vec<String>) -> u32 {
    let mut counted = 0;
    // A call of a skill with network (declared or granted) reaches it only from a network
    // namespace of its own, behind the egress proxy; a skill without network that asks
    // for a loopback of its own listens only in one. Without namespaces neither runs as
    // it should: unavailable, saying why, never silently offline.
    let network = skill.permissions.is_network();
    if network || skill.execution.loopback {
        counted += 1;
        if !host.network_namespaces() {
            let what = if network {
                "its programs reach the network (permissions.network) only from a network \
                 namespace of the call's own, behind the egress proxy, and the executor \
                 cannot make network namespaces"
            } else {
                "it asks for a loopback of its own (execution.loopback) and the executor \
                 cannot make network namespaces"
            };
            missing.push(format!(
                "{what} (run it as root, or give its container CAP_SYS_ADMIN and \
                 CAP_NET_ADMIN as the shipped compose.yaml does; `skillbox doctor` says which \
                 it lacks)"
            ));
        }
    }
    if skill.execution.unix_sockets {
        counted += 1;
        if !host.unix_sockets() {
            missing.push(
                "it uses UNIX sockets (execution.unix_sockets, or [grants] unix_sockets), which \
                 a call gets only with a /tmp of its own, and the executor cannot make one (run \
                 it as root, or give its container CAP_SYS_ADMIN and CAP_SYS_CHROOT as the \
                 shipped compose.yaml does, with no AppArmor profile that forbids mount)"
                    .into(),
            );
        }
    }
    counted
}

/// The share of a skill's prerequisites that hold (the router's `context_readiness`) and
/// its [`Availability`]: the one verdict (routing, `/v1/skills`, the catalogue and every
/// call use it, with [`super::availability::SandboxReadiness`] in the running core). Counted:
/// each prerequisite program, the any-of group, each env value, the OS, and each tool
/// command's program that the prerequisites do not already name.
pub fn context_readiness(skill: &Skill, host: &dyn Readiness) -> (f64, Availability) {
    let p = &skill.prerequisites;
    let mut total = 0u32;
    let mut missing = Vec::new();
    for bin in &p.bins {
        total += 1;
        if !host.has_bin(bin) {
            missing.push(format!("program {bin} is not on the sandbox PATH"));
        }
    }
    if !p.any_bins.is_empty() {
        total += 1;
        if !p.any_bins.iter().any(|b| host.has_bin(b)) {
            missing.push(format!(
                "none of the programs {} is on the sandbox PATH",
                p.any_bins.join(", ")
            ));
        }
    }
    for program in skill.programs() {
        if p.bins.contains(&program) || p.any_bins.contains(&program) {
            continue;
        }
        total += 1;
        if !host.has_bin(&program) {
            missing.push(format!(
                "its tools run {program}, which is not on the sandbox PATH"
            ));
        }
    }
    for env in &p.env {
        total += 1;
        if !host.has_env(env) {
            missing.push(format!(
                "the core holds no value for {env}; set it in the core's environment or <state>/secrets.env"
            ));
        }
    }
    if !p.os.is_empty() {
        total += 1;
        if !host.on_os(&p.os) {
            missing.push(format!(
                "it runs on {} and the executor runs on {}",
                p.os.join("/"),
                host.os()
            ));
        }
    }
    total += namespace_needs(skill, host, &mut missing);
    if skill.dependencies.digest.is_some() {
        total += 1;
        if let Some(problem) = host.deps_problem(skill) {
            missing.push(problem);
        }
    }
    if total == 0 {
        return (1.0, Availability::Ready);
    }
    // Every missing entry counted one in `total`, so `met` never saturates.
    let met = total.saturating_sub(u32::try_from(missing.len()).unwrap_or(u32::MAX));
    let share = f64::from(met) / f64::from(total);
    let verdict = if missing.is_empty() {
        Availability::Ready
    } else {
        Availability::Unavailable(missing.join("; "))
    };
    (share, verdict)
}
