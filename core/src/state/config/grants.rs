//! `[grants.<skill>]`: permissions the operator gives a skill beyond what it declares.
//! Published skills declare no skillbox permissions (a bare `SKILL.md`, OpenClaw's
//! `requires.env`): the operator grants them here, with the keys of a manifest's
//! `permissions`. A skill's effective permissions are what it declares plus what it is
//! granted ([`Grant::apply`]); `GET /v1/skills/{name}` shows the two side by side.
//!
//! ```toml
//! [grants.weather]
//! network = ["wttr.in"]
//! env = ["WEATHER_API_KEY"]
//! workspace = { read = ["data/**"] }
//! max_file_mb = 4096          # largest file its programs may write (replaces the skill's)
//! unix_sockets = true         # UNIX sockets, with a /tmp of the call's own (LibreOffice)
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use skillbox_protocol::skill::network::NetworkPattern;
use skillbox_protocol::skill::validate::{is_env_name, is_reserved_env, relative_path_problem};
use skillbox_protocol::skill::{Permissions, SecretBinding};

/// `[grants.<skill>] workspace`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GrantedWorkspace {
    /// Globs relative to the workspace the skill's `readFile` may read.
    pub read: Vec<String>,
}

/// `[grants.<skill>]`: what the operator grants one skill.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Grant {
    /// Network patterns, as `permissions.network`.
    pub network: Vec<String>,
    /// Env names whose values the core supplies, as `permissions.env`.
    pub env: Vec<String>,
    /// Workspace read scope, as `permissions.workspace`.
    pub workspace: GrantedWorkspace,
    /// Secrets bound to hosts, as `permissions.secrets`: the skill's programs get a
    /// placeholder, the egress proxy puts the value in requests to those hosts only.
    pub secrets: Vec<SecretBinding>,
    /// Python requirements added to what the skill declares (published skills often
    /// import packages they never list): `["pyyaml==6.0.2"]`.
    pub requirements: Vec<String>,
    /// Pins of what the skill's requirements leave open (pip constraints, after `[deps]
    /// constraints`): `["mcp<2"]`.
    pub constraints: Vec<String>,
    /// Whether the skill's dependency build may build source distributions (their build
    /// code runs, in the sandbox); wheels only otherwise.
    pub allow_source_builds: bool,
    /// Whether the install scripts of the skill's Node packages (`preinstall`, `install`,
    /// `postinstall`) run in its dependency build (in the sandbox); `npm --ignore-scripts`
    /// otherwise.
    pub allow_install_scripts: bool,
    /// The largest file the skill's programs may write, in MiB (`RLIMIT_FSIZE`): replaces
    /// the skill's `execution.max_file_mb` (1024 by default), up or down.
    pub max_file_mb: Option<u64>,
    /// UNIX sockets for the skill's programs, in a call with a `/tmp` and a loopback of
    /// its own (what LibreOffice needs to start): as the skill's `execution.unix_sockets`.
    pub unix_sockets: bool,
}

/// What `[grants.<skill>] max_file_mb` may be: 1 MiB to 1 TiB.
pub const GRANTED_MAX_FILE_MB_RANGE: (u64, u64) = (1, 1024 * 1024);

/// Every `[grants.<skill>]`, by skill name.
pub type Grants = BTreeMap<String, Grant>;

impl Grant {
    /// Whether it grants nothing.
    pub fn is_empty(&self) -> bool {
        self.network.is_empty()
            && self.env.is_empty()
            && self.workspace.read.is_empty()
            && self.secrets.is_empty()
            && self.requirements.is_empty()
            && self.constraints.is_empty()
            && !self.allow_source_builds
            && !self.allow_install_scripts
            && self.max_file_mb.is_none()
            && !self.unix_sockets
    }

