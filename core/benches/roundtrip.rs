//! Round trip of a trivial native tool through gateway → core → executor → sandbox and
//! back, at 1 and 16 concurrent clients. Starts the real `skillbox up` (built binaries in
//! the target dir) on a temporary workspace; writes `target/roundtrip-bench.md`.
//!
//! Run: `cargo build --release --workspace && cargo bench -p skillbox-core --bench roundtrip`.
//! The share of time in the sandboxed spawn is the executor's own `duration_ms` (spawn to
//! final answer) over the client's round trip.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOOL_C: &str = r#"
#include <stdio.h>
int main(void) {
    char line[65536];
    if (!fgets(line, sizeof line, stdin)) return 1;
    fputs("{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"ok\":true}}\n", stdout);
    return 0;
}
"#;

fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

fn binary(name: &str) -> PathBuf {
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

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    chmod(ws.path(), 0o755);
    let skill = ws.path().join("skills").join("native");
    std::fs::create_dir_all(skill.join("bin")).unwrap();
    chmod(&ws.path().join("skills"), 0o755);
    chmod(&skill, 0o755);
    chmod(&skill.join("bin"), 0o755);
    let src = ws.path().join("tool.c");
    std::fs::write(&src, TOOL_C).unwrap();
    let out = skill.join("bin").join("tool");
    let status = Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap();
    assert!(status.success(), "gcc failed");
    std::fs::write(
        skill.join("skill.yaml"),
        "name: native\ndescription: Trivial native tool for the round-trip bench\ntools:\n  - name: ping\n    description: answers ok\n    command: [\"bin/tool\"]\n",
    )
    .unwrap();
    std::fs::write(
        ws.path().join("skillbox.toml"),
        "[executor]\nlisten = \"127.0.0.1:0\"\ncallback_listen = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    ws
}

struct Up(Child);

impl Drop for Up {
    fn drop(&mut self) {
        let _ = nix_kill(self.0.id());
        let _ = self.0.wait();
    }
}

fn nix_kill(pid: u32) -> std::io::Result<()> {
    Command::new("kill")
        .arg(pid.to_string())
        .status()
        .map(|_| ())
}

fn post(addr: &str, token: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    write!(
        s,
        "POST /v1/tools/call HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
    (status, body)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn run(addr: &str, token: &str, clients: usize, per_client: usize) -> (Vec<f64>, Vec<f64>, f64) {
    let start = Instant::now();
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            let addr = addr.to_string();
            let token = token.to_string();
            std::thread::spawn(move || {
                let mut rt = Vec::new();
                let mut inner = Vec::new();
                for _ in 0..per_client {
                    let t = Instant::now();
                    let (status, body) = post(&addr, &token, r#"{"tool":"native:ping","args":{}}"#);
                    rt.push(t.elapsed().as_secs_f64() * 1000.0);
                    assert_eq!(status, 200, "{body}");
                    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                    assert_eq!(v["success"], true, "{body}");
                    inner.push(v["duration_ms"].as_f64().unwrap_or(0.0));
                }
                (rt, inner)
            })
        })
        .collect();
    let (mut rt, mut inner) = (Vec::new(), Vec::new());
    for h in handles {
        let (a, b) = h.join().unwrap();
        rt.extend(a);
        inner.extend(b);
    }
    let secs = start.elapsed().as_secs_f64();
    let throughput = rt.len() as f64 / secs;
    rt.sort_by(|a, b| a.total_cmp(b));
    inner.sort_by(|a, b| a.total_cmp(b));
    (rt, inner, throughput)
}

fn main() {
    let ws = workspace();
    let child = Command::new(binary("skillbox"))
        .args(["up", "--listen", "127.0.0.1:0", "--workspace"])
        .arg(ws.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _up = Up(child);
    let state = ws.path().join(".skillbox");
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
    let n: usize = std::env::var("ROUNDTRIP_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    run(&addr, &token, 1, 20); // warm-up
    let mut report = String::from(
        "# Round-trip benchmark\n\nTrivial native tool (C, jsonrpc) through gateway → core → mTLS → executor → sandbox.\n\n\
         | clients | calls | median ms | p99 ms | throughput calls/s | executor (spawn→answer) median ms | share in executor |\n|---|---|---|---|---|---|---|\n",
    );
    for clients in [1usize, 16] {
        let per = (n / clients).max(1);
        let (rt, inner, tput) = run(&addr, &token, clients, per);
        let med = percentile(&rt, 0.5);
        let inner_med = percentile(&inner, 0.5);
        report.push_str(&format!(
            "| {clients} | {} | {med:.2} | {:.2} | {tput:.0} | {inner_med:.0} | {:.0}% |\n",
            rt.len(),
            percentile(&rt, 0.99),
            100.0 * inner_med / med
        ));
    }
    report
        .push_str("\nThe executor's duration_ms has 1 ms resolution; the share is approximate.\n");
    print!("{report}");
    let _ = std::fs::write(
        target_dir().parent().unwrap().join("roundtrip-bench.md"),
        &report,
    );
}
