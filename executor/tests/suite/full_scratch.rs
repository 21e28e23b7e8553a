//! A scratch file system that a call filled: the next call, made at once from a ready
//! slot (its scratch dir made ahead) or by a prestarted process (its arguments file
//! written when the call comes), still gets its arguments file written and runs,
//! because every write into a call's scratch waits for the ended call's folder to be
//! removed ([`skillbox_executor::sandbox::room`]). Driven in this process on a small tmpfs
//! mounted for the test (root only), the way the daemon runs calls back to back.

use std::path::Path;

use serde_json::{json, Value};
use skillbox_executor::registry::Registry;
use skillbox_executor::sandbox::{self, Sandbox, SandboxConfig};

use super::harness::{in_process, running_as_root, SkillRoot};

/// A `plain` tool (so each call has an arguments file to write) that reads its
/// arguments (from stdin first: a prestarted one waits there), then writes 1 MiB files
/// into its scratch dir until the file system is full, and says how that ended.
const FILL: &str = r#"
import json, os, sys
sys.stdin.readline()  # a prestarted process waits here for its call
home = os.environ["HOME"]
args = json.load(open(os.environ["SKILLBOX_ARGS_FILE"]))
outcome = "ok"
try:
    for i in range(64):
        with open(os.path.join(home, "f%d" % i), "wb") as f:
            f.write(b"x" * (1 << 20))
except OSError as e:
    outcome = e.strerror
print(json.dumps({"round": args["round"], "write": outcome}))
"#;

/// A tmpfs of `size_mb` mounted on `dir` until dropped.
struct Tmpfs<'a>(&'a Path);

impl<'a> Tmpfs<'a> {
    fn mount(dir: &'a Path, size_mb: u64) -> Self {
        nix::mount::mount(
            Some("tmpfs"),
            dir,
            Some("tmpfs"),
            nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
            Some(format!("size={size_mb}m,mode=0711").as_str()),
        )
        .expect("mount a tmpfs for the scratch root");
        Self(dir)
    }
}

impl Drop for Tmpfs<'_> {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

async fn fill(sandbox: &Sandbox, registry: &Registry, skill: &str, round: usize) -> Value {
    let call_id = format!("{skill}-{round}");
    in_process::execute(
        sandbox,
        registry,
        (skill, "run"),
        &call_id,
        json!({"round": round}),
    )
    .await
}

/// Waits until a prestarted process of `skill:run` is ready.
async fn wait_for_a_prestarted(registry: &Registry, skill: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while registry.warm().waiting(skill, "run") < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "no process prestarted"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

#[test]
fn a_call_right_after_one_that_filled_the_scratch_tmpfs_runs_from_a_ready_slot_or_a_prestarted_process(
) {
    if !running_as_root() {
        println!("SKIPPED {}: needs root (mounts a tmpfs)", module_path!());
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let _tmpfs = Tmpfs::mount(base.path(), 4);
    let root = SkillRoot::new();
    let command = serde_json::to_string(&["python3", "-c", FILL]).unwrap();
    for (name, execution) in [("filler", "{}"), ("warmfiller", "{prestart: 1}")] {
        root.skill(
            name,
            &format!(
                "name: {name}\n\
                 description: fills its scratch dir\n\
                 execution: {execution}\n\
                 tools:\n  \
                   - name: run\n    \
                     description: writes until the disk is full\n    \
                     command: {command}\n    \
                     protocol: plain\n    \
                     parameters: {{type: object}}\n"
            ),
            &[],
        );
    }
    let mut sandbox = Sandbox::new(SandboxConfig {
        scratch_root: base.path().join("scratch"),
        // A range of this test process's own (see context_shelf.rs).
        uid_base: 3_500_000 + (std::process::id() % 20_000) * 8,
        ..SandboxConfig::default()
    })
    .unwrap();
    sandbox.keep_ready(2);
    let registry = Registry::load(root.skills());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        registry.warm().enable_refill();
        (registry.warm()).fill(&sandbox, registry.skills().map(|r| &r.skill));
        for round in 0..16 {
            // Ready slots, then a prestarted process (whose arguments file is written
            // when the call comes), one after the other.
            let skill = ["filler", "warmfiller"][round % 2];
            if skill == "warmfiller" {
                wait_for_a_prestarted(&registry, skill).await;
            }
            let result = fill(&sandbox, &registry, skill, round).await;
            assert_eq!(result["success"], true, "{skill} round {round}: {result}");
            let stdout = result["data"]["stdout"].as_str().unwrap_or_default();
            let report: Value = serde_json::from_str(stdout.trim())
                .unwrap_or_else(|e| panic!("round {round}: {e}: {result}"));
            assert_eq!(report["round"], round, "{report}");
            assert_eq!(report["write"], "No space left on device", "{report}");
        }
    });
    registry.warm().clear();
    sandbox.stop_ready();
    sandbox::wait_idle();
}
