//! Whole calls through `call::execute` (validation, prepare, spawn, the `plain` stdio
//! exchange, finish, the result), started cold or taken from the warm pool: two skills,
//! `cold` and `warm` (`execution.prestart: 1`), each with the bench's tools as `plain`
//! tools that read their stdin to its end.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::json;
use skillbox_executor::broker::OneShotBroker;
use skillbox_executor::call;
use skillbox_executor::registry::Registry;
use skillbox_executor::sandbox::Sandbox;
use skillbox_protocol::methods::{Envelope, SecretValue, ToolExecuteParams};

/// The Python tool of the call methods: a start, then its (empty) request read.
pub const PY_READER: [&str; 3] = ["python3", "-c", "import sys; sys.stdin.read()"];

/// Longest wait for the warm pool to have a process blocked on stdin.
const SETTLE: Duration = Duration::from_secs(10);

/// The two skills and their registry.
pub struct Skills {
    _root: tempfile::TempDir,
    /// Loaded from the skills root; the `warm` skill's pool refills after each take.
    pub registry: Registry,
}

/// Writes `cold/` and `warm/` under a new skills root, each with `tiny` (when built) and
/// `py` tools.
pub fn skills(tiny: Option<&Path>) -> Result<Skills> {
    let root = tempfile::Builder::new()
        .prefix("skillbox-bench-skills-")
        .tempdir()?;
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755))?;
    for (name, prestart) in [("cold", 0), ("warm", 1)] {
        let dir = root.path().join(name);
        std::fs::create_dir(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
        let mut yaml = format!(
            "name: {name}\ndescription: spawn bench calls\nexecution: {{ prestart: {prestart} }}\ntools:\n"
        );
        if let Some(tiny) = tiny {
            std::fs::copy(tiny, dir.join("tiny")).context("copying the tiny tool")?;
            yaml.push_str(
                "  - name: tiny\n    description: t\n    command: [\"./tiny\"]\n    protocol: plain\n    parameters: {type: object}\n",
            );
        }
        yaml.push_str(&format!(
            "  - name: py\n    description: p\n    command: {}\n    protocol: plain\n    parameters: {{type: object}}\n",
            serde_json::to_string(&PY_READER)?
        ));
        std::fs::write(dir.join("skill.yaml"), yaml)?;
        std::fs::set_permissions(
            dir.join("skill.yaml"),
            std::fs::Permissions::from_mode(0o644),
        )?;
    }
    let registry = Registry::load(root.path());
    if registry.len() != 2 {
        bail!(
            "the bench skills did not load: {:?}",
            registry
                .skipped
                .iter()
                .map(|s| s.reason())
                .collect::<Vec<_>>()
        );
    }
    registry.warm().enable_refill();
    Ok(Skills {
        _root: root,
        registry,
    })
}

/// One timed call of `skill:tool`; fails unless the tool exited 0.
pub async fn timed_call(
    sandbox: &Sandbox,
    registry: &Registry,
    skill: &str,
    tool: &str,
) -> Result<Duration> {
    let params = ToolExecuteParams {
        call_id: "bench".into(),
        capability_token: SecretValue(String::new()),
        skill: skill.into(),
        tool: tool.into(),
        args: json!({}),
        envelope: Envelope::default(),
        traceparent: None,
        workdir: None,
        script: None,
    };
    let start = Instant::now();
    let result = call::execute(
        sandbox,
        registry,
        &OneShotBroker,
        params,
        std::time::Instant::now(),
    )
    .await;
    let elapsed = start.elapsed();
    if !result.success {
        bail!("{skill}:{tool} failed: {result:?}");
    }
    Ok(elapsed)
}

/// Waits (untimed) until the warm pool of `tool` holds a process blocked on stdin, so a
/// sample finds one ready and the replacement's start-up does not overlap other samples.
pub async fn settle(sandbox: &Sandbox, registry: &Registry, tool: &str) -> Result<()> {
    let deadline = Instant::now() + SETTLE;
    if registry.warm().waiting("warm", tool) == 0 {
        registry
            .warm()
            .fill(sandbox, registry.skills().map(|r| &r.skill));
    }
    while registry.warm().waiting("warm", tool) == 0 {
        if Instant::now() > deadline {
            bail!("the warm pool of {tool} stayed empty");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    if !registry.warm().settled(SETTLE).await {
        bail!("the prestarted {tool} never blocked on stdin");
    }
    Ok(())
}
