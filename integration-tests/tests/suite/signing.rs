//! Attacks on signed install end to end, through the real `skillbox` CLI and gateway: a
//! revoked developer or intermediate certificate re-encoded (ECDSA s → n − s, same
//! certificate, other bytes) to dodge revocation by fingerprint; another trusted publisher
//! replacing an installed skill with a higher version; an executor whose copy of a signed
//! skill was changed after install.

use std::path::Path;

use serde_json::{json, Value};

use super::install::{install, issue, path_str, report_of, signed_package, succeeded, verify_all};
use crate::harness::{binary, free_port, poll, Options, Skillbox, POLL_TIMEOUT};

#[path = "../../../certs/tests/suite/reencode.rs"]
mod reencode;

use reencode::{pem_to_ders, reencode_signature_chain, sha256_hex};

/// `POST /v1/skills/install` that must be refused at `check`; the refusal body.
fn refused_install(sb: &Skillbox, body: &Value, check: &str) -> Value {
    let r = sb.request("POST", "/v1/skills/install", Some(body));
    assert_eq!(r.status, 403, "{}", r.body);
    let refusal = r.json();
    assert_eq!(refusal["check"], check, "{refusal}");
    assert_eq!(refusal["error_kind"], "permission_denied", "{refusal}");
    refusal
}

fn fingerprint_of(pem_file: &Path) -> String {
    let pem = std::fs::read_to_string(pem_file).expect("read PEM");
    sha256_hex(&pem_to_ders(&pem)[0])
}

#[test]
fn reencoded_copy_of_revoked_developer_or_intermediate_certificate_is_refused() {
    let sb = Skillbox::start(Options::default());
    succeeded("certs init-root", &sb.cli(&["certs", "init-root"]));
    let (cert, key) = issue(&sb, "leaky");

    // Installed before the revocation, with the re-encoded certificate in its SIGNATURE:
    // the copy is a valid certificate, so the install is accepted.
    let stamp = signed_package(&sb, "stamp", "1.0.0", &cert, &key);
    let copy = reencode_signature_chain(&stamp.join("SIGNATURE"), 0);
    let body = install(&sb, &stamp);
    assert_eq!(
        body["installed"]["leaf_fingerprint"],
        sha256_hex(&copy),
        "{body}"
    );
    assert_ne!(sha256_hex(&copy), fingerprint_of(&cert));
    let (ok, report) = verify_all(&sb);
    assert!(ok, "{report}");

    succeeded(
        "certs revoke",
        &sb.cli(&["certs", "revoke", path_str(&cert), "--reason", "key leaked"]),
    );
    // verify --all no longer calls it ok.
    let (ok, report) = verify_all(&sb);
    assert!(
        !ok,
        "verify --all passes a skill signed with a revoked certificate: {report}"
    );
    let stamp_report = report_of(&report, "stamp");
    assert_eq!(stamp_report["status"], "failed", "{report}");
    assert_eq!(stamp_report["check"], "revocation", "{report}");
    assert!(
        stamp_report["reason"]
            .as_str()
            .unwrap()
            .contains("key leaked"),
        "{report}"
    );

    // A new package whose SIGNATURE carries the re-encoded revoked certificate.
    let fresh = signed_package(&sb, "fresh", "1.0.0", &cert, &key);
    reencode_signature_chain(&fresh.join("SIGNATURE"), 0);
    let refusal = refused_install(&sb, &json!({"source": fresh}), "revocation");
    let error = refusal["error"].as_str().unwrap();
    assert!(error.contains("key leaked"), "{error}");
    assert!(error.contains("issuer and serial number"), "{error}");
    assert!(!sb.ws.join("skills/fresh").exists());

    // The same with a revoked intermediate, re-encoded in the chain.
    succeeded(
        "certs issue-intermediate",
        &sb.cli(&["certs", "issue-intermediate"]),
    );
    let (cert, key) = issue(&sb, "viaint");
    let inter = signed_package(&sb, "inter", "1.0.0", &cert, &key);
    let inter_copy = reencode_signature_chain(&inter.join("SIGNATURE"), 1);
    let intermediate = sb.state().join("ca/intermediate.pem");
    assert_ne!(sha256_hex(&inter_copy), fingerprint_of(&intermediate));
    succeeded(
        "certs revoke",
        &sb.cli(&[
            "certs",
            "revoke",
            path_str(&intermediate),
            "--reason",
            "intermediate compromised",
        ]),
    );
    let refusal = refused_install(&sb, &json!({"source": inter}), "revocation");
    let error = refusal["error"].as_str().unwrap();
    assert!(error.contains("intermediate compromised"), "{error}");
    assert!(!sb.ws.join("skills/inter").exists());
}

