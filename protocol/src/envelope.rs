//! What a process the core asks for carries of its skill's envelope besides the skill
//! itself (docs/architecture.md, "Wire"): the values of its env names, the names, hosts and
//! file size the operator granted (the executor reads the skill as published and must be
//! told), the certificates its programs trust and its built dependencies. A tool call
//! (`tool.execute`) and a command session (`session.exec`) carry the same [`Envelope`],
//! nested as an `envelope` object, so each rule about it is written once on either side.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A value that must never be printed: `Debug` shows `***`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretValue(pub String);

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// One process's share of its skill's envelope; empty ([`Envelope::default`]) for a
/// process under no skill.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// Values of the skill's declared env names that the core holds (and placeholders of
    /// its bound secrets).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, SecretValue>,
    /// Env names the operator granted the skill (`[grants.<skill>] env`) beyond those it
    /// declares: the executor passes their values too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub granted_env: Vec<String>,
    /// Hosts the operator granted the skill (`[grants.<skill>] network`) beyond those it
    /// declares. A process whose skill declares or is granted any host runs in a network
    /// namespace of its own whose only way out is the core's egress proxy
    /// (docs/sandbox.md). The executor only tests it for emptiness; the core's proxy
    /// enforces the hosts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub granted_network: Vec<String>,
    /// The largest file the operator lets the skill's programs write, in MiB
    /// (`[grants.<skill>] max_file_mb`): replaces the skill's `execution.max_file_mb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted_max_file_mb: Option<u64>,
    /// The operator lets the skill's programs use UNIX sockets (`[grants.<skill>]
    /// unix_sockets`), as a skill's `execution.unix_sockets` does.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub granted_unix_sockets: bool,
    /// Certificates (PEM) a network process's programs trust beyond the system roots: the
    /// workspace's egress CA when the skill binds secrets, and `[egress] extra_roots`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_pem: Option<String>,
    /// The digest of the skill's built dependencies
    /// ([`crate::deps_build::DepsBuildParams::digest`]), when it has some: its programs
    /// find them (`bin/` first on `PATH`, packages importable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deps: Option<String>,
}

impl Envelope {
    /// Whether it carries nothing (a process under no skill, or a skill with no env, no
    /// grant, no certificates and no dependencies).
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn envelope_debug_masks_values() {
        let e = Envelope {
            env: [("API_KEY".to_string(), SecretValue("sk-live".into()))].into(),
            ..Envelope::default()
        };
        let dbg = format!("{e:?}");
        assert!(!dbg.contains("sk-live") && dbg.contains("API_KEY"), "{dbg}");
    }

    #[test]
    fn envelope_rejects_unknown_fields_and_omits_what_is_empty() {
        let e: Envelope = serde_json::from_value(json!({"granted_env": ["A"]})).unwrap();
        assert_eq!(e.granted_env, ["A"]);
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"granted_env": ["A"]})
        );
        assert!(serde_json::from_value::<Envelope>(json!({"skill": "x"})).is_err());
        assert!(Envelope::default().is_empty());
    }
}
