//! The dependency builds' download cache (issue 41: "a second skill needing the same 50 MB
//! of wheels builds in under a third of the first's time"; docs/sandbox.md keeps the
//! results). Starts the real `skillbox up` (the binaries of the target folder) against a
//! local PyPI-layout index (`integration-tests/tests/harness/pyindex.py`) serving wheels
//! padded with random stored bytes, sent at most at `DEPS_CACHE_RATE_MBPS` MB/s (default
//! 20): 127.0.0.1 is no network, so the throttle models the download from a remote index.
//! Builds skill A, then skill B needing the same wheels (and a tiny one more: skills of
//! the very same requirements share one environment and download nothing), with the cache
//! on (`[deps] cache_mb` default) and, as the baseline of the same run, off
//! (`cache_mb = 0`). Writes `target/deps-cache-bench.md`.
//!
//! Run: `cargo build --workspace && cargo bench -p skillbox-core --bench deps_cache`
//! (`--profile dev` to use the debug binaries); `DEPS_CACHE_WHEELS` wheels (default 5) of
//! `DEPS_CACHE_WHEEL_MB` MiB each (default 10). Nothing here asserts a time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[allow(dead_code)]
#[path = "roundtrip/setup.rs"]
mod setup;

use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `POST path` on the gateway; the answer's body.
fn post(addr: &str, token: &str, path: &str) -> serde_json::Value {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or(serde_json::Value::Null)
}

/// A skill `name` needing `requirements`.
fn skill(ws: &Path, name: &str, requirements: &str) {
    let dir = ws.join("skills").join(name);
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: Needs big wheels.\n---\nRun it.\n"),
    )
    .unwrap();
    std::fs::write(dir.join("scripts/requirements.txt"), requirements).unwrap();
    for d in [&dir, &dir.join("scripts")] {
        setup::chmod(d, 0o755);
    }
}

/// Builds A then B on a fresh workspace with `cache_mb`; their times in seconds.
fn run(port: u16, wheels: &[String], cache_mb: u64) -> (f64, f64) {
    let ws = tempfile::tempdir().unwrap();
    setup::chmod(ws.path(), 0o755);
    std::fs::create_dir_all(ws.path().join("skills")).unwrap();
    setup::chmod(&ws.path().join("skills"), 0o755);
    let a: String = wheels.iter().map(|w| format!("{w}==1.0\n")).collect();
    skill(ws.path(), "bench-a", &a);
    skill(ws.path(), "bench-b", &format!("{a}skbtiny==1.0\n"));
    std::fs::write(
        ws.path().join("skillbox.toml"),
        format!(
            "[executor]\nlisten = \"127.0.0.1:0\"\ncallback_listen = \"127.0.0.1:0\"\n\n\
             [fetch]\nallow_private = [\"index.test:{port}\"]\n\n\
             [deps]\nindex_url = \"http://index.test:{port}/simple\"\nbuild_on_load = false\n\
             cache_mb = {cache_mb}\n\n[egress]\nresolve = {{ \"index.test\" = \"127.0.0.1\" }}\n"
        ),
    )
    .unwrap();
    let up = setup::start_up(ws.path());
    let mut times = Vec::new();
    for name in ["bench-a", "bench-b"] {
        let t = Instant::now();
        let built = post(&up.addr, &up.token, &format!("/v1/skills/{name}/deps"));
        times.push(t.elapsed().as_secs_f64());
        assert_eq!(built["ok"], true, "{name}: {built}");
    }
    (times[0], times[1])
}

fn main() {
    let rate_mb = env_num("DEPS_CACHE_RATE_MBPS", 20);
    let count = env_num("DEPS_CACHE_WHEELS", 5);
    let wheel_mb = env_num("DEPS_CACHE_WHEEL_MB", 10);
    let wheels: Vec<String> = (0..count).map(|i| format!("skbbench{i}")).collect();
    let mut spec: Vec<serde_json::Value> = (wheels.iter())
        .map(|w| serde_json::json!({"name": w, "version": "1.0", "pad_mb": wheel_mb}))
        .collect();
    spec.push(serde_json::json!({"name": "skbtiny", "version": "1.0"}));
    let root = tempfile::tempdir().unwrap();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../integration-tests/tests/harness/pyindex.py");
    let mut index = Command::new("python3")
        .arg(script)
        .arg(root.path())
        .arg(serde_json::Value::Array(spec).to_string())
        .arg((rate_mb * 1_000_000).to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(index.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line.trim().parse().unwrap();

    let on = run(port, &wheels, 2048);
    let off = run(port, &wheels, 0);
    let _ = index.kill();
    let _ = index.wait();

    let total = count * wheel_mb;
    let mut report = format!(
        "# Dependency download cache bench\n\n\
         {count} wheels of {wheel_mb} MiB ({total} MiB of random bytes, stored), served by a \
         local PyPI-layout index throttled to {rate_mb} MB/s: 127.0.0.1 is not a network, the \
         throttle models the download from a remote index. Skill A needs the wheels; skill B \
         the same wheels and one tiny more (skills of the very same requirements share one \
         environment). Each build is `POST /v1/skills/NAME/deps` under `skillbox up` (pip \
         resolves, downloads, installs), timed at the gateway. Goal (issue 41): B under a third \
         of A with the cache.\n\n\
         | cache | A (s) | B (s) | B / A |\n|---|---|---|---|\n"
    );
    for (what, (a, b)) in [("on (cache_mb = 2048)", on), ("off (cache_mb = 0)", off)] {
        report.push_str(&format!("| {what} | {a:.2} | {b:.2} | {:.2} |\n", b / a));
    }
    print!("{report}");
    // `target/`, above the profile's folder (`target/<profile>/deps/deps_cache-…`).
    let exe = std::env::current_exe().unwrap();
    if let Some(target) = exe.ancestors().nth(3) {
        let _ = std::fs::write(target.join("deps-cache-bench.md"), &report);
    }
}
