//! The dependency builds' download cache in the core's egress proxy, under `skillbox up`,
//! against an index of its own on 127.0.0.1 (`harness/pyindex.py`, which counts the GETs
//! of each file), named `index.test` by `[egress] resolve`:
//!
//! - two skills needing the same wheel (beside another package: skills of the very same
//!   requirements share one environment, built once): the second build asks the index
//!   nothing for it, its record says the file came from the cache, and both skills import
//!   it;
//! - no false hit: a file never downloaded is fetched; a kept file altered on disk is
//!   found out by its SHA-256, never served, and fetched again;
//! - PyPI's shape over HTTPS: an index speaking TLS with a certificate of a CA the
//!   operator trusts (`[egress] extra_roots`), its files on a second host (`[deps]
//!   file_hosts`): the proxy ends the build's TLS with the workspace's egress CA, which
//!   the build trusts, so the second skill's wheel still comes from the cache;
//! - a wheel of 70 MiB, past a tool's 64 MiB file limit, builds under the build's own.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::{json, Value};

use super::deps::{build, script, start_index, start_tls_index, write_show_skill, Index};
use crate::harness::{Options, Skillbox};

/// The configuration of a workspace building from the index on `port`.
fn use_index(ws: &Path, port: u16, skills: &[(&str, &str)]) {
    for (name, requirement) in skills {
        let module = requirement.split("==").next().unwrap();
        let dir = ws.join("skills").join(name);
        write_show_skill(&dir, name, &format!("{requirement}\n"), module);
    }
    super::deps::use_index(ws, port);
}

fn wheel(name: &str) -> String {
    format!("/files/{name}-1.0-py3-none-any.whl")
}

/// The files the cache keeps, by name (their SHA-256).
fn kept(sb: &Skillbox) -> Vec<PathBuf> {
    let dir = sb.state().join("deps-cache/sha256");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    files.sort();
    files
}

/// Waits (up to 10 s) until the cache keeps `n` files: a download is committed just after
/// its last byte reached the build.
fn wait_kept(sb: &Skillbox, n: usize) {
    crate::harness::poll(
        "the download kept",
        std::time::Duration::from_secs(10),
        || (kept(sb).len() == n).then_some(()),
    );
}

fn shared_index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        start_index(
            &json!([
                {"name": "skbshared", "version": "1.0", "pad_mb": 1},
                {"name": "skbextra", "version": "1.0"},
            ]),
            None,
        )
    })
}

fn prepare_shared(ws: &Path) {
    let skills = [
        ("share-one", "skbshared==1.0"),
        ("share-two", "skbshared==1.0\nskbextra==1.0"),
    ];
    use_index(ws, shared_index().port, &skills);
}

#[test]
fn two_skills_needing_the_same_wheel_download_it_once() {
    let sb = Skillbox::start(Options {
        prepare: Some(prepare_shared),
        ..Options::default()
    });
    let index = shared_index();
    let first = build(&sb, "share-one");
    assert_eq!(first["ok"], true, "{first}\n{}", sb.logs());
    assert_eq!(index.counts()[wheel("skbshared")], 1, "{}", index.counts());
    assert_eq!(first["from_cache"], Value::Null, "{first}");
    wait_kept(&sb, 1);

    // The second build through `skill deps`, which says which file came from the cache.
    let out = sb.cli(&["skill", "deps", "share-two"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}\n{}", sb.logs());
    let line = |name: &str| {
        (said.lines())
            .find(|l| l.contains(&format!("{name}==1.0")))
            .unwrap_or_default()
    };
    assert!(line("skbshared").ends_with("(from the cache)"), "{said}");
    assert!(!line("skbextra").contains("cache"), "{said}");
    assert_eq!(
        index.counts()[wheel("skbshared")],
        1,
        "the second build asked the index for the wheel again: {}",
        index.counts()
    );
    assert_eq!(index.counts()[wheel("skbextra")], 1, "{}", index.counts());
    // The build's record names the file served from the cache, and only it.
    let record: Value =
        serde_json::from_slice(&std::fs::read(sb.state().join("deps/share-two.json")).unwrap())
            .unwrap();
    let url = |name: &str| {
        (record["packages"].as_array().unwrap().iter())
            .find(|p| p["name"] == name)
            .map(|p| p["url"].clone())
            .unwrap()
    };
    assert_eq!(record["from_cache"], json!([url("skbshared")]), "{record}");
    for skill in ["share-one", "share-two"] {
        let r = script(&sb, skill);
        assert_eq!(
            r["data"]["stdout"].as_str().map(str::trim),
            Some("1.0"),
            "{skill}: {r}"
        );
    }
    assert_eq!(kept(&sb).len(), 2, "each file kept once, by its content");
}

fn refetch_index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        start_index(
            &json!([
                {"name": "skbone", "version": "1.0"},
                {"name": "skbtwo", "version": "1.0"},
            ]),
            None,
        )
    })
}

