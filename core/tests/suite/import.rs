//! `skillbox skill import`: the skills folders of Claude Code, Codex, OpenClaw and the
//! shared `~/.agents`, built in a temporary home, copied through the verified install
//! (every skip and refusal asserted with its reason) or linked as a skills root that
//! discovery then reads.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use skillbox_core::skills::import::{
    import, Agent, ImportError, ImportMode, ImportReport, Outcome, SkipReason,
};
use skillbox_core::skills::install::TrustPolicy;
use skillbox_core::skills::roots::RootAdded;
use skillbox_core::skills::sources::InstallPolicy;
use skillbox_core::state::config::Config;
use skillbox_protocol::skill::{discover, DiscoveryOptions, Trust};

use super::harness::{write_skill, Workspace};

/// A SKILL.md-only skill, as agents keep them.
fn agent_skill(dir: &Path, name: &str, description: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\nDo it well.\n"),
    )
    .unwrap();
}

fn home(ws: &Workspace) -> PathBuf {
    ws.path().join("home")
}

fn core_ws(ws: &Workspace) -> skillbox_core::state::Workspace {
    skillbox_core::state::Workspace::new(ws.path())
}

/// Imports as the CLI does: the policy's roots are the workspace's `[skills] roots`.
fn run(ws: &Workspace, agent: Agent, mode: ImportMode) -> Result<ImportReport, ImportError> {
    let config = Config::load(ws.path()).unwrap();
    let roots = config.skills.resolve(ws.path(), Some(&home(ws))).unwrap();
    let install_policy = InstallPolicy {
        rule: config.skills.install_policy.clone(),
        git_host: config.skills.git_host.clone(),
    };
    import(
        &agent.folder(&home(ws)),
        &core_ws(ws),
        &ws.policy.clone().with_roots(roots),
        mode,
        Some(&home(ws)),
        &install_policy,
        SystemTime::now(),
    )
}

/// Each candidate's name (or folder name) and its outcome.
fn outcomes(report: &ImportReport) -> Vec<(String, Outcome)> {
    report
        .candidates
        .iter()
        .map(|c| {
            let label = c
                .name
                .clone()
                .unwrap_or_else(|| c.folder.file_name().unwrap().to_string_lossy().into_owned());
            (label, c.outcome.clone())
        })
        .collect()
}

fn imported(report: &ImportReport) -> Vec<String> {
    report.imported().map(|c| c.name.clone().unwrap()).collect()
}

