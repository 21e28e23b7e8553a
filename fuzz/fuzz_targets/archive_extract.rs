//! `.tar.gz` package extraction (`install::archive::extract_from`) of arbitrary bytes:
//! never panics, and whether it accepts or refuses the input, everything written stays
//! inside the destination folder and is a regular file without setuid, setgid or sticky
//! bits, or a folder (no symlink, hardlink, device or FIFO ever lands).
//!
//! The first byte picks the layer to reach: odd, the rest is gzipped here so the tar reader
//! sees the fuzzer's bytes; even, the rest is taken as the compressed stream itself.
#![no_main]

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use flate2::write::GzEncoder;
use flate2::Compression;
use libfuzzer_sys::fuzz_target;
use skillbox_core::skills::install::archive::extract_from;
use skillbox_core::skills::install::Limits;

/// Small caps so one input stays fast; the rules are the same as the defaults'.
const LIMITS: Limits = Limits {
    max_entries: 64,
    max_entry_bytes: 256 * 1024,
    max_total_bytes: 1024 * 1024,
    max_ratio: 100,
    ratio_grace_bytes: 64 * 1024,
};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let stream = if mode & 1 == 1 {
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        if gz.write_all(rest).is_err() {
            return;
        }
        match gz.finish() {
            Ok(bytes) => bytes,
            Err(_) => return,
        }
    } else {
        rest.to_vec()
    };
    let Ok(tmp) = tempfile::tempdir() else {
        return;
    };
    let dest = tmp.path().join("package");
    if std::fs::create_dir(&dest).is_err() {
        return;
    }
    let _ = extract_from(stream.as_slice(), &dest, LIMITS);

    let outside: Vec<_> = std::fs::read_dir(tmp.path())
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert_eq!(
        outside,
        ["package"],
        "extraction wrote outside the destination"
    );
    check_tree(&dest, 0);
});

/// Every entry under `dir` is a folder or a regular file with no special mode bits.
fn check_tree(dir: &Path, depth: usize) {
    assert!(depth <= 64, "folders nest deeper than the extractor allows");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let kind = meta.file_type();
        assert!(
            kind.is_dir() || kind.is_file(),
            "{} is neither a file nor a folder",
            path.display()
        );
        assert_eq!(
            meta.permissions().mode() & 0o7000,
            0,
            "{} carries setuid/setgid/sticky bits",
            path.display()
        );
        if kind.is_file() {
            assert_eq!(meta.nlink(), 1, "{} is a hardlink", path.display());
            assert!(
                meta.len() <= LIMITS.max_entry_bytes,
                "{} is over the cap",
                path.display()
            );
        } else {
            check_tree(&path, depth + 1);
        }
    }
}
