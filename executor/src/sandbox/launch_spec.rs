//! What a caller asks [`super::Sandbox::prepare`] to run ([`LaunchSpec`]), and the
//! arguments file of a `plain` tool.

use std::os::fd::OwnedFd;
use std::path::Path;

use super::netns::Proxy;
use super::scratch;

/// The folder of the scratch dir a call made in a context runs in ([`LaunchSpec::work`]).
pub const WORK_DIR: &str = "work";

/// What to run.
#[derive(Debug)]
pub struct LaunchSpec<'a> {
    /// The skill folder (read-only; the working directory unless `work` is set). `None`
    /// only for a command session outside any skill: no skill folder is reachable then.
    pub skill_dir: Option<&'a Path>,
    /// A call made in a context: it runs in `<scratch>/`[`WORK_DIR`]`/<this>` (relative,
    /// plain names only; empty for the work folder itself), made here, empty and owned
    /// by the call's user, for the context's files to be laid out in before the spawn.
    pub work: Option<&'a Path>,
    /// argv; argv[0] is looked up on the sandbox PATH unless it holds a `/` (then it is
    /// taken relative to the skill folder, or to the working directory without one).
    pub argv: &'a [String],
    /// Variables beyond the contract's base set (SKILLBOX_*, declared names).
    pub env: Vec<(String, String)>,
    /// Memory limit of the call's processes.
    pub memory_mb: u64,
    /// Largest file its programs may write, in MiB (`RLIMIT_FSIZE`).
    pub max_file_mb: u64,
    /// Wall-clock timeout (sets the CPU-time limit too).
    pub timeout_ms: u64,
    /// The arguments file of a `plain` tool ([`ARGS_FILE_NAME`] in the scratch dir, named
    /// by `SKILLBOX_ARGS_FILE`).
    pub args_file: ArgsFile<'a>,
    /// The call's network namespace ([`super::netns::CallNetwork::namespace`], from
    /// [`super::Sandbox::call_network`]): the process joins it, runs under the network
    /// variant of the seccomp filters and may bind, listen and connect on its loopback;
    /// with [`Proxy::Egress`] it gets the proxy environment too. `None`: no network at
    /// all (no socket can be made).
    pub network: Option<(OwnedFd, Proxy)>,
    /// UNIX sockets ([`super::mntns`]): the process joins a mount namespace where its
    /// scratch dir is `/tmp` and the host's socket folders are empty, and runs under the
    /// UNIX variant of the seccomp filters. Needs `network` (its own namespace).
    pub unix_sockets: bool,
    /// Certificates (PEM) a network call's programs trust beyond the system roots
    /// ([`super::trust`]).
    pub trust_pem: Option<&'a str>,
    /// The skill's built dependencies (`crate::deps`): readable and executable through
    /// Landlock, their `bin/` first on `PATH`, the folder on `PYTHONPATH`.
    pub deps: Option<&'a Path>,
}

/// What [`super::Sandbox::prepare`] does about the arguments file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgsFile<'a> {
    /// No file, no `SKILLBOX_ARGS_FILE` (a `jsonrpc` tool).
    None,
    /// Writes these bytes and names the file.
    Write(&'a [u8]),
    /// Names the file but writes nothing yet: a prestarted `plain` tool, whose arguments
    /// the call writes ([`write_args_file`]) before it sends them on stdin.
    Later,
}

/// Writes a prestarted call's arguments file into `scratch` as a new file (never through
/// anything the tool put there: an existing name fails), owned by `uid` when given.
pub fn write_args_file(scratch: &Path, args: &[u8], uid: Option<u32>) -> std::io::Result<()> {
    scratch::write_owned(&scratch.join(ARGS_FILE_NAME), args, uid)
}

/// The file of a `plain` tool's arguments inside its scratch dir.
pub const ARGS_FILE_NAME: &str = "args.json";
