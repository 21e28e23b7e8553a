//! A skill's Python and Node dependencies (docs/sandbox.md, "Dependencies"): built by
//! `deps.build` with `pip install --target` (`pip.rs`) and `npm ci`/`npm install`
//! (`npm.rs`), each run as a tool is, in the sandbox (its own user id, Landlock, seccomp,
//! rlimits), whose only network is the package index and the npm registry through the
//! core's egress proxy (`run.rs`); then assembled and kept read-only in `<scratch
//! root>/.deps/<digest>/` (`keep.rs`: pip's packages at its top, npm's in
//! `node_modules/`) and found by every program run under the skill's envelope
//! ([`DepsDir::for_call`]: `bin/` first on `PATH`, the packages on `PYTHONPATH`,
//! `node_modules` on `NODE_PATH`, readable through Landlock, writable by nobody but the
//! executor).
//!
//! An environment is named by the digest the core computes from the requirements, the
//! index and the source policy, and the Node manifest, lock, registry and scripts policy:
//! a change is a new environment, and the old one of that skill is removed once the new
//! one is in place.

mod keep;
mod npm;
mod pip;
mod run;

use std::path::{Path, PathBuf};

use skillbox_protocol::methods::{DepsBuildParams, DepsBuildResult, LockedPackage};

use crate::broker::CapabilityBroker;
use crate::launch::Plan;
use crate::sandbox::Sandbox;

/// The folder of the environments, in the scratch root (the same file system, so a
/// finished build is moved in place by a rename).
pub const DEPS_DIR: &str = ".deps";
/// The lock an environment keeps: what it holds, as [`LockedPackage`]s.
const LOCK_FILE: &str = "skillbox-deps.json";
/// The name of the skill an environment belongs to.
pub const SKILL_FILE: &str = "skillbox-skill";

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
    /// npm is not where the sandbox looks for programs.
    #[error(
        "the skill has Node dependencies (package.json) but npm is not installed where the \
         executor runs (looked on {path}): install npm beside node (Debian: apt-get install \
         npm; the nodejs package does not include it)"
    )]
    NpmMissing {
        /// The sandbox's `PATH`.
        path: &'static str,
    },
    /// The installer failed.
    #[error("{installer} failed ({status}): {tail}")]
    Failed {
        /// `pip` or `npm`.
        installer: &'static str,
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

/// Builds the environment `p` asks for, or finds it built: pip's part when it has
/// requirements, then npm's when it has Node dependencies, into one environment.
pub async fn build<B: CapabilityBroker>(
    sandbox: &Sandbox,
    broker: &B,
    p: DepsBuildParams,
) -> Result<DepsBuildResult, DepsError> {
    let root = deps_root(sandbox);
    let dir = env_dir(&root, &p.digest)?;
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
    if p.node.is_some() && npm::find().is_none() {
        return Err(DepsError::NpmMissing {
            path: crate::sandbox::env::SANDBOX_PATH,
        });
    }
    let started = std::time::Instant::now();
    let stage = keep::Stage::new(&root, &p.call_id)?;
    let mut packages = Vec::new();
    let mut tails = Vec::new();
    if !p.requirements.is_empty() {
        let plan = Plan::deps_build(&p, pip::argv(&p));
        let (taken, tail) =
            run::installer(sandbox, broker, plan, "pip", |s| stage.take_python(s)).await?;
        packages.extend(taken);
        tails.push(tail);
    }
    if let Some(node) = &p.node {
        let mut plan = Plan::node_build(&p, npm::argv(node), npm::env(), npm::files(node));
        // `[deps] build_timeout_ms` is the whole build's: npm has what pip left.
        let spent = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        plan.timeout_ms = p.timeout_ms.saturating_sub(spent).max(1);
        let (taken, tail) =
            run::installer(sandbox, broker, plan, "npm", |s| stage.take_node(s)).await?;
        packages.extend(taken);
        tails.push(tail);
    }
    stage.keep(&dir, &p.skill, &packages)?;
    tracing::info!(skill = %p.skill, digest = %p.digest, packages = packages.len(), "dependencies built");
    Ok(DepsBuildResult {
        digest: p.digest,
        packages,
        reused: false,
        log_tail: tails.join("\n"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
