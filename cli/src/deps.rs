//! `skillbox skill deps NAME [--rebuild]`: builds a skill's Python dependencies through the
//! running core (`POST /v1/skills/{name}/deps`), whose executors build them in their
//! sandbox (docs/sandbox.md, "Dependencies").

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::client::{self, ClientError, CoreClient};
use super::{up, EXIT_FAILED};

/// `skill deps` arguments.
#[derive(Debug, Args)]
pub struct DepsArgs {
    /// The skill.
    name: String,
    /// Resolve the requirements again instead of installing the last lock.
    #[arg(long)]
    rebuild: bool,
    /// The workspace of the running core (default, as for `skillbox up`).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print the build's record as JSON.
    #[arg(long)]
    json: bool,
}

/// Asks the running core to build; exits 1 when the build failed or was refused.
pub fn deps(a: DepsArgs) -> anyhow::Result<u8> {
    let ws = up::workspace(a.workspace.as_deref())?;
    let core = match CoreClient::for_workspace(&ws) {
        Ok(core) => core,
        Err(ClientError::NoAddress { .. }) => anyhow::bail!(
            "no core is running on {}: dependencies are built by its executors; start it \
             with `skillbox up` (it builds missing dependencies when it loads the skills)",
            ws.root().display()
        ),
        Err(e) => return Err(e.into()),
    };
    let path = format!("/v1/skills/{}/deps", a.name);
    let body = json!({"rebuild": a.rebuild});
    let ticker = (!a.json).then(|| {
        super::progress::Ticker::start_with(
            format!("building the dependencies of {}", a.name),
            super::deps_wait::watch(core.clone(), a.name.clone()),
        )
    });
    let (status, answer) = client::runtime()?.block_on(core.send("POST", &path, Some(&body)))?;
    drop(ticker);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
    } else if !status.is_success() {
        eprintln!(
            "skillbox: {}",
            answer["error"].as_str().unwrap_or("the build was refused")
        );
    } else {
        let ok = answer["ok"] == true;
        println!(
            "{} {} ({})",
            if ok { "built" } else { "FAILED" },
            a.name,
            answer["digest"].as_str().unwrap_or("-")
        );
        let cached = answer["from_cache"].as_array().cloned().unwrap_or_default();
        for p in answer["packages"].as_array().into_iter().flatten() {
            let from_cache = cached.iter().any(|u| *u == p["url"]);
            println!(
                "  {}=={}  sha256:{}{}",
                p["name"].as_str().unwrap_or("?"),
                p["version"].as_str().unwrap_or("?"),
                p["sha256"].as_str().unwrap_or("?"),
                if from_cache { "  (from the cache)" } else { "" }
            );
        }
        for line in answer["not_taken"].as_array().into_iter().flatten() {
            println!("  not taken: {}", line.as_str().unwrap_or_default());
        }
        for line in answer["egress_refused"].as_array().into_iter().flatten() {
            println!(
                "  refused by the egress proxy: {}",
                line.as_str().unwrap_or_default()
            );
        }
        if !ok {
            eprintln!("{}", answer["log_tail"].as_str().unwrap_or_default());
        }
    }
    let ok = status.is_success() && answer["ok"] == true;
    Ok(if ok { 0 } else { EXIT_FAILED })
}