    /// What is wrong with it, in the words of its keys (`network[0]: ...`), if anything.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, n) in self.network.iter().enumerate() {
            if let Err(e) = NetworkPattern::parse(n) {
                out.push(format!("network[{i}]: {e}"));
            }
        }
        for (i, e) in self.env.iter().enumerate() {
            if !is_env_name(e) {
                out.push(format!(
                    "env[{i}]: {e:?} is not an env name ([A-Za-z_][A-Za-z0-9_]*)"
                ));
            } else if is_reserved_env(e) {
                out.push(format!(
                    "env[{i}]: {e:?} is reserved (set by skillbox or changes how programs load)"
                ));
            }
        }
        for (i, s) in self.secrets.iter().enumerate() {
            if !is_env_name(&s.name) || is_reserved_env(&s.name) {
                out.push(format!(
                    "secrets[{i}]: {:?} is not an env name a skill may have",
                    s.name
                ));
            }
            if s.hosts.is_empty() {
                out.push(format!(
                    "secrets[{i}]: {:?} is bound to no host; list the hosts that may receive it",
                    s.name
                ));
            }
            for (j, h) in s.hosts.iter().enumerate() {
                if let Err(e) = NetworkPattern::parse(h) {
                    out.push(format!("secrets[{i}].hosts[{j}]: {e}"));
                }
            }
            if self.env.contains(&s.name) {
                out.push(format!(
                    "secrets[{i}]: {:?} is also granted in env, which would put its value in the \
                     tool's environment; keep it in secrets only",
                    s.name
                ));
            }
        }
        for (i, r) in self.requirements.iter().enumerate() {
            if let Some(why) = skillbox_protocol::skill::deps::spec_problem(r) {
                out.push(format!("requirements[{i}]: {r:?}: {why}"));
            }
        }
        for (i, c) in self.constraints.iter().enumerate() {
            if let Some(why) = skillbox_protocol::skill::deps::spec_problem(c) {
                out.push(format!("constraints[{i}]: {c:?}: {why}"));
            }
        }
        let (lo, hi) = GRANTED_MAX_FILE_MB_RANGE;
        if let Some(mb) = self.max_file_mb.filter(|mb| !(lo..=hi).contains(mb)) {
            out.push(format!(
                "max_file_mb: {mb} is out of range; allowed {lo}-{hi}"
            ));
        }
        for (i, g) in self.workspace.read.iter().enumerate() {
            if let Some(reason) = relative_path_problem(g) {
                out.push(format!("workspace.read[{i}]: {g:?}: {reason}"));
            } else if let Err(e) = globset::Glob::new(g) {
                out.push(format!(
                    "workspace.read[{i}]: {g:?} is not a valid glob: {e}"
                ));
            }
        }
        out
    }

    /// Adds what it grants to `perms` (each entry once).
    pub fn apply(&self, perms: &mut Permissions) {
        fn add(to: &mut Vec<String>, more: &[String]) {
            for m in more {
                if !to.contains(m) {
                    to.push(m.clone());
                }
            }
        }
        add(&mut perms.network, &self.network);
        add(&mut perms.env, &self.env);
        add(&mut perms.workspace.read, &self.workspace.read);
        for binding in &self.secrets {
            // A granted binding replaces what the skill declares for that name: the
            // operator decides where the value may go. The name leaves plain `env`.
            perms.env.retain(|e| *e != binding.name);
            perms.secrets.retain(|s| s.name != binding.name);
            perms.secrets.push(binding.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_adds_to_what_a_skill_declares_each_entry_once() {
        let grant: Grant = toml::from_str(
            "network = [\"wttr.in\", \"api.example.com\"]\nenv = [\"KEY\"]\nworkspace = { read = [\"data/**\"] }\n",
        )
        .unwrap();
        assert!(grant.problems().is_empty(), "{:?}", grant.problems());
        let mut perms = Permissions {
            network: vec!["api.example.com".into()],
            ..Permissions::default()
        };
        grant.apply(&mut perms);
        assert_eq!(perms.network, ["api.example.com", "wttr.in"]);
        assert_eq!(perms.env, ["KEY"]);
        assert_eq!(perms.workspace.read, ["data/**"]);
    }

    #[test]
    fn a_bad_grant_is_refused_naming_each_key() {
        let grant = Grant {
            network: vec!["http://".into()],
            env: vec!["1BAD".into(), "LD_PRELOAD".into()],
            workspace: GrantedWorkspace {
                read: vec!["../up/**".into()],
            },
            secrets: Vec::new(),
            requirements: vec!["--index-url=https://evil.test".into()],
            constraints: vec!["https://evil.test/x.whl".into()],
            allow_source_builds: false,
            allow_install_scripts: false,
            max_file_mb: Some(0),
            unix_sockets: false,
        };
        let p = grant.problems();
        assert_eq!(p.len(), 7, "{p:?}");
        assert!(p[3].starts_with("requirements[0]"), "{p:?}");
        assert!(p[0].starts_with("network[0]"), "{p:?}");
        assert!(p[1].contains("not an env name"), "{p:?}");
        assert!(p[2].contains("reserved"), "{p:?}");
        assert!(p[4].starts_with("constraints[0]"), "{p:?}");
        assert!(p[5].starts_with("max_file_mb: 0 is out of range"), "{p:?}");
        assert!(p[6].starts_with("workspace.read[0]"), "{p:?}");
        assert!(
            toml::from_str::<Grant>("secret = []\n").is_err(),
            "unknown keys are errors"
        );
    }

    #[test]
    fn a_granted_secret_binding_moves_a_declared_env_name_out_of_the_environment() {
        let grant: Grant = toml::from_str(
            "secrets = [{ name = \"OPENAI_API_KEY\", hosts = [\"api.openai.com\"] }]\n",
        )
        .unwrap();
        assert!(grant.problems().is_empty(), "{:?}", grant.problems());
        let mut perms = Permissions {
            env: vec!["OPENAI_API_KEY".into(), "REGION".into()],
            ..Permissions::default()
        };
        grant.apply(&mut perms);
        assert_eq!(
            perms.env,
            ["REGION"],
            "the value no longer reaches the tool"
        );
        assert_eq!(perms.secrets.len(), 1);
        assert_eq!(perms.reachable(), ["api.openai.com"]);
        let bad: Grant =
            toml::from_str("env = [\"K\"]\nsecrets = [{ name = \"K\", hosts = [] }]\n").unwrap();
        let p = bad.problems();
        assert!(p.iter().any(|p| p.contains("bound to no host")), "{p:?}");
        assert!(p.iter().any(|p| p.contains("also granted in env")), "{p:?}");
    }
}
