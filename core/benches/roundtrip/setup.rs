//! The round-trip bench's workspace (three skills: a JSON-RPC C tool, the same kind of
//! program as a `plain` tool, and a `python3 -c` tool cold and prestarted) and the running
//! `skillbox up` on it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A JSON-RPC stdio tool: one request line in, one result line out.
pub const JSONRPC_C: &str = r#"
#include <stdio.h>
int main(void) {
    char line[65536];
    if (!fgets(line, sizeof line, stdin)) return 1;
    fputs("{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"ok\":true}}\n", stdout);
    return 0;
}
"#;

/// A plain tool: reads its arguments to the end, prints `ok`.
const PLAIN_C: &str = r#"
#include <unistd.h>
int main(void) {
    char buf[4096];
    while (read(0, buf, sizeof buf) > 0) {}
    write(1, "ok\n", 3);
    return 0;
}
"#;

/// The Python the sandbox runs: the first `python3` on the sandbox's PATH (a pyenv shim
/// earlier on the bench's own PATH would time a shell script, not the interpreter).
pub fn sandbox_python() -> String {
    ["/usr/local/bin/python3", "/usr/bin/python3", "/bin/python3"]
        .iter()
        .find(|p| Path::new(p).is_file())
        .unwrap()
        .to_string()
}

/// The Python tool's program.
pub const PY_SOURCE: &str = "import sys; sys.stdin.read(); print('ok')";

/// The target folder (`target/release`'s parent's `release`, where `cargo bench` runs).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// A release binary of the workspace.
pub fn binary(name: &str) -> PathBuf {
    let here = target_dir().join(name);
    if here.is_file() {
        return here;
    }
    let release = target_dir().parent().unwrap().join("release").join(name);
    assert!(
        release.is_file(),
        "build the workspace first: cargo build --release --workspace"
    );
    release
}

/// Sets `p`'s mode.
pub fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Compiles `source` to `out`, static when the C library allows it.
fn gcc(source: &str, out: &Path) {
    let src = out.with_extension("c");
    std::fs::write(&src, source).unwrap();
    let static_ok = Command::new("gcc")
        .args(["-static", "-O2", "-o"])
        .arg(out)
        .arg(&src)
        .status()
        .unwrap()
        .success();
    if !static_ok {
        let status = Command::new("gcc")
            .args(["-O2", "-o"])
            .arg(out)
            .arg(&src)
            .status()
            .unwrap();
        assert!(status.success(), "gcc failed");
    }
    std::fs::remove_file(src).unwrap();
}

fn skill(ws: &Path, name: &str, yaml: &str, program: Option<&str>) {
    let dir = ws.join("skills").join(name);
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    chmod(&dir, 0o755);
    chmod(&dir.join("bin"), 0o755);
    if let Some(source) = program {
        gcc(source, &dir.join("bin/tool"));
    }
    std::fs::write(dir.join("skill.yaml"), yaml).unwrap();
}

/// A workspace with the bench's skills.
pub fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    chmod(ws.path(), 0o755);
    std::fs::create_dir_all(ws.path().join("skills")).unwrap();
    chmod(&ws.path().join("skills"), 0o755);
    skill(
        ws.path(),
        "native",
        "name: native\ndescription: JSON-RPC C tool\ntools:\n  - name: ping\n    description: answers ok\n    command: [\"bin/tool\"]\n",
        Some(JSONRPC_C),
    );
    skill(
        ws.path(),
        "plain",
        "name: plain\ndescription: plain C tool\ntools:\n  - name: run\n    description: prints ok\n    command: [\"bin/tool\"]\n    protocol: plain\n",
        Some(PLAIN_C),
    );
    let py = serde_json::to_string(&["python3", "-c", PY_SOURCE]).unwrap();
    skill(
        ws.path(),
        "py",
        &format!(
            "name: py\ndescription: python tools\nexecution: {{ prestart: 2 }}\ntools:\n  - name: warm\n    description: prestarted\n    command: {py}\n    protocol: plain\n"
        ),
        None,
    );
    skill(
        ws.path(),
        "pycold",
        &format!(
            "name: pycold\ndescription: python tools\ntools:\n  - name: cold\n    description: cold\n    command: {py}\n    protocol: plain\n"
        ),
        None,
    );
    // ROUNDTRIP_EXECUTOR: another executor binary (an older build, for an A/B run).
    let mut binary = std::env::var("ROUNDTRIP_EXECUTOR")
        .map(|b| format!("binary = {b:?}\n"))
        .unwrap_or_default();
    // ROUNDTRIP_EXECUTOR_TOML: more `[executor]` lines (e.g. `scratch_tmpfs_mb = 0`).
    if let Ok(lines) = std::env::var("ROUNDTRIP_EXECUTOR_TOML") {
        binary.push_str(&lines);
        binary.push('\n');
    }
    std::fs::write(
        ws.path().join("skillbox.toml"),
        format!(
            "[executor]\nlisten = \"127.0.0.1:0\"\ncallback_listen = \"127.0.0.1:0\"\n{binary}"
        ),
    )
    .unwrap();
    ws
}

/// CPU time (user + system, ms) of process `pid` itself and of its reaped children, from
/// `/proc/<pid>/stat` (clock ticks of 10 ms).
pub fn cpu_ms(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at field 3.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let tick = 1000.0 / 100.0;
    let field = |n: usize| f.get(n - 3).copied().unwrap_or(0.0);
    (
        (field(14) + field(15)) * tick,
        (field(16) + field(17)) * tick,
    )
}

/// The pids of `pid`'s children (started by any of its threads).
pub fn children(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .flatten()
        .flat_map(|t| {
            std::fs::read_to_string(t.path().join("children"))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// A running `skillbox up`; dropping it stops it.
pub struct Up {
    child: Child,
    /// The core's pid.
    pub pid: u32,
    /// The gateway's address.
    pub addr: String,
    /// The API token.
    pub token: String,
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// Whether `/healthz` reports the executor up.
fn executor_ok(addr: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = write!(
        s,
        "GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.contains("\"executor\":\"ok\"")
}

/// Starts `skillbox up` on `ws` and waits for its gateway.
pub fn start_up(ws: &Path) -> Up {
    // ROUNDTRIP_CORE: another `skillbox` binary (an older build, for an A/B run).
    let core = std::env::var_os("ROUNDTRIP_CORE")
        .map(PathBuf::from)
        .unwrap_or_else(|| binary("skillbox"));
    let child = Command::new(core)
        .args(["up", "--listen", "127.0.0.1:0", "--workspace"])
        .arg(ws)
        .stdout(Stdio::null())
        // ROUNDTRIP_STDERR=1: skillbox's log on the bench's stderr (what went wrong in a run).
        .stderr(match std::env::var_os("ROUNDTRIP_STDERR") {
            Some(_) => Stdio::inherit(),
            None => Stdio::null(),
        })
        .spawn()
        .unwrap();
    let state = ws.join(".skillbox");
    let deadline = Instant::now() + Duration::from_secs(60);
    let addr = loop {
        if let Ok(a) = std::fs::read_to_string(state.join("gateway.addr")) {
            break a;
        }
        assert!(Instant::now() < deadline, "skillbox up did not start");
        std::thread::sleep(Duration::from_millis(100));
    };
    let token = std::fs::read_to_string(state.join("api-token"))
        .unwrap()
        .trim()
        .to_string();
    while !executor_ok(&addr) {
        assert!(
            Instant::now() < deadline,
            "the executor did not become healthy"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Up {
        pid: child.id(),
        child,
        addr,
        token,
    }
}
