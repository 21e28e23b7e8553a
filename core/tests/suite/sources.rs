//! Skills added from git repositories the test makes (bare repos over `file://`): one
//! skill, several from one repo, a ref and a subfolder, outdated and update with the
//! permission diff, and each refusal — a hook, a link out, a huge file, a submodule, a
//! source or skill the install policy does not allow.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, SystemTime};

use skillbox_core::skills::install::TrustPolicy;
use skillbox_core::skills::sources::git::GitRunner;
use skillbox_core::skills::sources::{
    AddRequest, InstallPolicy, PreparedUpdate, SourceError, Sources, UpdateCheck,
};
use skillbox_core::state::config::skills::InstallPolicySection;
use skillbox_protocol::skill::InstallLock;

use super::git_repo::{git, skill_files, Repo};

pub struct Env {
    _tmp: tempfile::TempDir,
    pub host: PathBuf,
    pub sources: Sources,
}

impl Env {
    pub fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let host = tmp.path().join("githost");
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join(".skillbox/trust")).unwrap();
        let trust = TrustPolicy {
            skills_root: ws.join("skills"),
            roots: vec![ws.join("skills")],
            trust_dir: ws.join(".skillbox/trust"),
            require_signed: false,
        };
        let git_host = format!("file://{}", host.display());
        let sources = Sources {
            trust,
            git: GitRunner {
                allow_http: false,
                max_bytes: 50 * 1024 * 1024,
                timeout: Duration::from_secs(60),
            },
            policy: InstallPolicy {
                rule: InstallPolicySection::default(),
                git_host: git_host.clone(),
            },
            max_files: 1000,
            max_file_bytes: 1024 * 1024,
            fetch_root: ws.join(".skillbox/fetch"),
            base: ws.clone(),
            git_host,
            auto_update: false,
        };
        Env {
            _tmp: tmp,
            host,
            sources,
        }
    }

    pub fn add(
        &self,
        source: &str,
        skills: &[&str],
    ) -> Result<skillbox_core::skills::sources::AddOutcome, SourceError> {
        self.sources.add(
            &AddRequest {
                source: source.into(),
                skills: skills.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            },
            SystemTime::now(),
        )
    }

    /// Adds every skill of `source` at `reference`.
    pub fn add_all_at(
        &self,
        source: &str,
        reference: &str,
    ) -> Result<skillbox_core::skills::sources::AddOutcome, SourceError> {
        self.sources.add(
            &AddRequest {
                source: source.into(),
                reference: Some(reference.into()),
                all: true,
                ..Default::default()
            },
            SystemTime::now(),
        )
    }

    pub fn lock(&self) -> InstallLock {
        InstallLock::read(&self.sources.trust.skills_root)
            .unwrap()
            .unwrap_or_default()
    }

    pub fn installed(&self) -> Vec<String> {
        self.lock().skills.keys().cloned().collect()
    }

    /// Nothing installed and no fetch folder left behind.
    pub fn assert_nothing_left(&self) {
        assert!(
            self.installed().is_empty(),
            "installed: {:?}",
            self.installed()
        );
        let left: Vec<_> = std::fs::read_dir(&self.sources.fetch_root)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "fetch folders left: {left:?}");
    }
}

#[test]
fn add_one_skill_records_source_ref_commit_and_folder() {
    let env = Env::new();
    let repo = Repo::new(&env.host, "acme", "weather");
    skill_files(&repo, "", "weather", "");
    let commit = repo.commit("first");
    let done = env.add("acme/weather", &[]).unwrap();
    assert_eq!(done.installed.len(), 1);
    assert_eq!(done.commit.as_deref(), Some(commit.as_str()));
    let entry = env.lock().get("weather").cloned().unwrap();
    let origin = entry.origin.unwrap();
    assert_eq!(origin.source, "acme/weather");
    assert_eq!(origin.commit, commit);
    assert_eq!(origin.subfolder, "");
    assert!(origin.url.ends_with("/acme/weather.git"), "{}", origin.url);
    assert!(entry.digest.starts_with("sha256:"));
    assert!(env
        .sources
        .trust
        .skills_root
        .join("weather/run.py")
        .is_file());
    assert_nothing_fetched_left(&env);
}

