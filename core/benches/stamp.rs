//! What admission's check of an installed skill costs per call (`skills/stamp.rs`:
//! `FolderStamp::read`, one `lstat` per entry and a `readdir` per folder, on the call's
//! async thread), for skill folders of several sizes, against one `lstat` of the folder
//! alone measured in the same run (the least any check of the files could do), and what
//! admission pays with the inotify watch (`skills/stamp_watch.rs`) when nothing changed:
//! a drained queue (the median leaves out the read it still makes once a second).
//!
//! The folders are shaped like published skills: `SKILL.md`, `scripts/`, `references/`
//! and a `schemas/` tree holding the rest (Anthropic's document skills carry about a
//! hundred schema files). Prints a Markdown table and writes it to
//! `target/stamp-bench.md`. Times are reported, never asserted. Run: `cargo bench -p
//! skillbox-core --bench stamp` (`STAMP_N` checks per size, default 2,000).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Instant;

use skillbox_core::skills::stamp::FolderStamp;
use skillbox_core::skills::stamp_watch::StampWatch;

/// Writes a skill folder of about `entries` files and folders under `dir`.
fn skill_folder(dir: &Path, entries: usize) {
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::create_dir_all(dir.join("references")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: s\ndescription: d\n---\nbody\n",
    )
    .unwrap();
    std::fs::write(dir.join("scripts/run.py"), "print(1)\n").unwrap();
    std::fs::write(dir.join("references/guide.md"), "# guide\n").unwrap();
    let rest = entries.saturating_sub(6);
    for i in 0..rest {
        let folder = dir.join(format!("schemas/part{}", i / 25));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join(format!("s{i}.xsd")), "<xsd/>\n").unwrap();
    }
}

/// The median of `values`.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The median of `n` timings of `f`, in µs.
fn median_us(n: usize, mut f: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let n: usize = std::env::var("STAMP_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let root = tempfile::tempdir().unwrap();
    let mut report = format!(
        "# Admission's check of an installed skill\n\n{n} checks per size, medians; the baseline is one `lstat` of the folder.\n\n\
         | entries | stamp read, µs | watched, no change, µs (and one read a second) | one `lstat`, µs | read / `lstat` | watched / `lstat` |\n|---|---|---|---|---|---|\n"
    );
    for entries in [10, 60, 150, 1_000] {
        let dir = root.path().join(format!("skill-{entries}"));
        skill_folder(&dir, entries);
        let watch = StampWatch::new();
        watch.watch("s", &dir);
        let stamped = FolderStamp::read(&dir).unwrap();
        // Interleaved: the stamp, the watched check, then the baseline, each `n` times in
        // alternation.
        let (mut stamp, mut watched, mut stat) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..10 {
            stamp.push(median_us(n / 10, || {
                assert_eq!(FolderStamp::read(&dir).unwrap(), stamped);
            }));
            // What admission does (InstalledStamps::check): the read only when the watch
            // cannot vouch for the folder.
            watched.push(median_us(n / 10, || {
                if !watch.unchanged("s") {
                    let began = Instant::now();
                    assert_eq!(FolderStamp::read(&dir).unwrap(), stamped);
                    watch.verified("s", began);
                }
            }));
            stat.push(median_us(n / 10, || {
                std::fs::symlink_metadata(&dir).unwrap();
            }));
        }
        assert_eq!(watch.watched(), 1, "the bench's folder is not watched");
        let (a, w, b) = (median(stamp), median(watched), median(stat));
        let counted = entries_in(&dir);
        report.push_str(&format!(
            "| {counted} | {a:.1} | {w:.2} | {b:.2} | {:.0}× | {:.1}× |\n",
            a / b,
            w / b
        ));
    }
    print!("{report}");
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/stamp-bench.md");
    let _ = std::fs::write(out, &report);
}

/// How many entries a folder holds, itself included (what the stamp lists).
fn entries_in(dir: &Path) -> usize {
    let mut n = 1;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        n += match e.file_type().unwrap().is_dir() {
            true => entries_in(&e.path()),
            false => 1,
        };
    }
    n
}