fn prepare_refetch(ws: &Path) {
    let skills = [
        ("one-a", "skbone==1.0"),
        ("two-a", "skbtwo==1.0"),
        ("one-b", "skbone==1.0\nskbtwo==1.0"),
    ];
    use_index(ws, refetch_index().port, &skills);
}

#[test]
fn a_new_url_is_fetched_and_a_kept_file_altered_on_disk_is_fetched_again() {
    let sb = Skillbox::start(Options {
        prepare: Some(prepare_refetch),
        ..Options::default()
    });
    let index = refetch_index();
    assert_eq!(build(&sb, "one-a")["ok"], true, "{}", sb.logs());
    assert_eq!(index.counts()[wheel("skbone")], 1, "{}", index.counts());
    wait_kept(&sb, 1);

    // A file never downloaded: fetched from the index, nothing from the cache.
    let two = build(&sb, "two-a");
    assert_eq!(two["ok"], true, "{two}");
    assert_eq!(index.counts()[wheel("skbtwo")], 1, "{}", index.counts());
    assert_eq!(two["from_cache"], Value::Null, "no false hit: {two}");
    wait_kept(&sb, 2);

    // Every kept file altered on disk, its size kept: found out by its SHA-256.
    for path in kept(&sb) {
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.reverse();
        std::fs::write(&path, bytes).unwrap();
    }
    let again = build(&sb, "one-b");
    assert_eq!(again["ok"], true, "{again}\n{}", sb.logs());
    for name in ["skbone", "skbtwo"] {
        assert_eq!(
            index.counts()[wheel(name)],
            2,
            "an altered file must be fetched again, not served: {}",
            index.counts()
        );
    }
    assert_eq!(again["from_cache"], Value::Null, "{again}");
    let r = script(&sb, "one-b");
    assert_eq!(
        r["data"]["stdout"].as_str().map(str::trim),
        Some("1.0"),
        "{r}"
    );
    // Kept again, under the SHA-256 the index published.
    for package in again["packages"].as_array().unwrap() {
        let sha = package["sha256"].as_str().unwrap().to_string();
        crate::harness::poll(
            "the file kept again",
            std::time::Duration::from_secs(10),
            || (kept(&sb).iter().any(|p| p.ends_with(&sha))).then_some(()),
        );
    }
}

/// The HTTPS index (pages on `index.test`, files on `files.split.test`), the PEM of the
/// CA that issued its certificate, and the folder of its certificate and key.
struct TlsIndex {
    index: Index,
    ca_pem: String,
    _files: tempfile::TempDir,
}

fn tls_index() -> &'static TlsIndex {
    static INDEX: OnceLock<TlsIndex> = OnceLock::new();
    INDEX.get_or_init(|| {
        let issued = crate::harness::tls_server::issue(&["index.test", "files.split.test"]);
        let files = tempfile::tempdir().unwrap();
        let (cert, key) = (files.path().join("cert.pem"), files.path().join("key.pem"));
        std::fs::write(&cert, issued.cert.pem()).unwrap();
        std::fs::write(&key, issued.key.serialize_pem()).unwrap();
        let index = start_tls_index(
            &json!([
                {"name": "skbtls", "version": "1.0", "kind": "split", "pad_mb": 1},
                {"name": "skbtlsextra", "version": "1.0", "kind": "split"},
            ]),
            (&cert, &key),
        );
        TlsIndex {
            index,
            ca_pem: issued.ca_pem,
            _files: files,
        }
    })
}

