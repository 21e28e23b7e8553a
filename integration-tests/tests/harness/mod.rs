//! The harness: a workspace of test skills in a temporary folder, a running `skillbox up`
//! (or `skillbox serve`) on port 0, local HTTP servers as fetch targets, and small clients
//! for the gateway and the channel. Each test starts its own instance; dropping it kills
//! the process group.

pub mod gateway;
pub mod http;
pub mod npm_registry;
pub mod python;
pub mod server;
pub mod skills;
pub mod tls;
pub mod tls_server;

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use self::server::TestServer;

/// How long a start-up step (gateway address, executor health) may take on a loaded machine.
pub const START_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a polled condition may take to come true.
pub const POLL_TIMEOUT: Duration = Duration::from_secs(60);

/// The largest fetch response body the test config allows.
pub const MAX_RESPONSE_BYTES: usize = 4096;

/// A built binary of the workspace: next to the test binary's folder
/// (`target/debug/deps/all-xxxx` → `target/debug/NAME`).
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lives in target/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{name} not found at {}: build the workspace first (cargo build --workspace), \
         or run the suite with cargo nextest run --workspace",
        path.display()
    );
    path
}

/// A free TCP port on 127.0.0.1 (bound, read, released).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local_addr").port()
}

/// Panics (once per test process) unless `skillbox-executor probe` says this kernel
/// enforces the sandbox: `up` refuses to run tools otherwise, and every test would fail
/// later with a less direct message.
fn require_enforceable_sandbox() {
    static PROBED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    PROBED.get_or_init(|| {
        let out = Command::new(binary("skillbox-executor"))
            .args(["probe", "--json"])
            .output()
            .expect("run skillbox-executor probe");
        assert!(
            out.status.success(),
            "this machine cannot enforce the executor sandbox, which the end-to-end suite \
             needs (Landlock and seccomp): {}",
            String::from_utf8_lossy(&out.stdout)
        );
        binary("skillbox");
        for program in ["python3", "sh"] {
            assert!(
                on_sandbox_path(program),
                "the test skills need {program} on the sandbox PATH /usr/local/bin:/usr/bin:/bin"
            );
        }
    });
}

/// Whether `program` is on the sandbox PATH of docs/skill-format.md.
pub fn on_sandbox_path(program: &str) -> bool {
    ["/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .any(|d| Path::new(d).join(program).is_file())
}

/// Polls `f` every 50 ms until it returns `Some`, panicking with `what` after `timeout`.
pub fn poll<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "gave up after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What a test changes in the instance it starts.
#[derive(Debug, Clone)]
pub struct Options {
    /// `[approvals] timeout_ms`.
    pub approvals_timeout_ms: u64,
    /// `[approvals] auto_approve`.
    pub auto_approve: Vec<String>,
    /// `[approvals] bots_confirm_write`.
    pub bots_confirm_write: bool,
    /// `[executor] max_concurrent` (the product default when `None`).
    pub max_concurrent: Option<usize>,
    /// Put the callback listener on a port picked here (so a test can connect to it).
    pub fixed_callback_port: bool,
    /// Lines of `<state>/secrets.env`.
    pub secrets: Vec<(String, String)>,
    /// Run `skillbox serve` against this executor URL instead of `skillbox up`.
    pub executor_url: Option<String>,
    /// `[docker] socket` (default `off`: the suite does not depend on a Docker engine).
    pub docker_socket: String,
    /// A folder put first on the core's `PATH` (not the sandbox's).
    pub core_path_prefix: Option<PathBuf>,
    /// More skills: `(name, skill.yaml)`, written to `<ws>/skills/<name>/`.
    pub extra_skills: Vec<(String, String)>,
    /// More of `skillbox.toml`, appended as written (new sections only).
    pub extra_toml: String,
    /// More `[executor]` lines of `skillbox.toml`.
    pub executor_toml: String,
    /// More `[gateway]` lines of `skillbox.toml`.
    pub gateway_toml: String,
    /// Run on the workspace folder after the test skills are written, before the start.
    pub prepare: Option<fn(&Path)>,
    /// `RUST_LOG` of the instance (`warn` when `None`): a test that reads an info line
    /// of one module names it.
    pub rust_log: Option<&'static str>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            approvals_timeout_ms: 60_000,
            auto_approve: Vec::new(),
            bots_confirm_write: false,
            max_concurrent: None,
            fixed_callback_port: false,
            secrets: Vec::new(),
            executor_url: None,
            docker_socket: "off".into(),
            core_path_prefix: None,
            extra_skills: Vec::new(),
            extra_toml: String::new(),
            executor_toml: String::new(),
            gateway_toml: String::new(),
            prepare: None,
            rust_log: None,
        }
    }
}

