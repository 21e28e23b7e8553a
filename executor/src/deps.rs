//! A skill's Python dependencies (docs/sandbox.md, "Dependencies"): built by `deps.build`
//! with `pip install --target` run as a tool is, in the sandbox (its own user id, Landlock,
//! seccomp, rlimits), whose only network is the package index through the core's egress
//! proxy; then kept read-only in `<scratch root>/.deps/<digest>/` and found by every program
//! run under the skill's envelope ([`DepsDir::for_call`]: `bin/` first on `PATH`, the
//! packages on `PYTHONPATH`, readable through Landlock, writable by nobody but the
//! executor).
//!
//! An environment is named by the digest the core computes from the requirements, the
//! index and the source policy: a changed requirement is a new environment, and the old
//! one of that skill is removed once the new one is in place.

use std::path::{Path, PathBuf};
use std::time::Duration;

use skillbox_protocol::methods::{DepsBuildParams, DepsBuildResult, LockedPackage};
use tokio::io::AsyncReadExt;

use crate::broker::CapabilityBroker;
use crate::launch::{self, Launched, Plan};
use crate::sandbox::Sandbox;

/// The folder of the environments, in the scratch root (the same file system, so a
/// finished build is moved in place by a rename).
pub const DEPS_DIR: &str = ".deps";
/// The lock an environment keeps: what it holds, as [`LockedPackage`]s.
const LOCK_FILE: &str = "skillbox-deps.json";
/// The name of the skill an environment belongs to.
pub const SKILL_FILE: &str = "skillbox-skill";
/// The installer's output kept for the answer.
const LOG_TAIL_BYTES: usize = 8 * 1024;

/// Why dependencies could not be built or used.
#[derive(Debug, thiserror::Error)]
pub enum DepsError {
    /// The digest is not a SHA-256 in hex.
    #[error("dependency digest {0:?} is not 64 hex digits")]
    BadDigest(String),
    /// The environment is not on this executor.
    #[error("the dependencies of skill {skill} are not built on this executor; run `skillbox skill deps {skill}`")]
    Missing {
        /// The skill.
        skill: String,
    },
    /// The sandbox could not run the installer.
    #[error("the dependency build could not start: {0}")]
    Sandbox(String),
    /// The installer failed.
    #[error("pip failed ({status}): {tail}")]
    Failed {
        /// How it ended.
        status: String,
        /// Its last lines.
        tail: String,
    },
    /// The build finished but could not be kept.
    #[error("the built environment could not be kept: {0}")]
    Keep(String),
}

/// A built environment as a call uses it.
#[derive(Debug, Clone)]
pub struct DepsDir {
    /// `<scratch root>/.deps/<digest>`.
    pub path: PathBuf,
}

impl DepsDir {
    /// The environment `digest` names for a call of `skill`, which must be built here.
    pub fn for_call(sandbox: &Sandbox, skill: &str, digest: &str) -> Result<Self, DepsError> {
        let path = env_dir(&deps_root(sandbox), digest)?;
        if !path.join(LOCK_FILE).is_file() {
            return Err(DepsError::Missing {
                skill: skill.to_string(),
            });
        }
        Ok(Self { path })
    }
}

fn env_dir(root: &Path, digest: &str) -> Result<PathBuf, DepsError> {
    let hex = digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex {
        return Err(DepsError::BadDigest(digest.to_string()));
    }
    Ok(root.join(digest.to_ascii_lowercase()))
}

/// Where the built environments are: `<scratch root>/.deps`.
pub fn deps_root(sandbox: &Sandbox) -> PathBuf {
    sandbox.config().scratch_root.join(DEPS_DIR)
}