/// Two skills sharing `skbtls`, building from the HTTPS index, its CA trusted by the
/// operator.
fn prepare_tls(ws: &Path) {
    let TlsIndex { index, ca_pem, .. } = tls_index();
    let port = index.port;
    for (name, requirements) in [
        ("tls-one", "skbtls==1.0\n"),
        ("tls-two", "skbtls==1.0\nskbtlsextra==1.0\n"),
    ] {
        write_show_skill(&ws.join("skills").join(name), name, requirements, "skbtls");
    }
    std::fs::write(ws.join("index-test-ca.pem"), ca_pem).unwrap();
    let mut toml = std::fs::read_to_string(ws.join("skillbox.toml")).unwrap();
    toml = toml.replacen(
        "allow_private = [",
        &format!("allow_private = [\"index.test:{port}\", \"files.split.test:{port}\", "),
        1,
    );
    toml.push_str(&format!(
        "\n[deps]\nindex_url = \"https://index.test:{port}/simple\"\nbuild_on_load = false\n\
         file_hosts = [\"https://files.split.test:{port}\"]\n\n\
         [egress]\nresolve = {{ \"index.test\" = \"127.0.0.1\", \"files.split.test\" = \"127.0.0.1\" }}\n\
         extra_roots = [\"index-test-ca.pem\"]\n"
    ));
    std::fs::write(ws.join("skillbox.toml"), toml).unwrap();
}

#[test]
fn an_https_index_with_its_files_on_another_host_builds_and_its_wheels_are_cached() {
    let sb = Skillbox::start(Options {
        prepare: Some(prepare_tls),
        ..Options::default()
    });
    let index = &tls_index().index;
    let first = build(&sb, "tls-one");
    assert_eq!(first["ok"], true, "{first}\n{}", sb.logs());
    assert_eq!(index.counts()[wheel("skbtls")], 1, "{}", index.counts());
    wait_kept(&sb, 1);

    let second = build(&sb, "tls-two");
    assert_eq!(second["ok"], true, "{second}\n{}", sb.logs());
    assert_eq!(
        index.counts()[wheel("skbtls")],
        1,
        "the second build asked the HTTPS file host for the wheel again: {}",
        index.counts()
    );
    assert_eq!(
        index.counts()[wheel("skbtlsextra")],
        1,
        "{}",
        index.counts()
    );
    let url = format!("https://files.split.test:{}{}", index.port, wheel("skbtls"));
    assert_eq!(second["from_cache"], json!([url]), "{second}");
    for skill in ["tls-one", "tls-two"] {
        let r = script(&sb, skill);
        assert_eq!(
            r["data"]["stdout"].as_str().map(str::trim),
            Some("1.0"),
            "{skill}: {r}"
        );
    }
}

fn big_index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        start_index(
            &json!([{"name": "skbbig", "version": "1.0", "pad_mb": 70}]),
            None,
        )
    })
}

fn prepare_big(ws: &Path) {
    use_index(ws, big_index().port, &[("big-wheel", "skbbig==1.0")]);
}

/// A wheel past a tool's 64 MiB file limit (70 MiB of random bytes, stored: imageio-ffmpeg
/// is 68 MB) builds under the build's own limits (`[deps] max_file_mb`) and is imported.
#[test]
fn a_wheel_over_64_mib_builds_and_is_imported() {
    let sb = Skillbox::start(Options {
        prepare: Some(prepare_big),
        ..Options::default()
    });
    let built = build(&sb, "big-wheel");
    assert_eq!(built["ok"], true, "{built}\n{}", sb.logs());
    let r = script(&sb, "big-wheel");
    assert_eq!(
        r["data"]["stdout"].as_str().map(str::trim),
        Some("1.0"),
        "{r}"
    );
}
