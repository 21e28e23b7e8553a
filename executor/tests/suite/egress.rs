//! Network calls (docs/sandbox.md), run in this process against a [`FakeCore`] whose egress
//! streams go to a [`FakeProxy`]: a tool of a skill that declares `permissions.network`
//! reaches the test server through its proxy environment and the relay, each connection
//! on a stream naming its call and token (Python's urllib, curl through a CONNECT tunnel);
//! a host the proxy refuses gets its `403`; a session under such a skill has the proxy
//! too; nothing of a call's namespace outlives it. The attacks are in `egress_attacks`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use skillbox_executor::call;
use skillbox_executor::registry::Registry;
use skillbox_executor::sandbox::Sandbox;
use skillbox_executor::session::Sessions;
use skillbox_protocol::methods::{Envelope, SecretValue, ToolExecuteParams};
use skillbox_protocol::result::ToolResult;
use skillbox_protocol::session::{Command, SessionExecParams, SessionLimits};

use super::context_files::{runtime, sandbox};
use super::harness::fake_core::FakeCore;
use super::harness::fake_proxy::{TestServer, DECLARED_HOST};
use super::harness::{unique, Manifest, SkillRoot};

/// The manifest lines of a skill that declares the test host.
pub const NETWORK: &str = "permissions:\n  network: [\"api.test\"]";

/// The call id and token of every network call here.
pub const CALL_ID: &str = "net-call";
/// See [`CALL_ID`].
pub const TOKEN: &str = "tok-net";

/// Whether this machine can make network namespaces; says SKIPPED when not.
pub fn namespaces_available(test: &str) -> bool {
    let ok = skillbox_executor::sandbox::netns::probe().is_ok();
    if !ok {
        eprintln!("SKIPPED {test}: the test runner cannot make network namespaces (needs root with CAP_SYS_ADMIN)");
    }
    ok
}

/// Runs `skill:run` with `args` as a call of [`CALL_ID`] in `sandbox` against `core`.
pub fn run_in(
    sandbox: &Sandbox,
    root: &SkillRoot,
    core: &FakeCore,
    skill: &str,
    args: Value,
) -> ToolResult {
    let params = ToolExecuteParams {
        call_id: CALL_ID.into(),
        capability_token: SecretValue(TOKEN.into()),
        skill: skill.into(),
        tool: "run".into(),
        args,
        envelope: Envelope::default(),
        traceparent: None,
        workdir: None,
        script: None,
    };
    let registry = Registry::load(root.skills());
    runtime().block_on(call::execute(
        sandbox,
        &registry,
        core,
        params,
        Instant::now(),
    ))
}

/// A python (jsonrpc) skill `name` that declares the test host, running `script`.
pub fn network_skill(root: &SkillRoot, name: &str, script: &str) {
    let manifest = Manifest {
        skill: NETWORK,
        ..Manifest::default()
    };
    root.python_skill_with(name, script, manifest);
}

fn data(r: &ToolResult) -> &Value {
    assert!(r.success, "{r:?}");
    r.data.as_ref().unwrap()
}

#[test]
fn network_tool_reaches_the_test_server_through_the_relay_with_its_call_and_token() {
    if !namespaces_available("network_tool_reaches_the_test_server") {
        return;
    }
    let server = TestServer::start();
    let root = SkillRoot::new();
    network_skill(
        &root,
        "fetcher",
        r#"
        import urllib.request
        url = "http://api.test:%d/hello" % args["port"]
        body = urllib.request.urlopen(url, timeout=10).read().decode()
        proxies = {k: v for k, v in os.environ.items() if "proxy" in k.lower()}
        reply({"body": body, "proxies": proxies})
        "#,
    );
    let core = FakeCore::default();
    let r = run_in(
        &sandbox(),
        &root,
        &core,
        "fetcher",
        json!({"port": server.port}),
    );
    let out = data(&r);
    let body = out["body"].as_str().unwrap();
    let line = format!("GET http://api.test:{}/hello HTTP/1.1", server.port);
    assert!(body.starts_with(TestServer::BODY), "{out}");
    assert!(
        body.contains(&line),
        "the request reached the server as sent: {out}"
    );
    let proxy = "http://127.0.0.1:3128";
    for name in ["HTTP_PROXY", "https_proxy", "ALL_PROXY", "http_proxy"] {
        assert_eq!(out["proxies"][name], proxy, "{name}: {out}");
    }
    assert_eq!(
        out["proxies"]["NO_PROXY"], "localhost,127.0.0.1,::1,[::1]",
        "{out}"
    );
    assert_eq!(out["proxies"]["NODE_USE_ENV_PROXY"], "1", "{out}");
    let served = core.proxy.served();
    assert_eq!(served.len(), 1, "{served:?}");
    assert_eq!(
        (served[0].call_id.as_str(), served[0].token.as_str()),
        (CALL_ID, TOKEN),
        "the stream names the call and presents its token"
    );
    assert_eq!(served[0].request_line, line);
}

