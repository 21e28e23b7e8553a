//! `skillbox route [--skills DIR | --workspace DIR] [--json] "query"`: the activation plan for a query, with
//! the score breakdown of every candidate (the same JSON as `POST /v1/route`).
//! Prerequisites are checked against this machine: programs on `PATH`, env values in
//! this process's environment (the running core checks its own secrets instead).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use skillbox_protocol::skill::{discover, DiscoveryOptions};

use super::table;
use skillbox_core::router::{HostReadiness, RouteInputs, Router, StatsMap, Status};
use skillbox_core::state::config::Config;

/// `route` arguments.
#[derive(Debug, Args)]
pub struct RouteArgs {
    /// A skills root; repeat for several, highest precedence first. Default: the roots of
    /// the workspace (its `[skills] roots`, and DIR/skills).
    #[arg(long = "skills", value_name = "DIR")]
    skills: Vec<PathBuf>,
    /// Read `[routing]` from DIR/skillbox.toml (default: the built-in settings) and, without
    /// --skills, the skills of DIR's roots (default workspace, as for `skillbox up`:
    /// examples/workspace when it exists, else the current folder).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print the plan as JSON.
    #[arg(long)]
    json: bool,
    /// The query to route.
    query: String,
}

/// Runs `skillbox route`.
pub fn run(args: RouteArgs) -> anyhow::Result<u8> {
    let roots = super::skill::RootArgs {
        skills: args.skills.clone(),
        workspace: args.workspace.clone(),
        max_depth: DiscoveryOptions::default().max_depth,
        max_folders: DiscoveryOptions::default().max_folders,
    }
    .roots()?;
    let config = match &args.workspace {
        Some(ws) => Config::load(ws).context("reading [routing]")?.routing,
        None => Default::default(),
    };
    let catalog = Arc::new(discover(&roots, DiscoveryOptions::default()));
    let router = Router::new(catalog, config);
    let readiness = HostReadiness::new(|name: &str| std::env::var_os(name).is_some());
    let plan = router.route(
        &args.query,
        &RouteInputs {
            context_id: None,
            readiness: &readiness,
            stats: &StatsMap::new(),
        },
    )?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
        return Ok(0);
    }
    let rows: Vec<Vec<String>> = plan
        .candidates
        .iter()
        .map(|c| {
            let b = &c.breakdown;
            let sources: Vec<String> = c
                .sources
                .iter()
                .map(|s| format!("{s:?}").to_lowercase())
                .collect();
            let status = match &c.status {
                Status::Selected => "selected".to_string(),
                Status::BelowThreshold => "below threshold".to_string(),
                Status::Redundant { covered_by } => format!("redundant ({})", covered_by.join(",")),
                Status::Conflict { anti_trigger } => format!("anti-trigger {anti_trigger:?}"),
                Status::Unavailable { reason } => format!("unavailable: {reason}"),
                Status::NotNamed { named } => format!("not named ({})", named.join(",")),
            };
            vec![
                c.skill.clone(),
                sources.join("+"),
                format!("{:.3}", c.score),
                format!("{:.2}", b.intent_match),
                format!("{:.1}", b.trigger_match),
                format!("{:.2}", b.success_rate),
                format!("{:.2}", b.context_readiness),
                format!("{:.1}", b.cost_penalty),
                format!("{:.0}", b.conflict_penalty),
                table::truncate(&status, 60),
            ]
        })
        .collect();
    println!("route {}  ({} µs)", plan.route_id, plan.latency_us);
    print!(
        "{}",
        table::render(
            &[
                "SKILL", "SOURCE", "SCORE", "INTENT", "TRIG", "SUCC", "READY", "COST", "CONFL",
                "STATUS"
            ],
            &rows
        )
    );
    println!(
        "selected: {}",
        if plan.selected.is_empty() {
            "(none)".to_string()
        } else {
            plan.selected.join(", ")
        }
    );
    println!("parallel groups: {:?}", plan.parallel_groups);
    let chain: Vec<String> = plan
        .fallback_chain
        .iter()
        .map(|f| match f {
            skillbox_core::router::FallbackStep::Skill { skill } => skill.clone(),
            skillbox_core::router::FallbackStep::NoSkill => "no-skill".into(),
            skillbox_core::router::FallbackStep::AskUser => "ask-user".into(),
        })
        .collect();
    println!("fallback: {}", chain.join(" -> "));
    println!("estimated cost: {}", plan.estimated_cost);
    println!("reason: {}", plan.routing_reason);
    Ok(0)
}