/// The update of a check that found the skill's folder changed.
pub fn changed(check: UpdateCheck) -> PreparedUpdate {
    match check {
        UpdateCheck::Changed(update) => *update,
        other => panic!("expected a changed folder, got {other:?}"),
    }
}

fn assert_nothing_fetched_left(env: &Env) {
    let left: Vec<_> = std::fs::read_dir(&env.sources.fetch_root)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "fetch folders left: {left:?}");
}

#[test]
fn a_repo_with_many_skills_lists_them_and_installs_the_chosen_ones() {
    let env = Env::new();
    let repo = Repo::new(&env.host, "acme", "collection");
    for name in ["pdf", "xlsx", "docx"] {
        skill_files(&repo, &format!("skills/{name}"), name, "");
    }
    repo.write("README.md", "a collection\n");
    repo.commit("three skills");
    let err = env.add("acme/collection", &[]).unwrap_err();
    assert_eq!(err.check(), "choose");
    let text = err.to_string();
    assert!(
        text.contains("skills/pdf") && text.contains("skills/xlsx") && text.contains("--skill"),
        "{text}"
    );
    assert!(env.installed().is_empty());

    let done = env.add("acme/collection", &["pdf", "skills/docx"]).unwrap();
    assert_eq!(done.found.len(), 3);
    assert_eq!(env.installed(), ["docx", "pdf"]);
    assert_eq!(
        env.lock()
            .get("pdf")
            .unwrap()
            .origin
            .as_ref()
            .unwrap()
            .subfolder,
        "skills/pdf"
    );

    let err = env.add("acme/collection", &["nope"]).unwrap_err();
    assert_eq!(err.check(), "choose");
    assert!(err.to_string().contains("has no skill nope"), "{err}");
}

#[test]
fn a_ref_and_a_subfolder_pick_that_commit_and_folder() {
    let env = Env::new();
    let repo = Repo::new(&env.host, "acme", "tools");
    skill_files(&repo, "skills/alpha", "alpha", "version: 1.0.0\n");
    skill_files(&repo, "skills/beta", "beta", "");
    let v1 = repo.commit("v1");
    git(&repo.work, &["tag", "v1"]);
    git(
        &repo.work,
        &["push", "-q", repo.bare.to_str().unwrap(), "v1"],
    );
    skill_files(&repo, "skills/alpha", "alpha", "version: 2.0.0\n");
    repo.commit("v2");

    let done = env
        .sources
        .add(
            &AddRequest {
                source: "acme/tools/skills/alpha".into(),
                reference: Some("v1".into()),
                ..Default::default()
            },
            SystemTime::now(),
        )
        .unwrap();
    assert_eq!(done.commit.as_deref(), Some(v1.as_str()));
    let entry = env.lock().get("alpha").cloned().unwrap();
    assert_eq!(entry.version.as_deref(), Some("1.0.0"));
    let origin = entry.origin.unwrap();
    assert_eq!(origin.reference.as_deref(), Some("v1"));
    assert_eq!(origin.subfolder, "skills/alpha");
    assert_eq!(env.installed(), ["alpha"], "only the subfolder's skill");

    let err = env
        .add_all_at("acme/tools", "--upload-pack=touch")
        .unwrap_err();
    assert_eq!(err.check(), "source", "{err}");
    let err = env.add_all_at("acme/tools", "no-such-branch").unwrap_err();
    assert_eq!(err.check(), "fetch", "{err}");
}

