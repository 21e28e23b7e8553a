//! `[skills.install_policy]`: the operator's rule for what comes in through `skill add`,
//! `skill update` and `skill import` — the sources allowed, signed only, the publishers
//! allowed, and the widest permissions a skill may declare. Each refusal names the rule.

use std::path::Path;
use std::time::SystemTime;

use skillbox_certs::trust::TrustStore;
use skillbox_protocol::skill::{Security, Skill, SIGNATURE_FILE};

use crate::state::config::skills::{InstallPolicySection, MaxPermissions};

/// Why the install policy refuses a skill or a source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("install_policy: {reason}; the operator's [skills.install_policy] in skillbox.toml decides what may be installed")]
pub struct PolicyRefusal {
    /// Which rule and what broke it.
    pub reason: String,
}

fn refuse(reason: String) -> PolicyRefusal {
    PolicyRefusal { reason }
}

/// The install policy with the host `owner/repo` patterns are on.
#[derive(Debug, Clone)]
pub struct InstallPolicy {
    /// The operator's rule.
    pub rule: InstallPolicySection,
    /// `[skills] git_host`.
    pub git_host: String,
}

impl InstallPolicy {
    /// Whether `sources` allows the source given as `text` that resolved to `url` (a
    /// local folder's URL is its path).
    pub fn check_source(&self, text: &str, url: &str) -> Result<(), PolicyRefusal> {
        if self.rule.sources.is_empty() {
            return Ok(());
        }
        let host = self.git_host.trim_end_matches('/');
        let allowed = self.rule.sources.iter().any(|pattern| {
            let p = pattern.trim();
            if p.contains("://") || p.starts_with('/') {
                match p.strip_suffix('*') {
                    Some(prefix) => url.starts_with(prefix),
                    None => url == p || url.trim_end_matches(".git") == p.trim_end_matches(".git"),
                }
            } else if let Some(owner) = p.strip_suffix("/*") {
                url.starts_with(&format!("{host}/{owner}/"))
            } else {
                let repo = p.trim_end_matches(".git");
                url.trim_end_matches(".git") == format!("{host}/{repo}")
            }
        });
        if allowed {
            Ok(())
        } else {
            Err(refuse(format!(
                "source {text} ({url}) is not in sources = {:?}",
                self.rule.sources
            )))
        }
    }

    /// Whether the skill at `dir`, loaded as `skill`, may come in: signed when the rule
    /// asks, from an allowed publisher (verified against the trust store), and within the
    /// widest permissions.
    pub fn check_skill(
        &self,
        skill: &Skill,
        dir: &Path,
        trust_dir: &Path,
        now: SystemTime,
    ) -> Result<(), PolicyRefusal> {
        let signed = dir.join(SIGNATURE_FILE).is_file();
        let needs_signature = self.rule.signed_only || !self.rule.publishers.is_empty();
        if needs_signature && !signed {
            return Err(refuse(format!(
                "{} is not signed and the policy takes signed skills only",
                skill.name
            )));
        }
        if !self.rule.publishers.is_empty() {
            let store = TrustStore::load(trust_dir)
                .map_err(|e| refuse(format!("the trust store could not be read: {e}")))?;
            let version = skill.version.clone().unwrap_or_default();
            let ok = store
                .verify_package(dir, &skill.name, &version, now)
                .map_err(|e| refuse(format!("{}'s signature does not verify: {e}", skill.name)))?;
            if !self.rule.publishers.contains(&ok.publisher) {
                return Err(refuse(format!(
                    "{} is published by {:?}, not one of publishers = {:?}",
                    skill.name, ok.publisher, self.rule.publishers
                )));
            }
        }
        check_permissions(skill, &self.rule.max_permissions)
    }
}

/// The rank of a security level, lowest first.
pub fn security_rank(s: Security) -> u8 {
    match s {
        Security::Read => 0,
        Security::Write => 1,
        Security::Sign => 2,
    }
}

fn check_permissions(skill: &Skill, max: &MaxPermissions) -> Result<(), PolicyRefusal> {
    if let Some(level) = &max.security {
        let cap: Security = serde_json::from_value(serde_json::Value::String(level.clone()))
            .map_err(|_| {
                refuse(format!(
                    "max_permissions.security = {level:?} is not read, write or sign"
                ))
            })?;
        if let Some(t) = skill
            .tools
            .iter()
            .find(|t| security_rank(t.security) > security_rank(cap))
        {
            return Err(refuse(format!(
                "{}:{} has security {:?}, above max_permissions.security = {level:?}",
                skill.name, t.name, t.security
            )));
        }
    }
    let over = |what: &str, declared: Vec<String>, allowed: &Option<Vec<String>>| {
        let Some(allowed) = allowed else {
            return Ok(());
        };
        match declared.iter().find(|d| !allowed.contains(d)) {
            Some(d) => Err(refuse(format!(
                "{} declares {what} {d:?}, not in max_permissions.{what} = {allowed:?}",
                skill.name
            ))),
            None => Ok(()),
        }
    };
    over("network", skill.permissions.reachable(), &max.network)?;
    over("env", skill.permissions.env.clone(), &max.env)?;
    over(
        "delegate",
        skill.permissions.delegate.clone(),
        &max.delegate,
    )?;
    over(
        "secrets",
        skill.permissions.secret_names().map(String::from).collect(),
        &max.secrets,
    )?;
    if max.dependencies == Some(false) && !skill.dependencies.is_empty() {
        return Err(refuse(format!(
            "{} declares dependencies (Python requirements or package.json dependencies) \
             and max_permissions.dependencies = false",
            skill.name
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(sources: &[&str]) -> InstallPolicy {
        InstallPolicy {
            rule: InstallPolicySection {
                sources: sources.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            },
            git_host: "https://github.com".into(),
        }
    }

    #[test]
    fn sources_match_repos_owners_and_prefixes_only() {
        let p = policy(&["anthropics/skills", "acme/*", "file:///srv/git/*"]);
        let gh = |r: &str| format!("https://github.com/{r}.git");
        assert!(p
            .check_source("anthropics/skills", &gh("anthropics/skills"))
            .is_ok());
        assert!(p.check_source("acme/tools", &gh("acme/tools")).is_ok());
        assert!(p.check_source("x", "file:///srv/git/a.git").is_ok());
        let no = p
            .check_source("evil/skills", &gh("evil/skills"))
            .unwrap_err();
        assert!(no.to_string().contains("not in sources"), "{no}");
        // The same owner/repo on another host is another source.
        assert!(p
            .check_source(
                "https://evil.example/anthropics/skills.git",
                "https://evil.example/anthropics/skills.git"
            )
            .is_err());
        assert!(policy(&[])
            .check_source("any/thing", "https://x/y.git")
            .is_ok());
    }
}