#[test]
fn curl_reaches_the_test_server_through_a_connect_tunnel_and_gets_the_proxys_refusal() {
    if !namespaces_available("curl_reaches_the_test_server") {
        return;
    }
    if !std::path::Path::new("/usr/bin/curl").is_file() {
        eprintln!("SKIPPED curl_reaches_the_test_server: no /usr/bin/curl on this machine");
        return;
    }
    let server = TestServer::start();
    let root = SkillRoot::new();
    network_skill(
        &root,
        "curler",
        r#"
        import subprocess
        def curl(*a):
            p = subprocess.run(["curl", "-sS", "--max-time", "10", *a], capture_output=True, text=True)
            return {"code": p.returncode, "out": p.stdout, "err": p.stderr}
        tunnel = curl("-p", "http://api.test:%d/tunnel" % args["port"])
        refused = curl("-D", "-", "-o", "/dev/null", "http://undeclared.test/")
        reply({"tunnel": tunnel, "refused": refused})
        "#,
    );
    let core = FakeCore::default();
    let r = run_in(
        &sandbox(),
        &root,
        &core,
        "curler",
        json!({"port": server.port}),
    );
    let out = data(&r);
    let tunnel = out["tunnel"]["out"].as_str().unwrap();
    assert!(tunnel.starts_with(TestServer::BODY), "{out}");
    let refused = out["refused"]["out"].as_str().unwrap();
    assert!(refused.starts_with("HTTP/1.1 403"), "{out}");
    assert!(
        refused.contains("X-Skillbox-Refused: host undeclared.test is not declared"),
        "{out}"
    );
    let lines: Vec<String> = core
        .proxy
        .served()
        .into_iter()
        .map(|p| p.request_line)
        .collect();
    let connect = format!("CONNECT {DECLARED_HOST}:{} HTTP/1.1", server.port);
    assert!(lines.contains(&connect), "{lines:?}");
    assert!(
        lines.contains(&"GET http://undeclared.test/ HTTP/1.1".to_string()),
        "{lines:?}"
    );
}

/// Open descriptors of this process, but for the memory cgroups' `cgroup.procs`: the
/// executor keeps a few cgroups made ahead and kept between calls, each with its
/// `cgroup.procs` open, and how many there are after a call depends on when its
/// releaser thread ran (a bounded pool, not a leak).
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).map_or(true, |to| !to.ends_with("cgroup.procs")))
        .count()
}

/// [`open_fds`] once the calls so far are released and the count holds still for 100 ms:
/// under load the release threads run late, and a count taken while the first call's
/// release still held a descriptor was one above what the later calls settle to.
fn settled_fds() -> usize {
    skillbox_executor::sandbox::wait_idle();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = open_fds();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = open_fds();
        if now == last || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

#[test]
fn a_network_calls_namespace_and_listener_are_gone_after_the_call() {
    if !namespaces_available("a_network_calls_namespace_and_listener_are_gone") {
        return;
    }
    let server = TestServer::start();
    let root = SkillRoot::new();
    network_skill(
        &root,
        "fetcher",
        r#"
        import urllib.request
        url = "http://api.test:%d/" % args["port"]
        reply({"body": urllib.request.urlopen(url, timeout=10).read().decode()})
        "#,
    );
    let core = FakeCore::default();
    let sandbox = sandbox();
    let args = json!({"port": server.port});
    // The first call starts what stays (the spawner threads' kept descriptors).
    data(&run_in(&sandbox, &root, &core, "fetcher", args.clone()));
    let before = settled_fds();
    let started = Instant::now();
    for _ in 0..3 {
        data(&run_in(&sandbox, &root, &core, "fetcher", args.clone()));
    }
    eprintln!(
        "3 network calls (namespace, relay, python urllib): {:?}",
        started.elapsed()
    );
    // The release runs after the answer, on threads a loaded machine may run late (3 s
    // was once too short under CI); a leak never returns, however long the wait.
    let deadline = Instant::now() + Duration::from_secs(15);
    while open_fds() != before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        open_fds(),
        before,
        "descriptors left behind by network calls"
    );
    assert_eq!(core.proxy.served().len(), 4);
}

#[test]
fn a_session_under_a_network_skill_reaches_the_test_server_through_the_proxy() {
    if !namespaces_available("a_session_under_a_network_skill") {
        return;
    }
    let server = TestServer::start();
    let root = SkillRoot::new();
    network_skill(&root, "netsession", "reply({})");
    let core = Arc::new(FakeCore::default());
    let sessions = Sessions::new(sandbox(), Arc::clone(&core));
    let registry = Registry::load(root.skills());
    let script = format!(
        "import urllib.request; print(urllib.request.urlopen('http://api.test:{}/session', timeout=10).read().decode())",
        server.port
    );
    let params = SessionExecParams {
        session_id: unique("s"),
        call_id: CALL_ID.into(),
        capability_token: SecretValue(TOKEN.into()),
        skill: Some("netsession".into()),
        cmd: Command::Argv(vec!["python3".into(), "-c".into(), script]),
        workdir: None,
        files: core.workdir(),
        envelope: Envelope::default(),
        yield_ms: 15_000,
        max_output_bytes: 1 << 20,
        tty: false,
        limits: SessionLimits {
            idle_timeout_ms: 30_000,
            lifetime_ms: 60_000,
            output_kept_bytes: 1 << 20,
            memory_mb: 512,
            quiet_ms: skillbox_protocol::session::DEFAULT_QUIET_MS,
        },
        traceparent: None,
    };
    let answer = runtime()
        .block_on(sessions.exec(&registry, params))
        .unwrap();
    assert_eq!(answer.exit_code, Some(0), "{answer:?}");
    assert!(answer.output.starts_with(TestServer::BODY), "{answer:?}");
    let served = core.proxy.served();
    assert_eq!(served.len(), 1, "{served:?}");
    assert_eq!(served[0].call_id, CALL_ID);
}