/// A running skillbox on a temporary workspace.
#[derive(Debug)]
pub struct Skillbox {
    /// The temporary folder: `ws/` (the workspace), `outside/`, the logs.
    pub root: tempfile::TempDir,
    /// The workspace.
    pub ws: PathBuf,
    /// stdout of `skillbox up`.
    pub stdout: PathBuf,
    /// stderr of `skillbox up` and its executor.
    pub stderr: PathBuf,
    /// The fetch target the config allow-lists and the `net` skill declares.
    pub allowed: TestServer,
    /// A fetch target the `net` skill declares but the config does not allow-list.
    pub private: TestServer,
    /// The callback listener's address when `fixed_callback_port` was set.
    pub callback_addr: Option<String>,
    /// The gateway's `host:port` (once ready).
    pub addr: String,
    /// The API token (once ready).
    pub token: String,
    /// The executor URL printed by `up` (once ready).
    pub executor_url: String,
    child: Child,
}

impl Skillbox {
    /// Starts an instance and waits until its gateway reports the executor healthy.
    pub fn start(options: Options) -> Self {
        let mut sb = Self::spawn(options);
        sb.wait_ready();
        sb
    }

    /// Writes the workspace and starts the process without waiting for it.
    pub fn spawn(options: Options) -> Self {
        require_enforceable_sandbox();
        let root = tempfile::Builder::new()
            .prefix("skillbox-e2e-")
            .tempdir()
            .expect("tempdir");
        let ws = root.path().join("ws");
        let allowed = TestServer::start();
        let private = TestServer::start();
        skills::write_workspace(root.path(), &ws, allowed.port, private.port);
        let callback_addr = options
            .fixed_callback_port
            .then(|| format!("127.0.0.1:{}", free_port()));
        fs::write(
            ws.join("skillbox.toml"),
            config_toml(&options, allowed.port, callback_addr.as_deref()),
        )
        .expect("write skillbox.toml");
        if let Some(prepare) = options.prepare {
            prepare(&ws);
        }
        if !options.secrets.is_empty() {
            let state = ws.join(".skillbox");
            fs::create_dir_all(&state).expect("create .skillbox");
            skills::chmod(&state, 0o700);
            let lines: String = options
                .secrets
                .iter()
                .map(|(k, v)| format!("{k}={v}\n"))
                .collect();
            fs::write(state.join("secrets.env"), lines).expect("write secrets.env");
        }
        for (name, manifest) in &options.extra_skills {
            let dir = ws.join("skills").join(name);
            fs::create_dir_all(&dir).expect("create extra skill");
            fs::write(dir.join("skill.yaml"), manifest).expect("write extra skill");
            skills::chmod(&dir, 0o755);
            skills::chmod(&dir.join("skill.yaml"), 0o644);
        }
        let path = match &options.core_path_prefix {
            Some(prefix) => format!("{}:/usr/local/bin:/usr/bin:/bin", prefix.display()),
            None => "/usr/local/bin:/usr/bin:/bin".to_string(),
        };
        let stdout = root.path().join("skillbox.stdout");
        let stderr = root.path().join("skillbox.stderr");
        let command = if options.executor_url.is_some() {
            "serve"
        } else {
            "up"
        };
        let child = Command::new(binary("skillbox"))
            .arg(command)
            .arg("--workspace")
            .arg(&ws)
            .args(["--listen", "127.0.0.1:0"])
            .env_clear()
            .env("PATH", path)
            .env("RUST_LOG", options.rust_log.unwrap_or("warn"))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(fs::File::create(&stdout).expect("stdout file"))
            .stderr(fs::File::create(&stderr).expect("stderr file"))
            .process_group(0)
            .spawn()
            .expect("start skillbox");
        Self {
            root,
            ws,
            stdout,
            stderr,
            allowed,
            private,
            callback_addr,
            addr: String::new(),
            token: String::new(),
            executor_url: String::new(),
            child,
        }
    }

