//! The embedded executor's scratch root on a private tmpfs (`[executor] scratch_tmpfs_mb`):
//! tools see a file system of exactly that size, writing past it fails with "No space
//! left on device", and the mount exists only in the executor's mount namespace, never
//! in the host's. With 0 the scratch stays on the host's disk.

use serde_json::{json, Value};

use crate::harness::{Options, Skillbox};

/// A tool that reports its scratch dir, the size of the file system under it, and how
/// writing 16 files of 4 MiB there ended (each below the tool's file-size limit).
const REPORT: &str = r#"
import json, os
home = os.environ["HOME"]
st = os.statvfs(home)
outcome = "ok"
try:
    for i in range(16):
        with open(os.path.join(home, "f%d" % i), "wb") as f:
            f.write(b"x" * (4 << 20))
except OSError as e:
    outcome = e.strerror
print(json.dumps({"home": home, "total": st.f_blocks * st.f_frsize, "write": outcome}))
"#;

fn start(executor_toml: &str) -> Skillbox {
    let command = serde_json::to_string(&["python3", "-c", REPORT]).unwrap();
    Skillbox::start(Options {
        executor_toml: executor_toml.to_string(),
        extra_skills: vec![(
            "scratchfs".into(),
            format!(
                "name: scratchfs\n\
                 description: Reports the file system of its scratch dir\n\
                 tools:\n  \
                   - name: report\n    \
                     description: statvfs of HOME and a 64 MiB write\n    \
                     command: {command}\n    \
                     protocol: plain\n"
            ),
        )],
        ..Options::default()
    })
}

/// The tool's report.
fn report(sb: &Skillbox) -> Value {
    let r = sb.call("scratchfs:report", json!({}));
    assert_eq!(r["success"], true, "{r}");
    let stdout = r["data"]["stdout"].as_str().unwrap_or_default();
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {r}"))
}

/// The tmpfs mounts on `root` listed in a `mountinfo` file: their super options.
fn tmpfs_on(mountinfo: &str, root: &str) -> Vec<String> {
    std::fs::read_to_string(mountinfo)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let dash = fields.iter().position(|f| *f == "-")?;
            (fields.get(4) == Some(&root) && fields.get(dash + 1) == Some(&"tmpfs"))
                .then(|| fields.get(dash + 3).unwrap_or(&"").to_string())
        })
        .collect()
}

fn scratch_root(home: &str) -> String {
    std::path::Path::new(home)
        .parent()
        .unwrap()
        .display()
        .to_string()
}

#[test]
fn a_tool_writing_past_the_scratch_tmpfs_gets_no_space_and_the_host_never_sees_the_mount() {
    let sb = start("scratch_tmpfs_mb = 8\n");
    let r = report(&sb);
    assert_eq!(r["total"], 8 << 20, "{r}");
    assert_eq!(r["write"], "No space left on device", "{r}");
    let root = scratch_root(r["home"].as_str().unwrap());
    let executor = sb.executor_pid().expect("the executor runs");
    let inside = tmpfs_on(&format!("/proc/{executor}/mountinfo"), &root);
    assert!(
        inside.iter().any(|o| o.contains("size=8192k")),
        "no 8 MiB tmpfs on {root} in the executor's mounts: {inside:?}"
    );
    let host = tmpfs_on("/proc/self/mountinfo", &root);
    assert!(host.is_empty(), "the host sees the scratch tmpfs: {host:?}");
    // The next call's dir is fresh: the full one was removed, the space is back.
    let again = report(&sb);
    assert_ne!(again["home"], r["home"], "{again}");
    assert_eq!(again["write"], "No space left on device", "{again}");
}

#[test]
fn the_default_scratch_tmpfs_is_512_mib_and_zero_keeps_the_scratch_on_disk() {
    let sb = start("");
    let r = report(&sb);
    assert_eq!(r["total"], 512u64 << 20, "{r}");
    assert_eq!(r["write"], "ok", "{r}");
    drop(sb);

    let sb = start("scratch_tmpfs_mb = 0\n");
    let r = report(&sb);
    assert_eq!(r["write"], "ok", "{r}");
    let root = scratch_root(r["home"].as_str().unwrap());
    let executor = sb.executor_pid().expect("the executor runs");
    let inside = tmpfs_on(&format!("/proc/{executor}/mountinfo"), &root);
    assert!(
        inside.is_empty(),
        "a tmpfs with scratch_tmpfs_mb = 0: {inside:?}"
    );
    let disk = nix::sys::statvfs::statvfs(root.as_str()).unwrap();
    let total = disk.blocks() as u64 * disk.fragment_size() as u64;
    assert_eq!(r["total"], total, "{r}");
}

#[test]
fn executor_refuses_a_scratch_tmpfs_beyond_a_tebibyte() {
    for bad in ["1048577", "-1", "lots"] {
        let out = std::process::Command::new(crate::harness::binary("skillbox-executor"))
            .args(["serve", "--skills", "/nonexistent", "--pki", "/nonexistent"])
            .args(["--core-url", "https://127.0.0.1:9"])
            .arg(format!("--scratch-tmpfs-mb={bad}"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "--scratch-tmpfs-mb {bad}: {stderr}"
        );
        assert!(stderr.contains("--scratch-tmpfs-mb"), "{stderr}");
    }
}
