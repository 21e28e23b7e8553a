//! Rough edges of adding skills: a folder inside a `file://` repository, an abbreviated
//! commit as the ref, and `--all` beside a repository's template folder.

use std::time::SystemTime;

use skillbox_core::skills::sources::AddRequest;

use super::git_repo::{skill_files, Repo};
use super::sources::Env;

#[test]
fn add_file_url_with_subfolder_installs_that_folder() {
    let env = Env::new();
    let repo = Repo::new(&env.host, "acme", "tools");
    skill_files(&repo, "skills/alpha", "alpha", "");
    skill_files(&repo, "skills/beta", "beta", "");
    repo.commit("two");
    let url = format!("file://{}/skills/alpha", repo.bare.display());
    let done = env.add(&url, &[]).unwrap();
    assert_eq!(env.installed(), ["alpha"]);
    assert_eq!(
        done.installed[0].entry.origin.as_ref().unwrap().subfolder,
        "skills/alpha"
    );

    let err = env.add("file:///no/such/repo/skills/x", &[]).unwrap_err();
    assert_eq!(err.check(), "source", "{err}");
    assert!(
        err.to_string().contains("owner/repo/path/to/folder"),
        "{err}"
    );
}

#[test]
fn add_short_ref_resolves_the_abbreviated_commit() {
    let env = Env::new();
    let repo = Repo::new(&env.host, "acme", "weather");
    skill_files(&repo, "", "weather", "version: 1.0.0\n");
    let first = repo.commit("first");
    skill_files(&repo, "", "weather", "version: 2.0.0\n");
    repo.commit("second");
    let done = env
        .sources
        .add(
            &AddRequest {
                source: "acme/weather".into(),
                reference: Some(first[..7].into()),
                ..Default::default()
            },
            SystemTime::now(),
        )
        .unwrap();
    assert_eq!(done.commit.as_deref(), Some(first.as_str()));
    let entry = env.lock().get("weather").cloned().unwrap();
    assert_eq!(entry.version.as_deref(), Some("1.0.0"));
    assert_eq!(
        entry.origin.unwrap().reference.as_deref(),
        Some(first.as_str())
    );

    let err = env.add_all_at("acme/weather", "0000000").unwrap_err();
    assert_eq!(err.check(), "source", "{err}");
    assert!(err.to_string().contains("full 40-hex"), "{err}");
}

#[test]
fn add_all_skips_template_folders_and_says_why() {
    let env = Env::new();
    let repo = Repo::new(&env.host, "acme", "coll");
    skill_files(&repo, "skills/pdf", "pdf", "");
    skill_files(&repo, "template", "template-skill", "");
    skill_files(&repo, "skills/starter", "template-skill", "");
    repo.commit("coll");
    let done = env.add_all_at("acme/coll", "main").unwrap();
    assert_eq!(env.installed(), ["pdf"]);
    let mut skipped: Vec<&str> = done.skipped.iter().map(|s| s.folder.as_str()).collect();
    skipped.sort();
    assert_eq!(skipped, ["skills/starter", "template"]);
    assert!(done.skipped.iter().all(|s| s.reason.contains("template")));
}
