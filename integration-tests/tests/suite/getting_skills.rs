//! Getting skills under `skillbox up`, from git repositories served over HTTP on
//! 127.0.0.1 by `git http-backend` (`harness/githttp.py`), as `owner/repo` on the
//! workspace's `[skills] git_host`:
//!
//! - `skill add` (CLI) and `POST /v1/skills/install {"source"}` install from a repo, the
//!   running core serving the skills after;
//! - the publisher pushes a change that widens permissions: `skill outdated` lists it,
//!   `skill update` shows the difference and applies nothing without `--yes`, and with
//!   `--yes` applies it;
//! - `POST /v1/skills/{name}/update` waits for an operator's approval (which carries the
//!   difference) even though the tool-level auto-approve policy names the skill, and
//!   applies the update once approved; a denied one changes nothing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{poll, Options, Skillbox};

#[path = "../../../core/tests/support/git_repo.rs"]
mod git_repo;
use git_repo::{skill_files, Repo};

/// The git server and the folder of repositories it serves, for the whole test process.
struct GitServer {
    port: u16,
    root: PathBuf,
    _child: Child,
    _dir: tempfile::TempDir,
}

fn server() -> &'static GitServer {
    static SERVER: OnceLock<GitServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/harness/githttp.py");
        let mut child = Command::new("python3")
            .arg(&script)
            .arg(&root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the git server");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        GitServer {
            port: line.trim().parse().expect("the git server prints its port"),
            root,
            _child: child,
            _dir: dir,
        }
    })
}

fn start() -> Skillbox {
    let s = server();
    Skillbox::start(Options {
        // The tool-level policy names the skill: an update's approval is never auto.
        auto_approve: vec!["pdf:*".into()],
        extra_toml: format!(
            "[skills]\ngit_host = \"http://127.0.0.1:{}\"\n\n[skills.fetch]\nallow_http = true\n",
            s.port
        ),
        ..Options::default()
    })
}

fn skill_listed(sb: &Skillbox, name: &str) -> bool {
    sb.request("GET", &format!("/v1/skills/{name}"), None)
        .status
        == 200
}

fn lock_commit(sb: &Skillbox, name: &str) -> String {
    let lock: Value =
        serde_json::from_slice(&std::fs::read(sb.ws.join("skills/.skillbox-lock.json")).unwrap())
            .unwrap();
    lock[name]["origin"]["commit"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn out(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn skills_come_from_git_over_http_and_updates_show_and_wait_for_what_they_widen() {
    let s = server();
    let weather = Repo::new(&s.root, "acme", "weather");
    skill_files(&weather, "", "weather", "");
    let first = weather.commit("first");
    let collection = Repo::new(&s.root, "acme", "collection");
    for name in ["pdf", "xlsx"] {
        skill_files(&collection, &format!("skills/{name}"), name, "");
    }
    collection.commit("two skills");
    let sb = start();

    // CLI: one skill from owner/repo; the core serves it after its skills watch reloads.
    let o = sb.cli(&["skill", "add", "acme/weather"]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(out(&o).contains(&first), "{}", out(&o));
    poll("weather served", Duration::from_secs(30), || {
        skill_listed(&sb, "weather").then_some(())
    });

    // HTTP: a repo with two skills, one chosen.
    let r = sb.request(
        "POST",
        "/v1/skills/install",
        Some(&json!({"source": "acme/collection", "skills": ["pdf"]})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let added = r.json();
    assert_eq!(added["added"]["installed"][0]["name"], "pdf", "{added}");
    assert_eq!(added["added"]["found"].as_array().unwrap().len(), 2);
    assert_eq!(added["reload"], "ok");
    assert!(skill_listed(&sb, "pdf"));
    assert!(!skill_listed(&sb, "xlsx"));
    // Two skills and no choice: refused, listing them.
    let r = sb.request(
        "POST",
        "/v1/skills/install",
        Some(&json!({"source": "acme/collection"})),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["check"], "choose");

    // The publisher widens weather: a host, an env name, a changed script.
    skill_files(
        &weather,
        "",
        "weather",
        "permissions:\n  network: [\"api.weather.example\"]\n  env: [\"WEATHER_KEY\"]\n",
    );
    weather.write("run.py", "import os\nprint('{}')\n");
    let second = weather.commit("widen");
    let o = sb.cli(&["skill", "outdated", "--json"]);
    let listed: Value = serde_json::from_slice(&o.stdout).unwrap();
    let entry = listed["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "weather")
        .unwrap()
        .clone();
    assert_eq!(entry["status"], "outdated", "{listed}");
    assert_eq!(entry["latest"], second.as_str());

    let o = sb.cli(&["skill", "update", "weather"]);
    assert_eq!(o.status.code(), Some(3), "{}", out(&o));
    let shown = out(&o);
    for part in [
        "WIDENS PERMISSIONS",
        "+ network host api.weather.example",
        "+ env WEATHER_KEY",
        "+import os",
        "--yes",
    ] {
        assert!(shown.contains(part), "{part:?} missing from:\n{shown}");
    }
    assert_eq!(lock_commit(&sb, "weather"), first, "applied without --yes");
    let o = sb.cli(&["skill", "update", "weather", "--yes"]);
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(lock_commit(&sb, "weather"), second);

    // Over HTTP: the update waits for an operator; a denial changes nothing.
    skill_files(
        &collection,
        "skills/pdf",
        "pdf",
        "permissions:\n  network: [\"upload.example\"]\n",
    );
    let pdf_second = collection.commit("pdf uploads");
    let pdf_first = lock_commit(&sb, "pdf");
    for (decision, applied) in [("deny", false), ("approve", true)] {
        let asked = std::thread::scope(|scope| {
            let waiting = scope.spawn(|| sb.request("POST", "/v1/skills/pdf/update", None));
            let pending = poll("the update's approval", Duration::from_secs(60), || {
                let list = sb
                    .request("GET", "/v1/approvals?status=pending", None)
                    .json();
                list["approvals"]
                    .as_array()?
                    .iter()
                    .find(|a| a["tool"] == "skillbox.update")
                    .cloned()
            });
            assert_eq!(pending["skill"], "pdf");
            let args = pending["args"].to_string();
            assert!(args.contains("upload.example"), "{pending}");
            let id = pending["id"].as_str().unwrap();
            let d = sb.request(
                "POST",
                &format!("/v1/approvals/{id}"),
                Some(&json!({"decision": decision})),
            );
            assert_eq!(d.status, 200, "{}", d.body);
            waiting.join().unwrap()
        });
        if applied {
            assert_eq!(asked.status, 200, "{}", asked.body);
            let body = asked.json();
            assert_eq!(body["status"], "updated");
            assert_eq!(body["widens"], true);
            assert_eq!(lock_commit(&sb, "pdf"), pdf_second);
        } else {
            assert_eq!(asked.status, 403, "{}", asked.body);
            assert_eq!(
                lock_commit(&sb, "pdf"),
                pdf_first,
                "a denied update applied"
            );
        }
    }
    let r = sb.request("POST", "/v1/skills/pdf/update", None);
    assert_eq!(r.json()["status"], "up_to_date", "{}", r.body);
}
