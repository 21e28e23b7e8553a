//! `skillbox skill find QUERY`: the skills of the collection indexes (`[skills] indexes`
//! and `--index`, docs/skill-index.md) and of the workspace's roots whose name,
//! description or tags hold every word of the query ([`skillbox_core::skills::find`]).

use std::path::PathBuf;

use clap::Args;
use serde_json::json;
use skillbox_protocol::skill::{discover, DiscoveryOptions};

use super::{table, up, EXIT_FAILED};
use skillbox_core::skills::find::{self, load_index, Loaded};
use skillbox_core::state::config::Config;

/// `skill find` arguments.
#[derive(Debug, Args)]
pub struct FindArgs {
    /// Words to look for; every one must be in a skill's name, description or tags
    /// (case-insensitive). Names holding more of them come first.
    #[arg(required = true, value_name = "QUERY")]
    query: Vec<String>,
    /// An index to search besides `[skills] indexes`: a file (relative to the current
    /// folder) or an http(s) URL; repeat for several.
    #[arg(long = "index", value_name = "LOCATION")]
    indexes: Vec<String>,
    /// The workspace whose indexes and skills roots are searched (default, as for
    /// `skillbox up`: examples/workspace when it exists, else the current folder).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// `skillbox skill find QUERY [--index LOCATION]...`: exits 1 when an index could not be
/// read (the matches of the others are printed all the same).
pub fn find(a: FindArgs) -> anyhow::Result<u8> {
    let ws = up::workspace(a.workspace.as_deref())?;
    let config = Config::load(ws.root())?;
    let cwd = std::env::current_dir()?;
    // Configured paths are relative to the workspace, flags to the current folder.
    let locations = config
        .skills
        .indexes
        .iter()
        .map(|l| (l.clone(), ws.root().to_path_buf()))
        .chain(a.indexes.iter().map(|l| (l.clone(), cwd.clone())));
    let mut loaded = Vec::new();
    let mut errors = Vec::new();
    for (location, base) in locations {
        match load_index(&location, &base) {
            Ok(index) => loaded.push(Loaded { location, index }),
            Err(e) => errors.push((location, e.to_string())),
        }
    }
    let installed = discover(
        &config.skills_roots(ws.root())?,
        DiscoveryOptions::default(),
    );
    let query = a.query.join(" ");
    let matches = find::search(&query, &loaded, &installed.skills);
    if a.json {
        let out = json!({
            "query": query,
            "matches": matches,
            "indexes": loaded.iter().map(|l| json!({
                "location": l.location, "name": l.index.name, "skills": l.index.skills.len(),
            })).collect::<Vec<_>>(),
            "errors": errors.iter().map(|(location, error)| json!({
                "location": location, "error": error,
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let rows: Vec<Vec<String>> = matches
            .iter()
            .map(|m| {
                vec![
                    m.name.clone(),
                    table::truncate(&m.description, 50),
                    m.source.clone(),
                    m.found_in.label().to_string(),
                ]
            })
            .collect();
        if rows.is_empty() {
            println!(
                "no skill matches {query:?} ({} index(es), {} installed skill(s) searched)",
                loaded.len(),
                installed.skills.len()
            );
        } else {
            print!(
                "{}",
                table::render(&["NAME", "DESCRIPTION", "SOURCE", "FOUND IN"], &rows)
            );
        }
        for (_, error) in &errors {
            eprintln!("skillbox: {error}");
        }
    }
    Ok(if errors.is_empty() { 0 } else { EXIT_FAILED })
}
