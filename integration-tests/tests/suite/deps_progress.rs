//! A dependency build's progress while it runs, under `skillbox up`: `GET
//! /v1/skills/{name}` answers `dependencies.progress` (bytes so far, connections ended,
//! index pages read and package files asked for, files from the cache, seconds) during the build and nothing once it ended; `skill deps`
//! and `skill add --wait` draw it on their progress line.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};

use super::deps::{build, start_index, use_index, write_show_skill, Index};
use crate::harness::{Options, Skillbox};

/// An index sending a 4 MiB wheel at 1 MB/s: a build of a few seconds.
fn slow_index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        start_index(
            &json!([{"name": "skbslow", "version": "1.0", "pad_mb": 4}]),
            Some(1_000_000),
        )
    })
}

fn prepare(ws: &Path) {
    write_show_skill(&ws.join("skills/slow"), "slow", "skbslow==1.0\n", "skbslow");
    use_index(ws, slow_index().port);
}

#[test]
fn a_build_in_progress_says_how_much_it_has_downloaded() {
    let sb = Skillbox::start(Options {
        prepare: Some(prepare),
        ..Options::default()
    });
    let progress = || -> Value {
        sb.request("GET", "/v1/skills/slow", None).json()["dependencies"]["progress"].clone()
    };
    std::thread::scope(|s| {
        let building = s.spawn(|| build(&sb, "slow"));
        let seen = crate::harness::poll(
            "a progress with bytes while the build runs",
            Duration::from_secs(60),
            || {
                let p = progress();
                (p["bytes"].as_u64().unwrap_or(0) > 1_000_000).then_some(p)
            },
        );
        assert!(seen["connections"].is_u64(), "{seen}");
        assert!(seen["from_cache"].is_u64(), "{seen}");
        assert!(seen["elapsed_s"].is_u64(), "{seen}");
        // The proxy reads a build's requests (the download cache is on by default): the
        // index's page of the package was read and its wheel is on its way.
        assert!(seen["pages"].as_u64() >= Some(1), "{seen}");
        assert!(seen["files"].as_u64() >= Some(1), "{seen}");
        let built = building.join().unwrap();
        assert_eq!(built["ok"], true, "{built}\n{}", sb.logs());
    });
    assert_eq!(progress(), Value::Null, "no progress once the build ended");
}
