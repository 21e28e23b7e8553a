//! `deps.build` (core → executor): install a skill's Python requirements and Node
//! dependencies into an environment of its own, in the tools' sandbox (docs/sandbox.md,
//! "Dependencies").

use serde::{Deserialize, Serialize};

use crate::envelope::SecretValue;

/// `deps.build`: install a skill's Python requirements and Node dependencies into an
/// environment of its own, in the tools' sandbox, whose only network is the package index
/// and the npm registry through the egress proxy (docs/sandbox.md, "Dependencies").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DepsBuildParams {
    /// The build's id: the identity its connections present to the egress proxy.
    pub call_id: String,
    /// Its capability token.
    pub capability_token: SecretValue,
    /// The skill.
    pub skill: String,
    /// The environment's name: a digest of the requirements, index and source policy,
    /// and of the Node manifest, lock, registry and scripts policy.
    pub digest: String,
    /// Requirement specifiers (pinned with hashes when built from a lock); none: no pip.
    pub requirements: Vec<String>,
    /// The operator's constraints (pip `-c`): pins of what the requirements leave open.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<String>,
    /// The package index (`[deps] index_url`).
    pub index_url: String,
    /// Whether source distributions may be built (their build code runs in the sandbox).
    pub allow_source: bool,
    /// Install exactly these, no dependency resolution (a build from a lock).
    #[serde(default)]
    pub no_deps: bool,
    /// Certificates (PEM) the build trusts beyond the system roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_pem: Option<String>,
    /// The Node dependencies to install with npm, when the skill has some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeBuild>,
    /// Wall-clock limit of the whole build (pip and npm together).
    pub timeout_ms: u64,
    /// Memory limit.
    pub memory_mb: u64,
}

/// The Node part of a build: `npm ci` with a lock, `npm install` without.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeBuild {
    /// The `package.json` to install (the skill's, cut to its dependency fields).
    pub manifest: String,
    /// The skill's `package-lock.json`: installed exactly, integrity checked by npm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<String>,
    /// The npm registry (`[deps] npm_registry`).
    pub registry: String,
    /// Whether the packages' install scripts run (`--ignore-scripts` otherwise).
    pub allow_scripts: bool,
}

/// Which installer a locked package came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ecosystem {
    /// pip, from the package index.
    #[default]
    Python,
    /// npm, from the registry.
    Npm,
}

impl Ecosystem {
    fn is_python(&self) -> bool {
        *self == Self::Python
    }
}

/// One wheel (or source distribution, or npm package) a build installed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedPackage {
    /// Which installer took it (absent: pip).
    #[serde(default, skip_serializing_if = "Ecosystem::is_python")]
    pub ecosystem: Ecosystem,
    /// The distribution's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Where it was downloaded from.
    pub url: String,
    /// The SHA-256 of the file (a Python package's).
    pub sha256: String,
    /// npm's Subresource Integrity of the tarball (`sha512-...`: an npm package's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrity: Option<String>,
}

impl LockedPackage {
    /// The pinned requirement a build from the lock installs (a Python package's).
    pub fn pin(&self) -> String {
        format!(
            "{}=={} --hash=sha256:{}",
            self.name, self.version, self.sha256
        )
    }
}

/// `deps.build` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DepsBuildResult {
    /// The environment built (or found already built).
    pub digest: String,
    /// What it holds.
    pub packages: Vec<LockedPackage>,
    /// Whether it was already there.
    pub reused: bool,
    /// The last lines of the installer's output.
    pub log_tail: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_build_refuses_an_envelope_so_no_env_value_can_reach_the_installer() {
        let mut params = json!({
            "call_id": "c3", "capability_token": "t", "skill": "netty", "digest": "d",
            "requirements": ["six==1.16.0"], "index_url": "https://pypi.test/simple/",
            "allow_source": false, "no_deps": false, "timeout_ms": 1, "memory_mb": 64,
        });
        assert!(serde_json::from_value::<DepsBuildParams>(params.clone()).is_ok());
        params["envelope"] = json!({"env": {"API_KEY": "declared-1"}});
        let refused = serde_json::from_value::<DepsBuildParams>(params).unwrap_err();
        assert!(
            refused.to_string().contains("unknown field `envelope`"),
            "{refused}"
        );
    }
}
