//! The canonical digest: what it covers and what it refuses.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;

use skillbox_certs::digest::{canonical_listing, DIGEST_VERSION_LINE};
use skillbox_certs::{package_digest, DigestError, SIGNATURE_FILE};

use super::common::make_package;

#[test]
fn digest_lists_files_sorted_by_path_bytes_with_mode_and_hash() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::create_dir(dir.join("a")).unwrap();
    fs::write(dir.join("b"), "b").unwrap();
    fs::write(dir.join("a/z"), "z").unwrap();
    fs::write(dir.join("A"), "A").unwrap();
    fs::write(dir.join("a-"), "-").unwrap();
    for f in ["b", "a/z", "A", "a-"] {
        fs::set_permissions(dir.join(f), fs::Permissions::from_mode(0o640)).unwrap();
    }
    let d = package_digest(dir).unwrap();
    let paths: Vec<&str> = d.files.iter().map(|f| f.path.as_str()).collect();
    // Byte order: 'A' (0x41) < 'a' (0x61); "a-" (0x2d) < "a/" (0x2f).
    assert_eq!(paths, ["A", "a-", "a/z", "b"]);
    assert!(d.files.iter().all(|f| f.mode == 0o640));
    let listing = canonical_listing(&d.files);
    assert!(listing.starts_with(&format!("{DIGEST_VERSION_LINE}\n640 ")));
    let sha_b = ring::digest::digest(&ring::digest::SHA256, b"b");
    let hex_b: String = sha_b.as_ref().iter().map(|x| format!("{x:02x}")).collect();
    assert!(listing.ends_with(&format!("640 {hex_b} b\n")));
    let expected = ring::digest::digest(&ring::digest::SHA256, listing.as_bytes());
    let expected: String = expected
        .as_ref()
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect();
    assert_eq!(d.hex, expected);
    assert_eq!(d.prefixed(), format!("sha256:{expected}"));
}

#[test]
fn digest_excludes_top_level_signature_only() {
    let tmp = tempfile::tempdir().unwrap();
    make_package(tmp.path());
    let before = package_digest(tmp.path()).unwrap();
    fs::write(tmp.path().join(SIGNATURE_FILE), "{}").unwrap();
    assert_eq!(package_digest(tmp.path()).unwrap(), before);
    fs::write(tmp.path().join("lib").join(SIGNATURE_FILE), "{}").unwrap();
    let after = package_digest(tmp.path()).unwrap();
    assert_ne!(after.hex, before.hex);
    assert!(after.files.iter().any(|f| f.path == "lib/SIGNATURE"));
}

#[test]
fn digest_ignores_empty_folders_but_not_modes() {
    let tmp = tempfile::tempdir().unwrap();
    make_package(tmp.path());
    let before = package_digest(tmp.path()).unwrap();
    fs::create_dir(tmp.path().join("empty")).unwrap();
    assert_eq!(package_digest(tmp.path()).unwrap().hex, before.hex);
    fs::set_permissions(
        tmp.path().join("run.sh"),
        fs::Permissions::from_mode(0o4755),
    )
    .unwrap();
    let after = package_digest(tmp.path()).unwrap();
    assert_ne!(after.hex, before.hex);
    let run = after.files.iter().find(|f| f.path == "run.sh").unwrap();
    assert_eq!(run.mode, 0o4755);
}

#[test]
fn digest_rejects_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    make_package(tmp.path());
    std::os::unix::fs::symlink("/etc/passwd", tmp.path().join("lib/passwd")).unwrap();
    let err = package_digest(tmp.path()).unwrap_err();
    assert!(
        matches!(&err, DigestError::Symlink { path } if path == "lib/passwd"),
        "{err}"
    );
    assert!(err
        .to_string()
        .starts_with("digest: lib/passwd is a symbolic link"));
}

#[test]
fn digest_rejects_fifo_and_socket() {
    let tmp = tempfile::tempdir().unwrap();
    make_package(tmp.path());
    let sock = tmp.path().join("s.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let err = package_digest(tmp.path()).unwrap_err();
    assert!(
        matches!(&err, DigestError::SpecialFile { kind: "socket", .. }),
        "{err}"
    );
    fs::remove_file(&sock).unwrap();

    let status = std::process::Command::new("mkfifo")
        .arg(tmp.path().join("fifo"))
        .status();
    match status {
        Ok(s) if s.success() => {
            let err = package_digest(tmp.path()).unwrap_err();
            assert!(
                matches!(&err, DigestError::SpecialFile { kind: "FIFO", .. }),
                "{err}"
            );
        }
        _ => eprintln!("SKIPPED digest_rejects_fifo: mkfifo is not available"),
    }
}

#[test]
fn digest_rejects_non_utf8_newline_and_backslash_names() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = OsStr::from_bytes(b"bad\xff");
    fs::write(tmp.path().join(bad), "x").unwrap();
    let err = package_digest(tmp.path()).unwrap_err();
    assert!(matches!(err, DigestError::NonUtf8Name { .. }), "{err}");

    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("two\nlines"), "x").unwrap();
    let err = package_digest(tmp.path()).unwrap_err();
    assert!(
        matches!(
            err,
            DigestError::ForbiddenName {
                what: "a newline",
                ..
            }
        ),
        "{err}"
    );

    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("back\\slash"), "x").unwrap();
    let err = package_digest(tmp.path()).unwrap_err();
    assert!(
        matches!(
            err,
            DigestError::ForbiddenName {
                what: "a backslash",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn digest_rejects_signature_folder_at_top_level() {
    let tmp = tempfile::tempdir().unwrap();
    make_package(tmp.path());
    fs::create_dir(tmp.path().join(SIGNATURE_FILE)).unwrap();
    fs::write(tmp.path().join(SIGNATURE_FILE).join("hidden.sh"), "x").unwrap();
    let err = package_digest(tmp.path()).unwrap_err();
    assert!(matches!(err, DigestError::SignatureNotAFile), "{err}");
}

#[test]
fn digest_rejects_a_file_instead_of_a_folder() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("f"), "x").unwrap();
    let err = package_digest(&tmp.path().join("f")).unwrap_err();
    assert!(matches!(err, DigestError::NotADirectory { .. }), "{err}");
}
