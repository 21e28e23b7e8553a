//! Signed skills end to end (docs/signing-runbook.md): certificates made with `skillbox certs`, packages
//! signed with `skillbox certs sign` and installed through `POST /v1/skills/install`, their
//! tools called through the gateway; revocation picked up on SIGHUP (and by the trust-folder
//! watch) while another skill's call is in flight; root rotation with an overlap; a file
//! changed after install refused at load; removal through `DELETE /v1/skills/{name}`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};

use crate::harness::{binary, poll, Options, Skillbox, POLL_TIMEOUT};

/// Runs the `skillbox` CLI with exactly `args` (for commands without `--workspace`).
pub(super) fn skillbox(args: &[&str]) -> Output {
    Command::new(binary("skillbox"))
        .args(args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .output()
        .expect("run the skillbox CLI")
}

/// The stdout of a command that must succeed.
pub(super) fn succeeded(what: &str, out: &Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(super) fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// `skillbox certs issue --publisher NAME`: the developer chain and key it wrote.
pub(super) fn issue(sb: &Skillbox, publisher: &str) -> (PathBuf, PathBuf) {
    succeeded(
        "certs issue",
        &sb.cli(&["certs", "issue", "--publisher", publisher, "--days", "30"]),
    );
    let dir = sb.state().join("ca/developers");
    (
        dir.join(format!("{publisher}.pem")),
        dir.join(format!("{publisher}.key")),
    )
}

/// Writes a skill package `name` at `version` outside the workspace, with one `plain`
/// tool `run` that prints its name and version, and signs it with `cert`/`key`.
pub(super) fn signed_package(
    sb: &Skillbox,
    name: &str,
    version: &str,
    cert: &Path,
    key: &Path,
) -> PathBuf {
    let dir = sb
        .root
        .path()
        .join("packages")
        .join(format!("{name}-{version}"));
    fs::create_dir_all(dir.join("scripts")).expect("create the package");
    fs::write(
        dir.join("skill.yaml"),
        format!(
            "name: {name}\nversion: {version}\ndescription: signed end-to-end test skill {name}\n\
             tools:\n  - name: run\n    description: prints the skill's name and version\n\
             \x20   command: [\"sh\", \"scripts/run.sh\"]\n    protocol: plain\n"
        ),
    )
    .expect("write skill.yaml");
    let script = dir.join("scripts/run.sh");
    fs::write(&script, format!("#!/bin/sh\necho \"{name} {version}\"\n")).expect("write run.sh");
    for (path, mode) in [
        (dir.parent().expect("packages"), 0o755),
        (dir.as_path(), 0o755),
        (&dir.join("scripts"), 0o755),
        (&script, 0o755),
        (&dir.join("skill.yaml"), 0o644),
    ] {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
    }
    succeeded(
        "certs sign",
        &skillbox(&[
            "certs",
            "sign",
            path_str(&dir),
            "--cert",
            path_str(cert),
            "--key",
            path_str(key),
        ]),
    );
    assert!(dir.join("SIGNATURE").is_file());
    dir
}

/// `skillbox skill pack DIR --out DIR.tar.gz`.
pub(super) fn pack(dir: &Path) -> PathBuf {
    let out = dir.with_extension("tar.gz");
    succeeded(
        "skill pack",
        &skillbox(&["skill", "pack", path_str(dir), "--out", path_str(&out)]),
    );
    out
}

/// `POST /v1/skills/install`, which must succeed; the answer.
pub(super) fn install(sb: &Skillbox, source: &Path) -> Value {
    let r = sb.request(
        "POST",
        "/v1/skills/install",
        Some(&json!({"source": source})),
    );
    assert_eq!(r.status, 200, "install {}: {}", source.display(), r.body);
    let body = r.json();
    assert_eq!(body["reload"], "ok", "{body}");
    body
}

/// The `/v1/skills` entry of `name`, if listed.
fn listed(sb: &Skillbox, name: &str) -> Option<Value> {
    let r = sb.request("GET", "/v1/skills", None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
}

/// Polls `/v1/skills` until `name` is listed unavailable; its entry.
fn wait_disabled(sb: &Skillbox, name: &str) -> Value {
    poll(&format!("{name} disabled"), POLL_TIMEOUT, || {
        listed(sb, name).filter(|s| s["available"] == false)
    })
}

/// A call of `tool` that must be refused as disabled by the trust policy; its error.
fn refused_call(sb: &Skillbox, tool: &str) -> String {
    let r = sb.call(tool, json!({}));
    assert_eq!(r["success"], false, "{tool} ran although disabled: {r}");
    assert_eq!(r["error_kind"], "permission_denied", "{r}");
    let error = r["error"].as_str().expect("error").to_string();
    assert!(error.contains("disabled by the trust policy"), "{error}");
    error
}

fn hangup(sb: &Skillbox) {
    let pid = Pid::from_raw(i32::try_from(sb.pid()).expect("pid"));
    kill(pid, Signal::SIGHUP).expect("send SIGHUP to skillbox");
}

fn stdout_of(data: &Value) -> &str {
    data["stdout"].as_str().expect("stdout")
}

/// `skillbox skill verify --all --json`: exit success and the report.
pub(super) fn verify_all(sb: &Skillbox) -> (bool, Value) {
    let out = sb.cli(&["skill", "verify", "--all", "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "verify --all printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.success(), report)
}

pub(super) fn report_of<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {report}"))
}

#[test]
fn signed_tar_gz_installs_through_the_gateway_runs_and_shows_the_signed_label() {
    let sb = Skillbox::start(Options::default());
    succeeded("certs init-root", &sb.cli(&["certs", "init-root"]));
    let (cert, key) = issue(&sb, "acme");
    let archive = pack(&signed_package(&sb, "stamp", "1.0.0", &cert, &key));

    let body = install(&sb, &archive);
    assert_eq!(body["installed"]["name"], "stamp", "{body}");
    assert_eq!(body["installed"]["trust"], "signed", "{body}");
    assert_eq!(body["installed"]["publisher"], "acme", "{body}");
    assert!(body.get("warning").is_none(), "{body}");

    let data = sb.call_ok("stamp:run", json!({}));
    assert_eq!(stdout_of(&data), "stamp 1.0.0\n");
    let entry = listed(&sb, "stamp").expect("stamp listed");
    assert_eq!(entry["trust"], "signed", "{entry}");
    assert_eq!(entry["available"], true, "{entry}");
    assert_eq!(entry["version"], "1.0.0", "{entry}");
    // The harness's skills were put in place by hand: unsigned, trusted as "local".
    assert_eq!(listed(&sb, "echo").expect("echo listed")["trust"], "local");
}

#[test]
fn revoked_certificate_disables_its_skill_on_sighup_while_another_call_completes() {
    const SLEEP_SECONDS: u64 = 10;
    let sb = Skillbox::start(Options::default());
    succeeded("certs init-root", &sb.cli(&["certs", "init-root"]));
    let (cert, key) = issue(&sb, "leaky");
    install(&sb, &signed_package(&sb, "stamp", "1.0.0", &cert, &key));
    assert_eq!(
        stdout_of(&sb.call_ok("stamp:run", json!({}))),
        "stamp 1.0.0\n"
    );

    let started = Instant::now();
    let in_flight = sb.call_in_background("slow:sleep", json!({"seconds": SLEEP_SECONDS}));
    poll("the slow call in flight", POLL_TIMEOUT, || {
        (sb.health()["sandbox"]["in_flight"].as_u64() >= Some(1)).then_some(())
    });
    succeeded(
        "certs revoke",
        &sb.cli(&["certs", "revoke", path_str(&cert), "--reason", "key leaked"]),
    );
    hangup(&sb);

    let entry = wait_disabled(&sb, "stamp");
    let disabled_after = started.elapsed();
    let reason = entry["reason"].as_str().expect("reason");
    assert!(reason.contains("revocation"), "{entry}");
    assert!(reason.contains("key leaked"), "{entry}");
    assert_eq!(entry["trust"], "signed", "{entry}");
    let one = sb.request("GET", "/v1/skills/stamp", None);
    assert_eq!(one.status, 200, "{}", one.body);
    assert_eq!(one.json()["available"], false, "{}", one.body);
    let tools = sb.request("GET", "/v1/tools", None).body;
    assert!(
        !tools.contains("stamp:run"),
        "a disabled tool is offered: {tools}"
    );
    let error = refused_call(&sb, "stamp:run");
    assert!(error.contains("revoked"), "{error}");

    // The call of another skill that was in flight during the reload completes.
    let slow = in_flight.join().expect("the slow call");
    assert_eq!(slow["success"], true, "{slow}\n{}", sb.logs());
    assert_eq!(slow["data"]["slept"], SLEEP_SECONDS, "{slow}");
    assert!(
        disabled_after < Duration::from_secs(SLEEP_SECONDS),
        "the reload took {disabled_after:?}: it did not happen while the call was in flight"
    );
    // And the core still serves the others.
    assert_eq!(
        sb.call_ok("echo:echo", json!({"text": "still here"}))["echo"]["text"],
        "still here"
    );
    let (ok, report) = verify_all(&sb);
    assert!(!ok, "verify --all passes with a revoked skill: {report}");
    assert_eq!(report_of(&report, "stamp")["check"], "revocation");
}

#[test]
fn trust_folder_change_is_picked_up_without_a_signal() {
    let sb = Skillbox::start(Options::default());
    succeeded("certs init-root", &sb.cli(&["certs", "init-root"]));
    let (cert, key) = issue(&sb, "watched");
    install(&sb, &signed_package(&sb, "stamp", "1.0.0", &cert, &key));
    sb.call_ok("stamp:run", json!({}));

    succeeded(
        "certs revoke",
        &sb.cli(&[
            "certs",
            "revoke",
            path_str(&cert),
            "--reason",
            "rotated out",
        ]),
    );
    let entry = wait_disabled(&sb, "stamp");
    assert!(
        entry["reason"].as_str().unwrap().contains("revocation"),
        "{entry}"
    );
    refused_call(&sb, "stamp:run");
}

#[test]
fn file_changed_after_install_is_refused_at_load() {
    let sb = Skillbox::start(Options::default());
    succeeded("certs init-root", &sb.cli(&["certs", "init-root"]));
    let (cert, key) = issue(&sb, "acme");
    install(&sb, &signed_package(&sb, "stamp", "1.0.0", &cert, &key));
    sb.call_ok("stamp:run", json!({}));

    let script = sb.ws.join("skills/stamp/scripts/run.sh");
    let mut text = fs::read_to_string(&script).unwrap();
    text.push_str("echo tampered\n");
    fs::write(&script, text).unwrap();
    // Only the skills folder changed, not the trust folder: SIGHUP alone reloads.
    hangup(&sb);

    let entry = wait_disabled(&sb, "stamp");
    let reason = entry["reason"].as_str().unwrap();
    assert!(reason.contains("changed"), "{entry}");
    let error = refused_call(&sb, "stamp:run");
    assert!(error.contains("files changed since install"), "{error}");

    // The executor refuses it at its own load as well (its registry checks the lock).
    let r = sb.request("POST", "/v1/skills/reload", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let reload = r.json();
    assert_eq!(reload["disabled"], json!(["stamp"]), "{reload}");
    let executor_skipped = reload["executor"]["skipped"].to_string();
    assert!(
        executor_skipped.contains("files changed since install"),
        "{reload}"
    );
}

/// The call right after a write to an installed skill is refused by admission itself
/// (the stamp, named), not by the reload the write causes a little later: the watch that
/// spares admission its read of the files while nothing changes (docs/signing-runbook.md)
/// does not spare it after a change, whichever path the write took.
#[test]
fn an_installed_skill_written_between_two_calls_is_refused_by_the_next_call() {
    let sb = Skillbox::start(Options::default());
    succeeded("certs init-root", &sb.cli(&["certs", "init-root"]));
    let (cert, key) = issue(&sb, "acme");
    install(&sb, &signed_package(&sb, "stamp", "1.0.0", &cert, &key));
    for _ in 0..5 {
        sb.call_ok("stamp:run", json!({}));
    }
    // Through a hard link outside the skills folder: no watched folder is on its path.
    let script = sb.ws.join("skills/stamp/scripts/run.sh");
    let link = sb.root.path().join("outside-link");
    fs::hard_link(&script, &link).unwrap();
    let mut text = fs::read_to_string(&link).unwrap();
    text.push_str("echo tampered\n");
    fs::write(&link, text).unwrap();
    let error = refused_call(&sb, "stamp:run");
    assert!(error.contains("files changed since install"), "{error}");
    assert!(
        error.contains("\"scripts/run.sh\" changed after the skill was verified"),
        "not refused by admission's stamp: {error}"
    );
}

#[test]
fn root_rotation_end_to_end_old_and_new_root_skills_run_until_the_old_root_is_retired() {
    let sb = Skillbox::start(Options::default());
    succeeded("certs init-root", &sb.cli(&["certs", "init-root"]));
    let (old_cert, old_key) = issue(&sb, "early");
    install(
        &sb,
        &signed_package(&sb, "alpha", "1.0.0", &old_cert, &old_key),
    );
    assert_eq!(
        stdout_of(&sb.call_ok("alpha:run", json!({}))),
        "alpha 1.0.0\n"
    );

    succeeded("certs rotate-root", &sb.cli(&["certs", "rotate-root"]));
    let (new_cert, new_key) = issue(&sb, "late");
    let body = install(
        &sb,
        &pack(&signed_package(&sb, "beta", "1.0.0", &new_cert, &new_key)),
    );
    let roots: Value = serde_json::from_str(&succeeded(
        "certs list",
        &sb.cli(&["certs", "list", "--json"]),
    ))
    .unwrap();
    let state_of = |fp: &Value| {
        roots["roots"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| &r["fingerprint"] == fp)
            .map(|r| r["state"].clone())
    };
    let alpha_root = listed_root(&sb, "alpha");
    assert_ne!(body["installed"]["root_fingerprint"], alpha_root);
    assert_eq!(state_of(&alpha_root), Some(json!("retiring")), "{roots}");
    assert_eq!(
        state_of(&body["installed"]["root_fingerprint"]),
        Some(json!("current")),
        "{roots}"
    );

    // The overlap: both run, and verify --all names the skill hanging on the old root.
    assert_eq!(
        stdout_of(&sb.call_ok("alpha:run", json!({}))),
        "alpha 1.0.0\n"
    );
    assert_eq!(
        stdout_of(&sb.call_ok("beta:run", json!({}))),
        "beta 1.0.0\n"
    );
    let (ok, report) = verify_all(&sb);
    assert!(ok, "{report}");
    assert_eq!(report_of(&report, "alpha")["status"], "at_risk", "{report}");
    assert_eq!(report_of(&report, "alpha")["check"], "retiring_root");
    assert_eq!(report_of(&report, "beta")["status"], "ok", "{report}");

    // Retire the old root: alpha is disabled, beta still runs.
    let old_fp = alpha_root.as_str().unwrap().to_string();
    succeeded(
        "certs retire-root",
        &sb.cli(&["certs", "retire-root", &old_fp]),
    );
    let r = sb.request("POST", "/v1/trust/reload", None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["disabled"], json!(["alpha"]), "{}", r.body);
    let entry = listed(&sb, "alpha").expect("alpha listed as disabled");
    assert_eq!(entry["available"], false, "{entry}");
    assert!(
        entry["reason"].as_str().unwrap().contains("retired_root"),
        "{entry}"
    );
    let error = refused_call(&sb, "alpha:run");
    assert!(error.contains("retired"), "{error}");
    assert_eq!(
        stdout_of(&sb.call_ok("beta:run", json!({}))),
        "beta 1.0.0\n"
    );
    let (ok, report) = verify_all(&sb);
    assert!(!ok, "verify --all passes with a skill on a retired root");
    assert_eq!(report_of(&report, "alpha")["status"], "failed", "{report}");
    assert_eq!(report_of(&report, "alpha")["check"], "retired_root");
    assert_eq!(report_of(&report, "beta")["status"], "ok", "{report}");
}

/// The root fingerprint the install lock recorded for `name`.
fn listed_root(sb: &Skillbox, name: &str) -> Value {
    let lock: Value = serde_json::from_str(
        &fs::read_to_string(sb.ws.join("skills/.skillbox-lock.json")).expect("install lock"),
    )
    .expect("lock JSON");
    lock[name]["root_fingerprint"].clone()
}

#[test]
fn delete_removes_an_installed_skill_and_refuses_unknown_and_unmanaged_names() {
    let sb = Skillbox::start(Options::default());
    succeeded("certs init-root", &sb.cli(&["certs", "init-root"]));
    let (cert, key) = issue(&sb, "acme");
    install(&sb, &signed_package(&sb, "stamp", "1.0.0", &cert, &key));
    sb.call_ok("stamp:run", json!({}));

    let r = sb.request("DELETE", "/v1/skills/stamp", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let body = r.json();
    assert_eq!(body["removed"]["name"], "stamp", "{body}");
    assert_eq!(body["reload"], "ok", "{body}");
    assert!(!sb.ws.join("skills/stamp").exists());
    assert!(listed_root(&sb, "stamp").is_null(), "lock entry left");
    assert!(listed(&sb, "stamp").is_none());
    let r = sb.call("stamp:run", json!({}));
    assert_eq!(r["error_kind"], "not_found", "{r}");

    for (name, status, check) in [
        ("stamp", 404, "not_installed"),
        ("nobody", 404, "not_installed"),
        ("..", 404, "not_installed"),
        // Put in place by hand, not by `skill install`: the operator's to delete.
        ("echo", 403, "unmanaged"),
    ] {
        let r = sb.request("DELETE", &format!("/v1/skills/{name}"), None);
        assert_eq!(r.status, status, "{name}: {}", r.body);
        assert_eq!(r.json()["check"], check, "{name}: {}", r.body);
    }
    assert!(sb.ws.join("skills/echo").is_dir());
    sb.call_ok("echo:echo", json!({"text": "kept"}));
}
