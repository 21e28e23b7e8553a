//! One `skillbox-executor exec` of the suite: [`Call`] builds it up (arguments, env file,
//! scratch root, fd limit, prestart), runs it with a deadline and parses its one-line
//! result into an [`Outcome`].

use super::*;

/// One `skillbox-executor exec` invocation, built up then [`Call::run`].
#[derive(Debug)]
pub struct Call<'a> {
    root: &'a SkillRoot,
    tool: String,
    args: Value,
    env_flags: Vec<String>,
    flags: Vec<String>,
    process_env: Vec<(String, String)>,
    scratch_root: PathBuf,
    max_open_files: Option<u64>,
    deadline: Duration,
}

impl<'a> Call<'a> {
    /// A call of `tool` (`SKILL:TOOL`) on `root` with `{}` as arguments.
    pub(super) fn new(root: &'a SkillRoot, tool: &str) -> Self {
        Self {
            root,
            tool: tool.to_string(),
            args: Value::Object(Default::default()),
            env_flags: Vec::new(),
            flags: Vec::new(),
            process_env: Vec::new(),
            scratch_root: scratch_root(),
            max_open_files: None,
            deadline: EXEC_DEADLINE,
        }
    }
}

impl Call<'_> {
    /// Starts the executor with this RLIMIT_NOFILE.
    pub fn max_open_files(mut self, limit: u64) -> Self {
        self.max_open_files = Some(limit);
        self
    }

    /// Another limit than [`EXEC_DEADLINE`] for the whole `exec`.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Another `--scratch-root` than the suite's shared one.
    pub fn scratch_root(mut self, dir: &Path) -> Self {
        self.scratch_root = dir.to_path_buf();
        self
    }

    /// The arguments (`--args`).
    pub fn args(mut self, args: Value) -> Self {
        self.args = args;
        self
    }

    /// A `NAME=VALUE` line of the `--env-file` (values never go on the command line).
    pub fn env_flag(mut self, pair: &str) -> Self {
        self.env_flags.push(pair.to_string());
        self
    }

    /// A flag of `exec` (`--no-memory-cgroups`).
    pub fn flag(mut self, flag: &str) -> Self {
        self.flags.push(flag.to_string());
        self
    }

    /// A variable in the executor's own environment.
    pub fn process_env(mut self, name: &str, value: &str) -> Self {
        self.process_env.push((name.to_string(), value.to_string()));
        self
    }

    /// Runs the executor, checks that it exited 0 with one JSON line, and returns it.
    pub fn run(self) -> Outcome {
        let mut command = Command::new(EXECUTOR);
        command
            .arg("exec")
            .arg("--skills")
            .arg(self.root.skills())
            .arg("--tool")
            .arg(&self.tool)
            .arg("--scratch-root")
            .arg(&self.scratch_root)
            .args(&self.flags);
        // Large arguments go through a file: one command-line string is capped at 128 KiB.
        let args = self.args.to_string();
        let inputs = tempfile::tempdir().unwrap();
        if args.len() > 64 * 1024 {
            let file = inputs.path().join("args.json");
            std::fs::write(&file, &args).unwrap();
            command.arg("--args-file").arg(file);
        } else {
            command.arg("--args").arg(args);
        }
        if !self.env_flags.is_empty() {
            let file = inputs.path().join("env");
            std::fs::write(&file, self.env_flags.join("\n")).unwrap();
            command.arg("--env-file").arg(file);
        }
        command
            .envs(self.process_env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(limit) = self.max_open_files {
            use std::os::unix::process::CommandExt;
            // The soft limit only: the tool's own (higher) limit must stay settable.
            let mut rlimit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes one rlimit into a live local.
            let got = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rlimit) };
            assert_eq!(got, 0);
            rlimit.rlim_cur = limit;
            // SAFETY: setrlimit is async-signal-safe and reads a live local copied into the
            // closure; nothing else runs between fork and exec here.
            unsafe {
                command.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &rlimit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let started = Instant::now();
        let child = command.spawn().expect("start skillbox-executor");
        let executor_pid = child.id();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let output = match rx.recv_timeout(self.deadline) {
            Ok(output) => output.expect("wait for skillbox-executor"),
            Err(_) => {
                let pid = libc::pid_t::try_from(executor_pid).expect("a pid fits pid_t");
                // SAFETY: kill with integer arguments; the pid is our unreaped child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!(
                    "skillbox-executor exec --tool {} did not finish within {:?}",
                    self.tool, self.deadline
                );
            }
        };
        let elapsed = started.elapsed();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "skillbox-executor exited with {}; stdout: {stdout}; stderr: {stderr}",
            output.status
        );
        let lines: Vec<&str> = stdout.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(
            lines.len(),
            1,
            "expected one JSON line on stdout, got: {stdout}; stderr: {stderr}"
        );
        let result: Value = serde_json::from_str(lines[0])
            .unwrap_or_else(|e| panic!("result is not JSON ({e}): {stdout}"));
        Outcome {
            result,
            stderr,
            executor_pid,
            elapsed,
        }
    }
}

/// The result of one `exec`.
#[derive(Debug)]
pub struct Outcome {
    /// The printed result (docs/http-api.md).
    pub result: Value,
    /// The executor's log.
    pub stderr: String,
    /// The executor's process id (the tool's parent).
    pub executor_pid: u32,
    /// Wall-clock time of the whole `exec`.
    pub elapsed: Duration,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let log: String = self
            .stderr
            .chars()
            .rev()
            .take(2000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        write!(f, "result: {}\nexecutor log: {log}", self.result)
    }
}

impl Outcome {
    /// The data of a successful call; panics with the whole result otherwise.
    pub fn data(&self) -> &Value {
        assert_eq!(self.result["success"], true, "the call failed:\n{self}");
        assert!(self.result.get("error_kind").is_none(), "{self}");
        &self.result["data"]
    }

    /// The error message of a call that failed with `kind`; panics otherwise.
    pub fn failure(&self, kind: &str) -> &str {
        assert_eq!(
            self.result["success"], false,
            "the call succeeded, expected {kind}:\n{self}"
        );
        assert_eq!(self.result["error_kind"], kind, "wrong error_kind:\n{self}");
        self.result["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error message:\n{self}"))
    }

    /// `duration_ms` of the result.
    pub fn duration_ms(&self) -> u64 {
        self.result["duration_ms"]
            .as_u64()
            .unwrap_or_else(|| panic!("no duration_ms:\n{self}"))
    }

    /// `call_id` of the result.
    pub fn call_id(&self) -> &str {
        self.result["call_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no call_id:\n{self}"))
    }
}