/// Why the candidate `label` was skipped (the first skip of that name).
fn skip_of(report: &ImportReport, label: &str) -> SkipReason {
    let all = outcomes(report);
    all.iter()
        .find_map(|(l, o)| match o {
            Outcome::Skipped { reason } if l == label => Some(reason.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{label} was not skipped: {all:?}"))
}

#[test]
fn import_copies_claude_skills_and_one_level_of_plugin_groups() {
    let ws = Workspace::new(false);
    let folder = Agent::Claude.folder(&home(&ws));
    agent_skill(&folder.join("pdf"), "pdf", "Read PDF forms");
    // A collection cloned in, or a plugin: <group>/skills/<name>/SKILL.md.
    agent_skill(
        &folder.join("anthropic-skills/skills/docx"),
        "docx",
        "Word documents",
    );
    agent_skill(&folder.join(".cache/hidden"), "hidden", "Not looked at");
    let report = run(&ws, Agent::Claude, ImportMode::Copy).unwrap();
    assert_eq!(imported(&report), ["docx", "pdf"]);
    assert_eq!(report.candidates.len(), 2, "{report:?}");
    let lock = ws.lock();
    for name in ["docx", "pdf"] {
        assert_eq!(lock.get(name).unwrap().trust, Trust::Local);
        assert!(ws.root().join(name).join("SKILL.md").is_file());
    }
    assert!(!report.failed());
}

#[test]
fn import_copies_codex_skills_but_not_its_bundled_system_folder() {
    let ws = Workspace::new(false);
    let folder = Agent::Codex.folder(&home(&ws));
    agent_skill(&folder.join("commit-work"), "commit-work", "Write commits");
    agent_skill(
        &folder.join(".system/skill-creator"),
        "skill-creator",
        "Bundled with Codex",
    );
    let report = run(&ws, Agent::Codex, ImportMode::Copy).unwrap();
    assert_eq!(imported(&report), ["commit-work"]);
    assert!(!ws.root().join("skill-creator").exists());
}

#[test]
fn import_copies_openclaw_skills() {
    let ws = Workspace::new(false);
    let folder = Agent::Openclaw.folder(&home(&ws));
    agent_skill(&folder.join("weather"), "weather", "Forecasts");
    // A full skillbox skill (skill.yaml, a script) is imported with its version.
    write_skill(&folder.join("notes"), "notes", "1.2.0", "notes");
    let report = run(&ws, Agent::Openclaw, ImportMode::Copy).unwrap();
    assert_eq!(imported(&report), ["notes", "weather"]);
    assert_eq!(
        ws.lock().get("notes").unwrap().version.as_deref(),
        Some("1.2.0")
    );
}

#[test]
fn import_copies_shared_agents_skills() {
    let ws = Workspace::new(false);
    let folder = Agent::Agents.folder(&home(&ws));
    assert!(folder.ends_with(".agents/skills"));
    agent_skill(&folder.join("review"), "review", "Review code");
    let report = run(&ws, Agent::Agents, ImportMode::Copy).unwrap();
    assert_eq!(imported(&report), ["review"]);
    match &report.candidates[0].outcome {
        Outcome::Imported { dir, trust } => {
            assert_eq!(dir, &ws.root().join("review"));
            assert_eq!(trust, "local");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn import_skips_a_folder_without_skill_md() {
    let ws = Workspace::new(false);
    let folder = Agent::Claude.folder(&home(&ws));
    std::fs::create_dir_all(folder.join("notes-only")).unwrap();
    std::fs::write(folder.join("notes-only/README.md"), "not a skill").unwrap();
    std::fs::write(folder.join("loose.md"), "a file, not a folder").unwrap();
    let report = run(&ws, Agent::Claude, ImportMode::Copy).unwrap();
    assert_eq!(report.candidates.len(), 1);
    assert_eq!(skip_of(&report, "notes-only"), SkipReason::NotASkill);
    assert!(SkipReason::NotASkill.message().contains("no SKILL.md"));
    assert!(!report.failed(), "a skip is not a failure");
}

#[test]
fn import_skips_a_skill_that_does_not_load_with_the_loader_reason() {
    let ws = Workspace::new(false);
    let folder = Agent::Claude.folder(&home(&ws));
    std::fs::create_dir_all(folder.join("broken")).unwrap();
    std::fs::write(folder.join("broken/SKILL.md"), "no front matter at all").unwrap();
    let report = run(&ws, Agent::Claude, ImportMode::Copy).unwrap();
    match skip_of(&report, "broken") {
        SkipReason::DoesNotLoad { detail } => assert!(!detail.is_empty()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn import_refuses_a_skill_containing_a_symlink() {
    let ws = Workspace::new(false);
    let folder = Agent::Claude.folder(&home(&ws));
    agent_skill(&folder.join("leaky"), "leaky", "Links out");
    std::os::unix::fs::symlink("/etc/passwd", folder.join("leaky/passwd")).unwrap();
    let report = run(&ws, Agent::Claude, ImportMode::Copy).unwrap();
    match skip_of(&report, "leaky") {
        SkipReason::Refused { check, detail } => {
            assert_eq!(check, "symlink");
            assert!(detail.contains("passwd"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!ws.root().join("leaky").exists());
    assert!(ws.lock().get("leaky").is_none());
}

#[test]
fn import_skips_a_name_taken_by_a_folder_skillbox_did_not_install() {
    let ws = Workspace::new(false);
    let folder = Agent::Claude.folder(&home(&ws));
    agent_skill(&folder.join("pdf"), "pdf", "Read PDF forms");
    agent_skill(&ws.root().join("pdf"), "pdf", "Hand-made, not in the lock");
    let report = run(&ws, Agent::Claude, ImportMode::Copy).unwrap();
    assert_eq!(
        skip_of(&report, "pdf"),
        SkipReason::NameTaken {
            path: ws.root().join("pdf")
        }
    );
    let kept = std::fs::read_to_string(ws.root().join("pdf/SKILL.md")).unwrap();
    assert!(kept.contains("Hand-made"), "the user's folder is untouched");
}

#[test]
fn import_reports_an_unchanged_skill_as_already_installed() {
    let ws = Workspace::new(false);
    let folder = Agent::Claude.folder(&home(&ws));
    agent_skill(&folder.join("pdf"), "pdf", "Read PDF forms");
    run(&ws, Agent::Claude, ImportMode::Copy).unwrap();
    let digest = ws.lock().get("pdf").unwrap().digest.clone();
    let again = run(&ws, Agent::Claude, ImportMode::Copy).unwrap();
    assert_eq!(
        skip_of(&again, "pdf"),
        SkipReason::AlreadyInstalled { digest }
    );
    // Changed in the agent's folder: imported again.
    agent_skill(&folder.join("pdf"), "pdf", "Read and fill PDF forms");
    let changed = run(&ws, Agent::Claude, ImportMode::Copy).unwrap();
    assert_eq!(imported(&changed), ["pdf"]);
}

#[test]
fn import_skips_a_second_skill_of_the_same_name() {
    let ws = Workspace::new(false);
    let folder = Agent::Claude.folder(&home(&ws));
    agent_skill(&folder.join("a-group/skills/pdf"), "pdf", "First");
    agent_skill(&folder.join("pdf"), "pdf", "Second");
    let report = run(&ws, Agent::Claude, ImportMode::Copy).unwrap();
    assert_eq!(imported(&report), ["pdf"]);
    assert_eq!(
        skip_of(&report, "pdf"),
        SkipReason::Duplicate {
            first: folder.join("a-group/skills/pdf")
        }
    );
}

#[test]
fn import_skips_unsigned_skills_under_require_signed_and_installs_signed_ones() {
    let ws = Workspace::new(true);
    let folder = Agent::Claude.folder(&home(&ws));
    agent_skill(&folder.join("plain"), "plain", "Not signed");
    write_skill(&folder.join("sealed"), "sealed", "1.0.0", "sealed");
    ws.sign(&folder.join("sealed"), "sealed", "1.0.0");
    let report = run(&ws, Agent::Claude, ImportMode::Copy).unwrap();
    assert_eq!(imported(&report), ["sealed"]);
    assert_eq!(ws.lock().get("sealed").unwrap().trust, Trust::Signed);
    assert_eq!(skip_of(&report, "plain"), SkipReason::Unsigned);
    assert!(SkipReason::Unsigned.message().contains("require_signed"));
}

#[test]
fn import_refuses_a_missing_agent_folder_naming_it() {
    let ws = Workspace::new(false);
    let err = run(&ws, Agent::Openclaw, ImportMode::Copy).unwrap_err();
    let path = Agent::Openclaw.folder(&home(&ws));
    assert!(matches!(&err, ImportError::AgentFolder { path: p, .. } if p == &path));
    let msg = err.to_string();
    assert!(
        msg.contains(&path.display().to_string()) && msg.contains("does not exist"),
        "{msg}"
    );
}

/// The workspace's roots as the core reads them, and the skills discovery finds there.
fn discovered(ws: &Workspace) -> Vec<(String, PathBuf)> {
    let config = Config::load(ws.path()).unwrap();
    let roots = config.skills.resolve(ws.path(), Some(&home(ws))).unwrap();
    discover(&roots, DiscoveryOptions::default())
        .skills
        .into_iter()
        .map(|s| (s.name, s.dir))
        .collect()
}

#[test]
fn import_link_adds_the_agent_folder_as_a_root_that_discovery_reads() {
    let ws = Workspace::new(false);
    let folder = Agent::Claude.folder(&home(&ws));
    agent_skill(&folder.join("pdf"), "pdf", "Read PDF forms");
    agent_skill(&folder.join("plugin/skills/docx"), "docx", "Word documents");
    let config = "# my workspace\n[trust]\nrequire_signed = false # on purpose\n";
    std::fs::write(ws.path().join("skillbox.toml"), config).unwrap();
    ws.install(&ws.signed_skill("mine", "1.0.0", "")).unwrap();

    let report = run(&ws, Agent::Claude, ImportMode::Link).unwrap();
    // In the order of the folders: `pdf`, then `plugin/skills/docx`.
    assert_eq!(imported(&report), ["pdf", "docx"]);
    assert_eq!(report.root, Some(RootAdded::Added));
    let written = std::fs::read_to_string(ws.path().join("skillbox.toml")).unwrap();
    assert!(written.starts_with(config), "comments kept: {written}");

    let real = folder.canonicalize().unwrap();
    assert_eq!(
        discovered(&ws),
        [
            ("docx".to_string(), real.join("plugin/skills/docx")),
            ("mine".to_string(), ws.root().join("mine")),
            ("pdf".to_string(), real.join("pdf")),
        ]
    );
    // The installed skills' root stays first.
    let roots = Config::load(ws.path()).unwrap().skills.roots;
    assert_eq!(roots, ["skills".to_string(), real.display().to_string()]);
    assert!(ws.lock().get("pdf").is_none(), "nothing was copied");

    let again = run(&ws, Agent::Claude, ImportMode::Link).unwrap();
    assert_eq!(skip_of(&again, "pdf"), SkipReason::AlreadyLinked);
    assert_eq!(again.root, None);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("skillbox.toml")).unwrap(),
        written
    );
}

#[test]
fn import_link_skips_a_skill_shadowed_by_an_installed_one() {
    let ws = Workspace::new(false);
    let folder = Agent::Codex.folder(&home(&ws));
    agent_skill(&folder.join("mine"), "mine", "The agent's copy");
    ws.install(&ws.signed_skill("mine", "1.0.0", "")).unwrap();
    let report = run(&ws, Agent::Codex, ImportMode::Link).unwrap();
    assert_eq!(
        skip_of(&report, "mine"),
        SkipReason::Shadowed {
            by: ws.root().join("mine")
        }
    );
    assert_eq!(
        report.root, None,
        "nothing to link: the config is untouched"
    );
    assert!(!ws.path().join("skillbox.toml").exists());
}

#[test]
fn import_link_skips_a_symlink_out_of_the_agent_folder() {
    let ws = Workspace::new(false);
    let folder = Agent::Agents.folder(&home(&ws));
    let elsewhere = ws.scratch("elsewhere");
    agent_skill(&elsewhere, "far", "Lives elsewhere");
    std::fs::create_dir_all(&folder).unwrap();
    std::os::unix::fs::symlink(&elsewhere, folder.join("far")).unwrap();
    let report = run(&ws, Agent::Agents, ImportMode::Link).unwrap();
    assert_eq!(
        skip_of(&report, "far"),
        SkipReason::LinkLeavesFolder {
            target: elsewhere.canonicalize().unwrap()
        }
    );
    // Copied, the same skill is fine: the copy checks what it reads.
    let copied = run(&ws, Agent::Agents, ImportMode::Copy).unwrap();
    assert_eq!(imported(&copied), ["far"]);
}

#[test]
fn import_link_is_refused_under_require_signed() {
    let ws = Workspace::new(true);
    let folder = Agent::Claude.folder(&home(&ws));
    agent_skill(&folder.join("pdf"), "pdf", "Read PDF forms");
    let policy: &TrustPolicy = &ws.policy;
    assert!(policy.require_signed);
    let err = run(&ws, Agent::Claude, ImportMode::Link).unwrap_err();
    assert!(matches!(err, ImportError::LinkUnderRequireSigned));
    assert!(err.to_string().contains("without --link"), "{err}");
    assert!(!ws.path().join("skillbox.toml").exists());
}

#[test]
fn import_checks_the_install_policy_on_sources_and_permissions() {
    let ws = Workspace::new(false);
    let folder = Agent::Claude.folder(&home(&ws));
    agent_skill(&folder.join("plain"), "plain", "A plain skill.");
    let grabby = folder.join("grabby");
    std::fs::create_dir_all(&grabby).unwrap();
    std::fs::write(
        grabby.join("SKILL.md"),
        "---\nname: grabby\ndescription: Wants a key.\n---\nbody\n",
    )
    .unwrap();
    std::fs::write(
        grabby.join("skill.yaml"),
        "name: grabby\ndescription: Wants a key.\npermissions:\n  env: [\"AWS_SECRET_ACCESS_KEY\"]\n",
    )
    .unwrap();
    std::fs::write(
        ws.path().join("skillbox.toml"),
        "[skills.install_policy.max_permissions]\nenv = []\n",
    )
    .unwrap();
    let report = run(&ws, Agent::Claude, ImportMode::Copy).unwrap();
    assert_eq!(imported(&report), ["plain"]);
    let grabby = report
        .candidates
        .iter()
        .find(|c| c.name.as_deref() == Some("grabby"))
        .unwrap();
    match &grabby.outcome {
        Outcome::Skipped {
            reason: SkipReason::Policy { detail },
        } => assert!(detail.contains("AWS_SECRET_ACCESS_KEY"), "{detail}"),
        other => panic!("not refused by the policy: {other:?}"),
    }

    // A sources rule that names only another folder refuses every candidate.
    std::fs::write(
        ws.path().join("skillbox.toml"),
        "[skills.install_policy]\nsources = [\"/srv/approved-skills/*\"]\n",
    )
    .unwrap();
    let report = run(&ws, Agent::Claude, ImportMode::Link).unwrap();
    assert!(imported(&report).is_empty());
    assert!(report.candidates.iter().all(|c| matches!(
        &c.outcome,
        Outcome::Skipped { reason: SkipReason::Policy { detail } } if detail.contains("not in sources")
    )));
    assert!(report.root.is_none(), "nothing linked, so no root added");
}