#[test]
fn another_trusted_publishers_higher_version_is_refused_unless_the_operator_allows_it() {
    let sb = Skillbox::start(Options::default());
    succeeded("certs init-root", &sb.cli(&["certs", "init-root"]));
    let (acme, acme_key) = issue(&sb, "acme");
    let (mallory, mallory_key) = issue(&sb, "mallory");
    install(
        &sb,
        &signed_package(&sb, "wallet", "1.0.0", &acme, &acme_key),
    );

    // Gateway: refused, naming both publishers and the override.
    let hijack = signed_package(&sb, "wallet", "9.0.0", &mallory, &mallory_key);
    let refusal = refused_install(&sb, &json!({"source": hijack}), "publisher");
    let error = refusal["error"].as_str().unwrap();
    for needle in [
        "\"acme\"",
        "\"mallory\"",
        "allow_publisher_change",
        "--allow-publisher-change",
    ] {
        assert!(error.contains(needle), "{needle} not in {error}");
    }
    // CLI: the same refusal.
    let out = sb.cli(&["skill", "install", path_str(&hijack), "--json"]);
    assert!(!out.status.success());
    let cli: Value = serde_json::from_slice(&out.stdout).expect("install --json");
    assert_eq!(cli["check"], "publisher", "{cli}");
    let data = sb.call_ok("wallet:run", json!({}));
    assert_eq!(
        data["stdout"], "wallet 1.0.0\n",
        "the hijack replaced the skill"
    );

    // The same publisher's upgrade goes through.
    install(
        &sb,
        &signed_package(&sb, "wallet", "1.1.0", &acme, &acme_key),
    );
    assert_eq!(
        sb.call_ok("wallet:run", json!({}))["stdout"],
        "wallet 1.1.0\n"
    );

    // The operator hands the skill over explicitly.
    let r = sb.request(
        "POST",
        "/v1/skills/install",
        Some(&json!({"source": hijack, "allow_publisher_change": true})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["installed"]["publisher"], "mallory", "{}", r.body);
    assert_eq!(
        sb.call_ok("wallet:run", json!({}))["stdout"],
        "wallet 9.0.0\n"
    );
}

/// Kills the executor started by a test when dropped.
struct OwnExecutor(std::process::Child);

impl Drop for OwnExecutor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn executor_refuses_skill_changed_after_install_with_the_reason_through_the_core() {
    // The core (`serve`) sees the skill as installed; the executor, on its own skills
    // folder (another host's mount, say), has a copy with a file changed after install.
    let port = free_port();
    let mut sb = Skillbox::spawn(Options {
        executor_url: Some(format!("https://127.0.0.1:{port}")),
        fixed_callback_port: true,
        ..Options::default()
    });
    succeeded("certs init-root", &sb.cli(&["certs", "init-root"]));
    let (cert, key) = issue(&sb, "acme");
    let stamp = signed_package(&sb, "stamp", "1.0.0", &cert, &key);
    succeeded(
        "skill install",
        &sb.cli(&["skill", "install", path_str(&stamp)]),
    );
    let copy = sb.root.path().join("executor-skills");
    let cp = std::process::Command::new("cp")
        .arg("-a")
        .arg(sb.ws.join("skills"))
        .arg(&copy)
        .status()
        .expect("cp");
    assert!(cp.success());
    let script = copy.join("stamp/scripts/run.sh");
    let mut text = std::fs::read_to_string(&script).unwrap();
    text.push_str("echo tampered\n");
    std::fs::write(&script, text).unwrap();

    let pki = sb.pki();
    poll("the core's channel PKI", POLL_TIMEOUT, || {
        pki.join("ca.pem").exists().then_some(())
    });
    let _executor = OwnExecutor(
        std::process::Command::new(binary("skillbox-executor"))
            .arg("serve")
            .arg("--skills")
            .arg(&copy)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .arg("--pki")
            .arg(&pki)
            .arg("--core-url")
            .arg(format!("https://{}", sb.callback_addr.clone().unwrap()))
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start skillbox-executor"),
    );
    sb.wait_ready();
    let r = sb.request("POST", "/v1/skills/reload", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let listed = sb.request("GET", "/v1/skills/stamp", None);
    // The core's copy is intact: it offers the skill and dispatches the call.
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(listed.json()["available"], true, "{}", listed.body);
    let r = sb.call("stamp:run", json!({}));
    assert_eq!(r["success"], false, "the changed copy ran: {r}");
    assert_eq!(r["error_kind"], "permission_denied", "{r}");
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains("no longer match the signed digest it was installed with"),
        "{error}"
    );
    assert!(
        error.contains("reinstall it from its signed package"),
        "{error}"
    );
    // The skills the executor's copy did not change still run.
    sb.call_ok("echo:echo", json!({"text": "fine"}));
}