    /// Waits for the process to exit by itself (a start-up refusal); its exit status.
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "skillbox still runs after {START_TIMEOUT:?}:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for `.skillbox/gateway.addr`, the `executor:` line and a healthy executor.
    pub fn wait_ready(&mut self) {
        let addr_file = self.state().join("gateway.addr");
        let deadline = Instant::now() + START_TIMEOUT;
        let addr = loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "skillbox exited during start-up ({status}):\n{}",
                    self.logs()
                );
            }
            if let Ok(a) = fs::read_to_string(&addr_file) {
                if !a.trim().is_empty() {
                    break a.trim().to_string();
                }
            }
            assert!(
                Instant::now() < deadline,
                "no gateway address after {START_TIMEOUT:?}:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        self.addr = addr;
        self.token = fs::read_to_string(self.state().join("api-token"))
            .expect("api-token")
            .trim()
            .to_string();
        let stdout = self.stdout.clone();
        self.executor_url = poll("the executor: line of `up`", START_TIMEOUT, || {
            let text = fs::read_to_string(&stdout).ok()?;
            text.lines()
                .find_map(|l| l.trim().strip_prefix("executor:"))
                .map(|u| u.trim().to_string())
        });
        let ok = poll_quiet(START_TIMEOUT, || {
            let h = self.health();
            (h["executor"] == "ok").then_some(())
        });
        assert!(
            ok.is_some(),
            "the executor never became healthy:\n{}",
            self.logs()
        );
    }

    /// `<ws>/.skillbox`.
    pub fn state(&self) -> PathBuf {
        self.ws.join(".skillbox")
    }

    /// `<ws>/.skillbox/pki`.
    pub fn pki(&self) -> PathBuf {
        self.state().join("pki")
    }

    /// The executor's `host:port`.
    pub fn executor_addr(&self) -> String {
        self.executor_url
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .to_string()
    }

    /// stdout and stderr of the instance so far.
    pub fn logs(&self) -> String {
        let read = |p: &Path| fs::read_to_string(p).unwrap_or_default();
        format!(
            "--- stdout\n{}\n--- stderr\n{}",
            read(&self.stdout),
            read(&self.stderr)
        )
    }

    /// Runs the `skillbox` CLI against this workspace.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(binary("skillbox"))
            .args(args)
            .arg("--workspace")
            .arg(&self.ws)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .output()
            .expect("run the skillbox CLI")
    }

    /// The pid of the running `skillbox`.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The pid of the executor child of `skillbox up`, if one runs now.
    pub fn executor_pid(&self) -> Option<u32> {
        let tasks = fs::read_dir(format!("/proc/{}/task", self.pid())).ok()?;
        tasks
            .flatten()
            .filter_map(|t| fs::read_to_string(t.path().join("children")).ok())
            .flat_map(|c| {
                c.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok())
                    .collect::<Vec<_>>()
            })
            .find(|pid| {
                fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|c| String::from_utf8_lossy(&c).contains("skillbox-executor"))
                    .unwrap_or(false)
            })
    }
}

impl Drop for Skillbox {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Like [`poll`] but returns `None` on timeout instead of panicking.
fn poll_quiet<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn toml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

fn config_toml(options: &Options, allowed_port: u16, callback: Option<&str>) -> String {
    let mut executor = format!(
        "listen = \"127.0.0.1:0\"\ncallback_listen = \"{}\"\ncall_timeout_ms = 120000\n",
        callback.unwrap_or("127.0.0.1:0")
    );
    if let Some(n) = options.max_concurrent {
        executor.push_str(&format!("max_concurrent = {n}\n"));
    }
    if let Some(url) = &options.executor_url {
        executor.push_str(&format!("url = \"{url}\"\n"));
    }
    executor.push_str(&options.executor_toml);
    format!(
        "# written by the skillbox end-to-end suite\n\
         [gateway]\nmax_request_bytes = 1048576\n{}\n\
         [executor]\n{executor}\n\
         [fetch]\nallow_private = [\"127.0.0.1:{allowed_port}\"]\nmax_response_bytes = {MAX_RESPONSE_BYTES}\ntimeout_ms = 10000\n\n\
         [approvals]\ntimeout_ms = {}\nauto_approve = {}\nbots_confirm_write = {}\n\n\
         [docker]\nsocket = {:?}\n\n{}",
        options.gateway_toml,
        options.approvals_timeout_ms,
        toml_list(&options.auto_approve),
        options.bots_confirm_write,
        options.docker_socket,
        options.extra_toml,
    )
}
