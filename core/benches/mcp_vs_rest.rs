//! MCP `tools/call` against the same REST `POST /v1/tools/call`, in one run of the real
//! `skillbox up`: a trivial native tool (the whole path: gateway → pipeline → executor →
//! sandboxed spawn) and the built-in `load_skill` (the gateway and pipeline alone, where
//! the protocol's own cost shows). Calls alternate REST, MCP 2026-07-28, MCP handshake
//! era, so drift hits all three alike. Prints and writes `target/mcp-vs-rest-bench.md`;
//! docs/mcp.md quotes the ratio.
//!
//! Run: `cargo build --release --workspace && cargo bench -p skillbox-core --bench mcp_vs_rest`
//! (`MCP_BENCH_N` calls per kind, default 300).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// The helpers shared with the round-trip bench (target folder, binaries, modes).
#[allow(dead_code)]
#[path = "roundtrip/setup.rs"]
mod setup;
use setup::{binary, chmod, target_dir, JSONRPC_C as TOOL_C};

/// A workspace with the skill `native` (tool `ping`, a compiled C program) and a SKILL.md.
fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    chmod(ws.path(), 0o755);
    let skill = ws.path().join("skills").join("native");
    std::fs::create_dir_all(skill.join("bin")).unwrap();
    for d in [ws.path().join("skills"), skill.clone(), skill.join("bin")] {
        chmod(&d, 0o755);
    }
    let src = ws.path().join("tool.c");
    std::fs::write(&src, TOOL_C).unwrap();
    let status = Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(skill.join("bin").join("tool"))
        .arg(&src)
        .status()
        .unwrap();
    assert!(status.success(), "gcc failed");
    std::fs::write(
        skill.join("skill.yaml"),
        "name: native\ndescription: Trivial native tool for the MCP bench\ntools:\n  - name: ping\n    description: answers ok\n    command: [\"bin/tool\"]\n",
    )
    .unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: native\ndescription: Trivial native tool for the MCP bench\n---\n# native\n",
    )
    .unwrap();
    chmod(&skill.join("SKILL.md"), 0o644);
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
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
    }
}

/// One POST on a fresh connection (as the REST bench and a stateless MCP client do); the
/// body of a 200.
fn post(addr: &str, path: &str, headers: &str, body: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    out.split("\r\n\r\n").nth(1).unwrap_or_default().to_string()
}

/// The three ways to make one call, each checked for success.
#[derive(Clone, Copy)]
enum Kind {
    Rest,
    McpModern,
    McpHandshake,
}

fn call(addr: &str, token: &str, kind: Kind, skill_tool: (&str, &str), args: &str) {
    let auth = format!("Authorization: Bearer {token}\r\n");
    let (rest_name, mcp_name) = skill_tool;
    match kind {
        Kind::Rest => {
            let body = format!(r#"{{"tool":"{rest_name}","args":{args}}}"#);
            let out = post(addr, "/v1/tools/call", &auth, &body);
            assert!(out.contains(r#""success":true"#), "{out}");
        }
        Kind::McpModern => {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{mcp_name}","arguments":{args},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
            );
            let headers = format!(
                "{auth}MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {mcp_name}\r\n"
            );
            let out = post(addr, "/mcp", &headers, &body);
            assert!(out.contains(r#""isError":false"#), "{out}");
        }
        Kind::McpHandshake => {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{mcp_name}","arguments":{args}}}}}"#
            );
            let headers = format!("{auth}MCP-Protocol-Version: 2025-11-25\r\n");
            let out = post(addr, "/mcp", &headers, &body);
            assert!(out.contains(r#""isError":false"#), "{out}");
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Median ms of REST, MCP 2026-07-28 and MCP handshake calls of one tool, interleaved.
fn measure(addr: &str, token: &str, tool: (&str, &str), args: &str, n: usize) -> [f64; 3] {
    let kinds = [Kind::Rest, Kind::McpModern, Kind::McpHandshake];
    let mut times: [Vec<f64>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..n {
        for (i, kind) in kinds.iter().enumerate() {
            let t = Instant::now();
            call(addr, token, *kind, tool, args);
            times[i].push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    times.map(median)
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
            if !a.trim().is_empty() {
                break a.trim().to_string();
            }
        }
        assert!(Instant::now() < deadline, "skillbox up did not start");
        std::thread::sleep(Duration::from_millis(100));
    };
    let token = std::fs::read_to_string(state.join("api-token"))
        .unwrap()
        .trim()
        .to_string();
    let n: usize = std::env::var("MCP_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let ping = (("native:ping"), ("native.ping"));
    let load = (("load_skill"), ("load_skill"));
    // Warm-up (the executor's first spawns, the page cache).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let auth = format!("Authorization: Bearer {token}\r\n");
        let body = r#"{"tool":"native:ping","args":{}}"#;
        if post(&addr, "/v1/tools/call", &auth, body).contains(r#""success":true"#) {
            break;
        }
        assert!(Instant::now() < deadline, "the executor never ran the tool");
        std::thread::sleep(Duration::from_millis(200));
    }
    measure(&addr, &token, ping, "{}", 20);

    let mut report = format!(
        "# MCP vs REST benchmark\n\n{n} calls of each kind, interleaved, one connection per call, \
         same `skillbox up`.\n\n| tool | REST median ms | MCP 2026-07-28 median ms | MCP handshake-era median ms | MCP/REST (2026-07-28) | MCP/REST (handshake) |\n|---|---|---|---|---|---|\n"
    );
    for (label, tool, args) in [
        ("native:ping (sandboxed spawn)", ping, "{}"),
        ("load_skill (no executor)", load, r#"{"name":"native"}"#),
    ] {
        let [rest, modern, handshake] = measure(&addr, &token, tool, args, n);
        report.push_str(&format!(
            "| {label} | {rest:.3} | {modern:.3} | {handshake:.3} | {:.2} | {:.2} |\n",
            modern / rest,
            handshake / rest
        ));
    }
    print!("{report}");
    let _ = std::fs::write(
        target_dir().parent().unwrap().join("mcp-vs-rest-bench.md"),
        &report,
    );
}