/// Builds the environment `p` asks for, or finds it built.
pub async fn build<B: CapabilityBroker>(
    sandbox: &Sandbox,
    broker: &B,
    p: DepsBuildParams,
) -> Result<DepsBuildResult, DepsError> {
    let dir = env_dir(&deps_root(sandbox), &p.digest)?;
    if let Ok(bytes) = std::fs::read(dir.join(LOCK_FILE)) {
        if let Ok(packages) = serde_json::from_slice::<Vec<LockedPackage>>(&bytes) {
            return Ok(DepsBuildResult {
                digest: p.digest,
                packages,
                reused: true,
                log_tail: String::new(),
            });
        }
    }
    let plan = Plan::deps_build(&p, pip_argv(&p));
    let call = plan.call.clone();
    let Launched {
        mut child,
        guard,
        listener,
        ..
    } = launch::launch(sandbox, broker, plan)
        .await
        .map_err(|e| DepsError::Sandbox(e.to_string()))?;
    let scratch = guard.scratch().to_path_buf();
    let mut output = child.stdout.take();
    let run = async {
        let mut log = Vec::new();
        if let Some(out) = output.as_mut() {
            let mut buf = [0u8; 8192];
            while let Ok(n) = out.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                log.extend_from_slice(&buf[..n]);
                if log.len() > 4 * LOG_TAIL_BYTES {
                    log.drain(..log.len() - LOG_TAIL_BYTES);
                }
            }
        }
        let status = child.wait().await;
        (log, status)
    };
    let limit = Duration::from_millis(p.timeout_ms);
    let ended = launch::relay_while(listener, broker, &call, tokio::time::timeout(limit, run))
        .await
        .ok();
    let pid = child.id();
    let Some((log, status)) = ended else {
        let _ = child.start_kill();
        guard.finish(pid);
        return Err(DepsError::Failed {
            status: format!(
                "no result within {} ms ([deps] build_timeout_ms)",
                p.timeout_ms
            ),
            tail: String::new(),
        });
    };
    let tail = tail_of(&log);
    let ok = matches!(&status, Ok(s) if s.success());
    if !ok {
        guard.finish(pid);
        let status = match status {
            Ok(s) => s.to_string(),
            Err(e) => e.to_string(),
        };
        return Err(DepsError::Failed { status, tail });
    }
    let kept = keep(&scratch, &dir, &p.skill);
    guard.finish(pid);
    let packages = kept?;
    tracing::info!(skill = %p.skill, digest = %p.digest, packages = packages.len(), "dependencies built");
    Ok(DepsBuildResult {
        digest: p.digest,
        packages,
        reused: false,
        log_tail: tail,
    })
}

/// `pip install` of the requirements file into `<scratch>/env`, reporting what it took.
fn pip_argv(p: &DepsBuildParams) -> Vec<String> {
    let mut argv: Vec<String> = [
        "python3",
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-cache-dir",
        "--progress-bar",
        "off",
        "--target",
        "env",
        "--report",
        "report.json",
        "--index-url",
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    argv.push(p.index_url.clone());
    if let Some(rest) = p.index_url.strip_prefix("http://") {
        // Plain HTTP reaches only the operator's index, through the egress proxy.
        let host = rest.split(['/', ':']).next().unwrap_or_default();
        argv.extend(["--trusted-host".into(), host.to_string()]);
    }
    if !p.allow_source {
        argv.push("--only-binary=:all:".into());
    }
    if p.no_deps {
        argv.push("--no-deps".into());
    }
    argv.extend(["-r".into(), "requirements.txt".into()]);
    argv.extend(["-c".into(), "constraints.txt".into()]);
    argv
}

/// The last [`LOG_TAIL_BYTES`] of the installer's output, from a line start.
/// A log shorter than that is kept whole (a one-line `No module named pip` included).
fn tail_of(log: &[u8]) -> String {
    let text = String::from_utf8_lossy(log);
    let mut start = text.len().saturating_sub(LOG_TAIL_BYTES);
    if start > 0 {
        while !text.is_char_boundary(start) {
            start += 1;
        }
        start = text[start..].find('\n').map_or(start, |i| start + i + 1);
    }
    text.get(start..).unwrap_or_default().trim_end().to_string()
}

/// Moves `<scratch>/env` to `dir` with its lock, read-only, owned by the executor; then
/// removes the skill's other environments. The packages it holds.
fn keep(scratch: &Path, dir: &Path, skill: &str) -> Result<Vec<LockedPackage>, DepsError> {
    let err = |what: &str, e: std::io::Error| DepsError::Keep(format!("{what}: {e}"));
    let report = std::fs::read(scratch.join("report.json")).map_err(|e| err("pip's report", e))?;
    let packages = packages_of(&report).map_err(DepsError::Keep)?;
    let env = scratch.join("env");
    std::fs::create_dir_all(&env).map_err(|e| err("the environment", e))?;
    let lock = serde_json::to_vec_pretty(&packages).map_err(|e| DepsError::Keep(e.to_string()))?;
    std::fs::write(env.join(LOCK_FILE), lock).map_err(|e| err("its lock", e))?;
    std::fs::write(env.join(SKILL_FILE), skill).map_err(|e| err("its skill name", e))?;
    seal(&env).map_err(|e| err("making it read-only", e))?;
    let root = dir.parent().unwrap_or(dir);
    std::fs::create_dir_all(root).map_err(|e| err("the dependencies folder", e))?;
    match std::fs::rename(&env, dir) {
        Ok(()) => {}
        // Another build of the same digest got there first: it is the same environment.
        Err(_) if dir.join(LOCK_FILE).is_file() => {}
        Err(e) => return Err(err("moving it in place", e)),
    }
    remove_others(root, dir, skill);
    Ok(packages)
}

/// Every file and folder under `dir`: owned by this process's user, writable by it only.
fn seal(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let (uid, gid) = (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path)?;
        std::os::unix::fs::lchown(&path, Some(uid), Some(gid))?;
        if meta.file_type().is_symlink() {
            continue;
        }
        let exec = meta.permissions().mode() & 0o111 != 0;
        let mode = if meta.is_dir() || exec { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                stack.push(entry?.path());
            }
        }
    }
    Ok(())
}

