//! Rough edges of adding skills: a folder inside a `file://` repository, an abbreviated
//! commit as the ref, `--all` beside a repository's template folder, and a commit that
//! leaves a skill's folder alone (no update for `outdated`, nothing to confirm for
//! `update`).

use std::time::SystemTime;

use skillbox_core::skills::install::lock;
use skillbox_core::skills::sources::{AddRequest, UpdateCheck};

use super::git_repo::{skill_files, Repo};
use super::sources::{changed, Env};

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

/// A repository holding skills `a` and `b`, both added; returns it and the commit.
fn two_skills(env: &Env) -> (Repo, String) {
    let repo = Repo::new(&env.host, "acme", "pair");
    skill_files(&repo, "skills/a", "a", "");
    skill_files(&repo, "skills/b", "b", "");
    let first = repo.commit("two skills");
    env.add_all_at("acme/pair", "main").unwrap();
    (repo, first)
}

fn status_of(env: &Env, name: &str) -> (&'static str, Option<String>) {
    let list = env.sources.outdated().unwrap();
    let e = list.iter().find(|e| e.name == name).unwrap();
    assert!(e.error.is_none(), "{:?}", e.error);
    (e.status, e.latest.clone())
}

#[test]
fn outdated_lists_only_the_skill_whose_folder_changed() {
    let env = Env::new();
    let (repo, first) = two_skills(&env);
    let origin = env.lock().get("a").unwrap().origin.clone().unwrap();
    assert!(origin.tree.is_some(), "the folder's tree id is recorded");

    // A commit outside both folders is no update of either.
    repo.write("README.md", "the pair\n");
    let readme = repo.commit("readme");
    assert_eq!(status_of(&env, "a"), ("up_to_date", Some(readme.clone())));
    assert_eq!(status_of(&env, "b"), ("up_to_date", Some(readme)));

    repo.write("skills/b/run.py", "print('{\"b\": 2}')\n");
    let second = repo.commit("change b only");
    assert_eq!(status_of(&env, "a"), ("up_to_date", Some(second.clone())));
    assert_eq!(status_of(&env, "b"), ("outdated", Some(second)));
    let list = env.sources.outdated().unwrap();
    assert!(list.iter().all(|e| e.installed == first));
}

#[test]
fn outdated_of_a_lock_without_tree_ids_reads_the_installed_commit() {
    let env = Env::new();
    let (repo, _) = two_skills(&env);
    // A lock written before tree ids were recorded.
    let root = &env.sources.trust.skills_root;
    let mut old = lock::read(root).unwrap();
    for entry in old.skills.values_mut() {
        entry.origin.as_mut().unwrap().tree = None;
    }
    lock::write(root, &old).unwrap();
    repo.write("skills/b/run.py", "print('{\"b\": 2}')\n");
    repo.commit("change b only");
    assert_eq!(status_of(&env, "a").0, "up_to_date");
    assert_eq!(status_of(&env, "b").0, "outdated");
}

#[test]
fn update_of_an_unchanged_folder_records_the_commit_without_confirmation() {
    let env = Env::new();
    let (repo, first) = two_skills(&env);
    let digest = env.lock().get("a").unwrap().digest.clone();
    repo.write("skills/b/run.py", "print('{\"b\": 2}')\n");
    let second = repo.commit("change b only");

    let check = env.sources.prepare_update("a", SystemTime::now()).unwrap();
    let UpdateCheck::FolderUnchanged {
        from_commit,
        to_commit,
    } = check
    else {
        panic!("expected an unchanged folder, got {check:?}");
    };
    assert_eq!((from_commit, to_commit), (first, second.clone()));
    let a = env.lock().get("a").cloned().unwrap();
    assert_eq!(
        a.origin.unwrap().commit,
        second,
        "the new commit is recorded"
    );
    assert_eq!(a.digest, digest, "nothing was installed");
    assert_eq!(status_of(&env, "a"), ("up_to_date", Some(second.clone())));
    let list = env.sources.outdated().unwrap();
    assert_eq!(
        list.iter().find(|e| e.name == "a").unwrap().installed,
        second
    );

    // The skill whose folder changed still shows its update, to be confirmed.
    let b = changed(env.sources.prepare_update("b", SystemTime::now()).unwrap());
    assert!(b.diff.files.iter().any(|f| f.path == "run.py"));
    assert!(b.needs_confirmation(false));
}