#[test]
fn outdated_and_update_show_the_permission_diff_and_apply_only_when_asked() {
    let env = Env::new();
    let repo = Repo::new(&env.host, "acme", "weather");
    skill_files(&repo, "", "weather", "");
    let first = repo.commit("first");
    env.add("acme/weather", &[]).unwrap();

    let o = env.sources.outdated().unwrap();
    assert_eq!((o[0].name.as_str(), o[0].status), ("weather", "up_to_date"));
    assert!(matches!(
        env.sources
            .prepare_update("weather", SystemTime::now())
            .unwrap(),
        UpdateCheck::UpToDate
    ));

    // The publisher adds a network host, an env name, a write tool and changes a script.
    skill_files(
        &repo,
        "",
        "weather",
        "permissions:\n  network: [\"api.weather.example\"]\n  env: [\"WEATHER_KEY\"]\n  delegate: [\"maps\"]\n",
    );
    repo.write("run.py", "import urllib.request\nprint('{}')\n");
    let yaml = std::fs::read_to_string(repo.work.join("skill.yaml")).unwrap();
    repo.write(
        "skill.yaml",
        &format!("{yaml}  - name: post\n    description: Posts.\n    command: [\"python3\", \"run.py\"]\n    security: write\n    parameters: {{ type: object }}\n"),
    );
    let second = repo.commit("more");

    let o = env.sources.outdated().unwrap();
    assert_eq!(o[0].status, "outdated");
    assert_eq!(o[0].installed, first);
    assert_eq!(o[0].latest.as_deref(), Some(second.as_str()));

    let prepared = env
        .sources
        .prepare_update("weather", SystemTime::now())
        .unwrap();
    let prepared = changed(prepared);
    let d = &prepared.diff;
    assert!(d.widens());
    assert_eq!(d.hosts_added, ["api.weather.example"]);
    assert_eq!(d.env_added, ["WEATHER_KEY"]);
    assert_eq!(d.delegate_added, ["maps"]);
    assert_eq!(d.tools_added.len(), 1);
    assert_eq!(d.tools_added[0].0, "post");
    let script = d.files.iter().find(|f| f.path == "run.py").unwrap();
    assert!(
        script
            .diff
            .as_deref()
            .unwrap()
            .contains("+import urllib.request"),
        "{:?}",
        script.diff
    );
    let shown = d.render();
    assert!(
        shown.contains("+ network host api.weather.example")
            && shown.contains("+ tool post (security write)"),
        "{shown}"
    );
    // Widening: confirmation needed even with auto_update.
    assert!(prepared.needs_confirmation(true));
    assert!(prepared.needs_confirmation(false));
    // Not confirmed: dropped, nothing changes.
    drop(prepared);
    assert_eq!(
        env.lock()
            .get("weather")
            .unwrap()
            .origin
            .as_ref()
            .unwrap()
            .commit,
        first
    );
    assert_nothing_fetched_left(&env);

    let prepared = env
        .sources
        .prepare_update("weather", SystemTime::now())
        .unwrap();
    let prepared = changed(prepared);
    env.sources
        .apply_update(prepared, SystemTime::now())
        .unwrap();
    assert_eq!(
        env.lock()
            .get("weather")
            .unwrap()
            .origin
            .as_ref()
            .unwrap()
            .commit,
        second
    );
    assert_eq!(env.sources.outdated().unwrap()[0].status, "up_to_date");

    // A change that widens nothing may go without --yes under auto_update only.
    repo.write("run.py", "print('{\"ok\": true}')\n");
    repo.commit("fix");
    let prepared = env
        .sources
        .prepare_update("weather", SystemTime::now())
        .unwrap();
    let prepared = changed(prepared);
    assert!(!prepared.diff.widens());
    assert!(!prepared.needs_confirmation(true));
    assert!(prepared.needs_confirmation(false));
}

#[test]
fn update_of_a_skill_not_added_from_git_is_refused() {
    let env = Env::new();
    let err = env
        .sources
        .prepare_update("ghost", SystemTime::now())
        .unwrap_err();
    assert_eq!(err.check(), "not_found");
}

#[test]
fn hooks_in_the_source_repository_never_run() {
    let env = Env::new();
    let repo = Repo::new(&env.host, "acme", "hooked");
    skill_files(&repo, "", "hooked", "");
    let marker = env.host.join("HOOK-RAN");
    // Hooks in the served repository and an attribute asking for a filter driver.
    for hook in [
        "post-checkout",
        "post-merge",
        "reference-transaction",
        "pre-auto-gc",
        "post-update",
        "pre-upload-pack",
    ] {
        let p = repo.bare.join("hooks").join(hook);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
        Command::new("chmod").arg("755").arg(&p).status().unwrap();
    }
    git(
        &repo.bare,
        &[
            "config",
            "filter.evil.smudge",
            &format!("touch {}", marker.display()),
        ],
    );
    repo.write(".gitattributes", "* filter=evil\n");
    repo.commit("hooks");
    std::fs::remove_file(&marker).ok();
    env.add("acme/hooked", &[]).unwrap();
    assert!(!marker.exists(), "a hook or filter ran during the fetch");
    assert_eq!(env.installed(), ["hooked"]);
}