/// Removes the environments of `skill` other than `keep`.
fn remove_others(root: &Path, keep: &Path, skill: &str) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path == keep {
            continue;
        }
        let owner = std::fs::read_to_string(path.join(SKILL_FILE)).unwrap_or_default();
        if owner == skill {
            if let Err(e) = std::fs::remove_dir_all(&path) {
                tracing::warn!(path = %path.display(), error = %e, "old dependencies not removed");
            }
        }
    }
}

/// The packages of pip's installation report (`--report`): name, version, URL, SHA-256.
fn packages_of(report: &[u8]) -> Result<Vec<LockedPackage>, String> {
    let v: serde_json::Value =
        serde_json::from_slice(report).map_err(|e| format!("pip's report is not JSON: {e}"))?;
    let installs = v["install"].as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for item in installs {
        let name = item["metadata"]["name"].as_str().unwrap_or_default();
        let version = item["metadata"]["version"].as_str().unwrap_or_default();
        let info = &item["download_info"];
        let url = info["url"].as_str().unwrap_or_default();
        let sha256 = info["archive_info"]["hashes"]["sha256"]
            .as_str()
            .map(str::to_string)
            .or_else(|| {
                (info["archive_info"]["hash"].as_str())
                    .and_then(|h| h.strip_prefix("sha256="))
                    .map(str::to_string)
            })
            .unwrap_or_default();
        if name.is_empty() || version.is_empty() {
            return Err("pip's report names a package without name or version".into());
        }
        out.push(LockedPackage {
            name: name.to_string(),
            version: version.to_string(),
            url: url.to_string(),
            sha256,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_installer_log_is_kept_whole() {
        let one = b"/usr/bin/python3: No module named pip\n";
        assert_eq!(tail_of(one), "/usr/bin/python3: No module named pip");
        assert_eq!(tail_of(b"a\nb\n"), "a\nb");
        let long = format!("{}\nlast line\n", "\u{e9}".repeat(LOG_TAIL_BYTES));
        let tail = tail_of(long.as_bytes());
        assert!(tail.ends_with("last line"), "{tail}");
        assert!(tail.len() <= LOG_TAIL_BYTES, "{}", tail.len());
    }

    #[test]
    fn pip_report_gives_each_package_with_its_hash() {
        let report = br#"{"version": "1", "install": [
            {"download_info": {"url": "http://index.test/files/b-2.0-py3-none-any.whl",
              "archive_info": {"hash": "sha256=bbb"}}, "metadata": {"name": "b", "version": "2.0"}},
            {"download_info": {"url": "http://index.test/files/a-1.0-py3-none-any.whl",
              "archive_info": {"hashes": {"sha256": "aaa"}}}, "metadata": {"name": "a", "version": "1.0"}}
        ]}"#;
        let p = packages_of(report).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].name.as_str(), p[0].sha256.as_str()), ("a", "aaa"));
        assert_eq!(p[1].pin(), "b==2.0 --hash=sha256:bbb");
    }

    #[test]
    fn wheels_only_unless_allowed_and_a_plain_index_is_trusted_by_name() {
        let p = DepsBuildParams {
            call_id: "c".into(),
            capability_token: skillbox_protocol::methods::SecretValue("t".into()),
            skill: "s".into(),
            digest: "0".repeat(64),
            requirements: vec!["pypdf".into()],
            constraints: vec!["pypdf<5".into()],
            index_url: "http://index.test:8080/simple".into(),
            allow_source: false,
            no_deps: true,
            trust_pem: None,
            timeout_ms: 1000,
            memory_mb: 512,
        };
        let argv = pip_argv(&p).join(" ");
        assert!(argv.contains("--only-binary=:all:"), "{argv}");
        assert!(argv.contains("--trusted-host index.test "), "{argv}");
        assert!(argv.contains("--no-deps"), "{argv}");
        assert!(
            argv.ends_with("-r requirements.txt -c constraints.txt"),
            "{argv}"
        );
        let argv = pip_argv(&DepsBuildParams {
            allow_source: true,
            index_url: "https://pypi.org/simple".into(),
            ..p
        })
        .join(" ");
        assert!(
            !argv.contains("only-binary") && !argv.contains("trusted-host"),
            "{argv}"
        );
    }

    #[test]
    fn a_digest_must_be_hex() {
        let root = Path::new("/x");
        assert!(matches!(
            env_dir(root, "../etc"),
            Err(DepsError::BadDigest(_))
        ));
        let d = "AB".repeat(32);
        assert_eq!(env_dir(root, &d).unwrap(), root.join("ab".repeat(32)));
    }
}
