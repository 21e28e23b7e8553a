//! The `skillbox certs` / `skillbox skill pack|install|verify` commands end to end through
//! the real binary: set up a root, issue, sign, pack, install, verify, rotate, retire.

use std::path::Path;
use std::process::Command;

use crate::skill_folder::write_skill;

fn skillbox(ws: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_skillbox"))
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn plain(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_skillbox"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_sign_pack_install_verify_rotate_retire() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::write(ws.join("skillbox.toml"), "[trust]\nrequire_signed = true\n").unwrap();

    let (code, out, err) = skillbox(ws, &["certs", "init-root", "--days", "30"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("PRIVATE KEY"), "key material printed: {out}");
    use std::os::unix::fs::PermissionsExt;
    let ca_mode = std::fs::metadata(ws.join(".skillbox/ca"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(ca_mode & 0o777, 0o700);

    let (code, out, err) = skillbox(
        ws,
        &["certs", "issue", "--publisher", "acme", "--days", "10"],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("PRIVATE KEY"), "key material printed: {out}");
    let cert = ws.join(".skillbox/ca/developers/acme.pem");
    let key = ws.join(".skillbox/ca/developers/acme.key");
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let src = dir.path().join("src/hello");
    write_skill(&src, "hello", "1.0.0", "");
    let (code, out, err) = plain(&[
        "certs",
        "sign",
        src.to_str().unwrap(),
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(src.join("SIGNATURE").is_file());

    let tgz = dir.path().join("hello.tar.gz");
    let (code, out, err) = plain(&[
        "skill",
        "pack",
        src.to_str().unwrap(),
        "--out",
        tgz.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");

    let (code, out, err) = skillbox(ws, &["skill", "install", tgz.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["skill"]["trust"], "signed");
    assert_eq!(v["skill"]["publisher"], "acme");

    // An unsigned folder is refused (require_signed), with the check named.
    let unsigned = dir.path().join("src/bare");
    write_skill(&unsigned, "bare", "1.0.0", "");
    let (code, out, _) = skillbox(
        ws,
        &["skill", "install", unsigned.to_str().unwrap(), "--json"],
    );
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["check"], "unsigned");

    let (code, out, err) = skillbox(ws, &["skill", "verify", "--all", "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["skills"][0]["status"], "ok");

    let (code, out, err) = skillbox(ws, &["certs", "rotate-root", "--days", "30"]);
    assert_eq!(code, 0, "{out}{err}");
    let (_, out, _) = skillbox(ws, &["skill", "verify", "--all", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["skills"][0]["status"], "at_risk", "{out}");

    let (code, out, err) = skillbox(ws, &["certs", "list", "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let old = v["roots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["state"] == "retiring")
        .expect("the old root is retiring")["fingerprint"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, out, err) = skillbox(ws, &["certs", "retire-root", &old]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = skillbox(ws, &["skill", "verify", "--all"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("retired_root"), "{out}");
}