#[test]
fn a_link_out_of_the_repository_is_refused() {
    let env = Env::new();
    let repo = Repo::new(&env.host, "acme", "linky");
    skill_files(&repo, "", "linky", "");
    std::os::unix::fs::symlink("../../../../etc/passwd", repo.work.join("passwd")).unwrap();
    repo.commit("link out");
    let err = env.add("acme/linky", &[]).unwrap_err();
    assert_eq!(err.check(), "link", "{err}");
    assert!(err.to_string().contains("outside the repository"), "{err}");
    env.assert_nothing_left();
}

#[test]
fn a_link_inside_the_repository_is_written_as_the_file_it_names() {
    let env = Env::new();
    let repo = Repo::new(&env.host, "acme", "shared");
    skill_files(&repo, "skills/a", "a", "");
    repo.write("common/lib.py", "X = 1\n");
    std::os::unix::fs::symlink("../../common/lib.py", repo.work.join("skills/a/lib.py")).unwrap();
    repo.commit("shared lib");
    env.add("acme/shared", &[]).unwrap();
    let copied = env.sources.trust.skills_root.join("a/lib.py");
    assert!(copied.symlink_metadata().unwrap().file_type().is_file());
    assert_eq!(std::fs::read_to_string(copied).unwrap(), "X = 1\n");
}

#[test]
fn a_huge_file_is_refused_before_it_is_written() {
    let env = Env::new();
    let repo = Repo::new(&env.host, "acme", "huge");
    skill_files(&repo, "", "huge", "");
    repo.write("model.bin", &"x".repeat(2 * 1024 * 1024));
    repo.commit("huge");
    let err = env.add("acme/huge", &[]).unwrap_err();
    assert_eq!(err.check(), "size", "{err}");
    assert!(err.to_string().contains("max_file_bytes"), "{err}");
    env.assert_nothing_left();
}

#[test]
fn a_fetch_over_the_byte_limit_is_stopped() {
    let mut env = Env::new();
    env.sources.git.max_bytes = 64 * 1024;
    let repo = Repo::new(&env.host, "acme", "big");
    skill_files(&repo, "", "big", "");
    // Incompressible bytes, so the pack is as large as the file.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let noise: String = (0..400_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'!' + (x % 90) as u8)
        })
        .collect();
    repo.write("data.txt", &noise);
    repo.commit("big");
    let err = env.add("acme/big", &[]).unwrap_err();
    assert_eq!(err.check(), "size", "{err}");
    assert!(err.to_string().contains("max_bytes"), "{err}");
    env.assert_nothing_left();
}

#[test]
fn a_submodule_is_refused() {
    let env = Env::new();
    let inner = Repo::new(&env.host, "acme", "inner");
    inner.write("x.txt", "x\n");
    inner.commit("inner");
    let repo = Repo::new(&env.host, "acme", "outer");
    skill_files(&repo, "", "outer", "");
    git(
        &repo.work,
        &[
            "submodule",
            "add",
            "-q",
            &format!("file://{}", inner.bare.display()),
            "vendor",
        ],
    );
    repo.commit("with a submodule");
    let marker_clone = env.sources.trust.skills_root.join("outer/vendor/x.txt");
    let err = env.add("acme/outer", &[]).unwrap_err();
    assert_eq!(err.check(), "submodule", "{err}");
    assert!(err.to_string().contains("vendor"), "{err}");
    assert!(!marker_clone.exists());
    env.assert_nothing_left();
}

