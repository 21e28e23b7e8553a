//! What `skill add` says about the added skills' dependencies, which the running core
//! builds on load: which skills have some being built and how to watch them, and with
//! `--wait` a progress line until each build ended, then how it ended.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::client::{self, CoreClient};
use super::progress::Ticker;
use super::EXIT_FAILED;

/// How often the skill's state is asked while waiting.
const POLL: Duration = Duration::from_secs(1);
/// The longest `--wait` waits for one skill (a build has its own time limit, shorter).
const MAX_WAIT: Duration = Duration::from_secs(3600);

/// Says, for each of `names`, whether its dependencies are being built; with `wait`,
/// waits for each build to end. Exit 1 when a waited-for build failed.
pub fn after_add(core: &CoreClient, names: &[String], wait: bool) -> anyhow::Result<u8> {
    let rt = client::runtime()?;
    let mut failed = false;
    for name in names {
        let Some(problem) = deps_problem(&rt.block_on(skill(core, name))) else {
            continue;
        };
        if !wait {
            println!(
                "{name}: {problem}; `skillbox skill add ... --wait` waits for it, \
                 `skillbox skill deps {name}` shows the build"
            );
            continue;
        }
        let started = Instant::now();
        let ticker = Ticker::start_with(
            format!("{name}: building its dependencies"),
            watch(core.clone(), name.clone()),
        );
        let mut last = Some(problem);
        while last.as_deref().is_some_and(|p| p.contains("being built"))
            && started.elapsed() < MAX_WAIT
        {
            std::thread::sleep(POLL);
            last = deps_problem(&rt.block_on(skill(core, name)));
        }
        drop(ticker);
        let took = started.elapsed().as_secs();
        match last {
            None => println!("{name}: dependencies built ({took} s); the skill is available"),
            Some(p) => {
                failed = true;
                println!("{name}: after {took} s, {p}");
            }
        }
    }
    Ok(if failed { EXIT_FAILED } else { 0 })
}

/// What a build of `name` has downloaded so far, asked of the core at each call
/// (`dependencies.progress`): `3 downloads, 48.2 MB (1 from the cache)`.
pub fn watch(core: CoreClient, name: String) -> impl FnMut() -> Option<String> + Send {
    let rt = client::runtime().ok();
    move || {
        let entry = rt.as_ref()?.block_on(skill(&core, &name));
        progress_line(&entry["dependencies"]["progress"])
    }
}

/// `progress` as the line says it, when a build runs: the index pages read (about one per
/// package resolved) and the package files asked for when the core read the build's
/// requests, else the connections that ended.
fn progress_line(progress: &Value) -> Option<String> {
    let bytes = progress["bytes"].as_u64()?;
    let count = |key: &str| progress[key].as_u64().unwrap_or(0);
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let (pages, files) = (count("pages"), count("files"));
    let mut line = if pages + files > 0 {
        format!(
            "{} looked up, {}, ",
            plural(pages, "package", "packages"),
            plural(files, "file", "files")
        )
    } else {
        format!(
            "{}, ",
            plural(count("connections"), "download", "downloads")
        )
    };
    line.push_str(&format!("{:.1} MB", bytes as f64 / 1e6));
    let cached = count("from_cache");
    if cached > 0 {
        line.push_str(&format!(" ({cached} from the cache)"));
    }
    Some(line)
}

/// The skill's entry (`Null` when the core does not answer).
async fn skill(core: &CoreClient, name: &str) -> Value {
    core.json("GET", &format!("/v1/skills/{name}"), None)
        .await
        .unwrap_or(Value::Null)
}

/// Why its dependencies keep it from running, when they do.
fn deps_problem(entry: &Value) -> Option<String> {
    entry["dependencies"]["problem"]
        .as_str()
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_line_says_packages_files_megabytes_and_cache_hits() {
        let p = serde_json::json!({"bytes": 48_200_000, "connections": 3, "from_cache": 1, "elapsed_s": 4});
        assert_eq!(
            progress_line(&p).as_deref(),
            Some("3 downloads, 48.2 MB (1 from the cache)")
        );
        let p = serde_json::json!({"bytes": 0, "connections": 1, "from_cache": 0});
        assert_eq!(progress_line(&p).as_deref(), Some("1 download, 0.0 MB"));
        assert_eq!(progress_line(&Value::Null), None);
        let p = serde_json::json!({"bytes": 2_000_000, "connections": 1, "from_cache": 1,
                                   "pages": 5, "files": 3});
        assert_eq!(
            progress_line(&p).as_deref(),
            Some("5 packages looked up, 3 files, 2.0 MB (1 from the cache)")
        );
    }
}