#[test]
fn the_install_policy_refuses_sources_and_permissions_it_does_not_allow() {
    let mut env = Env::new();
    let repo = Repo::new(&env.host, "evil", "skills");
    skill_files(
        &repo,
        "",
        "grabby",
        "permissions:\n  network: [\"exfil.example\"]\n",
    );
    repo.commit("grabby");
    env.sources.policy.rule.sources = vec!["acme/*".into()];
    let err = env.add("evil/skills", &[]).unwrap_err();
    assert_eq!(err.check(), "install_policy", "{err}");
    assert!(err.to_string().contains("not in sources"), "{err}");

    env.sources.policy.rule.sources = vec!["evil/skills".into()];
    env.sources.policy.rule.max_permissions.network = Some(vec!["api.ok.example".into()]);
    let err = env.add("evil/skills", &[]).unwrap_err();
    assert_eq!(err.check(), "install_policy", "{err}");
    assert!(err.to_string().contains("exfil.example"), "{err}");

    env.sources.policy.rule.max_permissions.network = None;
    env.sources.policy.rule.signed_only = true;
    let err = env.add("evil/skills", &[]).unwrap_err();
    assert!(err.to_string().contains("not signed"), "{err}");
    env.assert_nothing_left();
}

#[test]
fn transports_that_run_commands_or_plain_http_are_refused() {
    let env = Env::new();
    for url in [
        "ext::sh -c touch% /tmp/pwned",
        "http://127.0.0.1:1/x.git",
        "fd::3",
    ] {
        let err = env.add(url, &[]).unwrap_err();
        assert_eq!(err.check(), "source", "{url}: {err}");
    }
}

#[test]
fn add_from_a_collection_index_installs_the_entries_chosen() {
    let env = Env::new();
    let repo = Repo::new(&env.host, "acme", "collection");
    for name in ["pdf", "xlsx"] {
        skill_files(&repo, &format!("skills/{name}"), name, "");
    }
    let commit = repo.commit("two");
    let index = serde_json::json!({
        "version": 1,
        "name": "Acme",
        "skills": [
            {"name": "pdf", "description": "PDF forms", "source": "acme/collection", "path": "skills/pdf"},
            {"name": "xlsx", "description": "Sheets", "source": "acme/collection"}
        ]
    });
    std::fs::create_dir_all(&env.sources.base).unwrap();
    std::fs::write(env.sources.base.join("index.json"), index.to_string()).unwrap();
    let err = env.add("index.json", &[]).unwrap_err();
    assert_eq!(err.check(), "choose", "{err}");
    let done = env.add("index.json", &["pdf", "xlsx"]).unwrap();
    assert_eq!(done.installed.len(), 2);
    assert_eq!(env.installed(), ["pdf", "xlsx"]);
    let origin = env.lock().get("xlsx").unwrap().origin.clone().unwrap();
    assert_eq!(
        (origin.subfolder.as_str(), origin.commit.as_str()),
        ("skills/xlsx", commit.as_str())
    );
    assert_eq!(origin.source, "acme/collection");
}

#[test]
fn find_matches_an_installed_skill_by_the_source_it_was_added_from() {
    let env = Env::new();
    let repo = Repo::new(&env.host, "acme", "weather");
    skill_files(&repo, "", "weather", "");
    let commit = repo.commit("first");
    env.add("acme/weather", &[]).unwrap();
    let catalog = skillbox_protocol::skill::discover(
        std::slice::from_ref(&env.sources.trust.skills_root),
        Default::default(),
    );
    let found = skillbox_core::skills::find::search("acme", &[], &catalog.skills);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].name, "weather");
    assert_eq!(found[0].source, format!("acme/weather@{}", &commit[..12]));
}

#[test]
fn a_source_that_never_answers_is_stopped_at_the_fetch_timeout() {
    let mut env = Env::new();
    env.sources.git.allow_http = true;
    env.sources.git.timeout = Duration::from_secs(1);
    // A server that accepts and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let conns: Vec<_> = listener.incoming().take(1).collect();
        std::thread::sleep(Duration::from_secs(5));
        drop(conns);
    });
    let started = std::time::Instant::now();
    let err = env
        .add(&format!("http://127.0.0.1:{port}/acme/slow.git"), &[])
        .unwrap_err();
    assert_eq!(err.check(), "fetch", "{err}");
    assert!(err.to_string().contains("timeout_secs"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "not stopped at the timeout"
    );
    env.assert_nothing_left();
    drop(held);
}
