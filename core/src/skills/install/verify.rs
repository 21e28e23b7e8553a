//! Re-verification of installed skills against the trust store as it is now: for
//! `skillbox skill verify --all` (which also lists skills that hang on a root being
//! retired or a certificate going away), and for the core's catalog after a skills or
//! trust reload, where a skill that no longer verifies is disabled with the reason (a kill
//! list) instead of being offered.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::SystemTime;

use serde::Serialize;
use skillbox_certs::trust::{TrustStore, VerifyError};
use skillbox_protocol::skill::digest::digest_hex;
use skillbox_protocol::skill::{
    load_skill, package_digest, Catalog, InstallLock, LoadOutcome, LockedSkill, Trust, Withheld,
};

use super::TrustPolicy;

/// The verdict on one installed skill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Verifies, and nothing it depends on is going away.
    Ok,
    /// Verifies today, but its chain ends at a root that is being retired (re-sign it).
    AtRisk,
    /// Does not verify: it would be disabled.
    Failed,
}

/// One installed skill, re-verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillReport {
    /// The skill.
    pub name: String,
    /// Its locked version.
    pub version: Option<String>,
    /// `signed` or `local`.
    pub trust: Trust,
    /// The verdict.
    pub status: Status,
    /// The failed check (`digest`, `revocation`, `retired_root`, `changed`, …).
    pub check: Option<String>,
    /// Why it failed or is at risk, and what to do.
    pub reason: Option<String>,
    /// The publisher (signed skills).
    pub publisher: Option<String>,
    /// The root its chain ends at (signed skills).
    pub root_fingerprint: Option<String>,
}

/// Re-verifies every skill in the install lock of `policy.skills_root`, sorted by name.
/// `store` is the trust store as loaded now (an error fails every signed skill).
pub fn verify_installed(
    policy: &TrustPolicy,
    lock: &InstallLock,
    store: Result<&TrustStore, &str>,
    now: SystemTime,
) -> Vec<SkillReport> {
    lock.skills
        .iter()
        .map(|(name, entry)| {
            let dir = policy.skills_root.join(name);
            let mut report = SkillReport {
                name: name.clone(),
                version: entry.version.clone(),
                trust: entry.trust,
                status: Status::Ok,
                check: None,
                reason: None,
                publisher: entry.publisher.clone(),
                root_fingerprint: entry.root_fingerprint.clone(),
            };
            match check_one(policy, &dir, name, entry, store, now) {
                Ok(None) => {}
                Ok(Some(risk)) => {
                    report.status = Status::AtRisk;
                    report.check = Some("retiring_root".into());
                    report.reason = Some(risk);
                }
                Err((check, reason)) => {
                    report.status = Status::Failed;
                    report.check = Some(check.into());
                    report.reason = Some(reason);
                }
            }
            report
        })
        .collect()
}

/// `Ok(None)`: fine; `Ok(Some(why))`: fine but at risk; `Err((check, why))`: fails.
fn check_one(
    policy: &TrustPolicy,
    dir: &Path,
    name: &str,
    entry: &LockedSkill,
    store: Result<&TrustStore, &str>,
    now: SystemTime,
) -> Result<Option<String>, (&'static str, String)> {
    if !dir.is_dir() {
        return Err((
            "missing",
            format!(
                "{} is gone; reinstall the skill or remove it from the lock",
                dir.display()
            ),
        ));
    }
    let changed = |what: String| {
        let signed = if entry.trust == Trust::Signed {
            "signed "
        } else {
            ""
        };
        (
            "changed",
            format!(
                "files changed since install: the files of {name} no longer match the {signed}digest it was installed with ({what}); a file was changed, added or removed in {}; reinstall it from its signed package (`skillbox skill install PACKAGE`) or remove it (`DELETE /v1/skills/{name}`)",
                dir.display()
            ),
        )
    };
    let digest = package_digest(dir).map_err(|e| changed(e.to_string()))?;
    if digest.hex != digest_hex(&entry.digest) {
        return Err(changed(format!(
            "installed {}, now {}",
            entry.digest,
            digest.prefixed()
        )));
    }
    match entry.trust {
        Trust::Local if policy.require_signed => Err((
            "unsigned",
            "installed unsigned, and [trust] require_signed = true now; install a signed package"
                .into(),
        )),
        Trust::Local => Ok(None),
        Trust::Signed => {
            let store = store.map_err(|e| ("trust_store", e.to_string()))?;
            let (manifest_name, version) = match load_skill(dir) {
                LoadOutcome::Loaded(s) => (s.name, s.version.unwrap_or_default()),
                _ => (name.to_string(), entry.version.clone().unwrap_or_default()),
            };
            let ok = store
                .verify_package(dir, &manifest_name, &version, now)
                .map_err(|e: VerifyError| (e.check(), e.to_string()))?;
            let retiring: BTreeSet<String> = store
                .roots()
                .into_iter()
                .filter(|r| r.retiring)
                .map(|r| r.fingerprint)
                .collect();
            if ok.root_retiring || retiring.contains(&ok.root_fingerprint) {
                return Ok(Some(format!(
                    "its chain ends at root {}, which has a successor and is being retired; ask {} to re-sign it under the new root before the old one is retired",
                    ok.root_fingerprint, ok.publisher
                )));
            }
            Ok(None)
        }
    }
}

/// Applies the trust policy to a freshly discovered catalog: a skill in the install lock
/// stays only while it re-verifies; a skill not in the lock stays (as `local`) only when
/// `require_signed` is off. The others move to `catalog.withheld` (the kill list) with the reason. Returns
/// the names disabled.
pub fn enforce(catalog: &mut Catalog, policy: &TrustPolicy, now: SystemTime) -> Vec<String> {
    let lock = InstallLock::read(&policy.skills_root);
    let store = TrustStore::load(&policy.trust_dir);
    let store_err = store.as_ref().err().map(ToString::to_string);
    let store_ref = match (&store, &store_err) {
        (Ok(s), _) => Ok(s),
        (Err(_), Some(e)) => Err(e.as_str()),
        (Err(_), None) => Err("the trust store did not load"),
    };
    let reports = match &lock {
        Ok(Some(lock)) => verify_installed(policy, lock, store_ref, now),
        _ => Vec::new(),
    };
    let mut disabled = Vec::new();
    let skills = std::mem::take(&mut catalog.skills);
    for skill in skills {
        let reason = match &lock {
            Err(e) => Some(format!("{e}; nothing is offered until it is repaired")),
            Ok(lock) => {
                let locked = lock.as_ref().and_then(|l| l.get(&skill.name));
                let in_place = skill.dir == policy.skills_root.join(&skill.name);
                match locked {
                    Some(_) if !in_place => Some(format!(
                        "the name {} belongs to an installed skill; this folder is not it",
                        skill.name
                    )),
                    Some(_) => reports
                        .iter()
                        .find(|r| r.name == skill.name && r.status == Status::Failed)
                        .map(|r| {
                            let check = r.check.as_deref().unwrap_or("verify");
                            let reason = r.reason.as_deref().unwrap_or("does not verify");
                            // Verifier messages already start with their check's name.
                            if reason.starts_with(&format!("{check}:")) {
                                reason.to_string()
                            } else {
                                format!("{check}: {reason}")
                            }
                        }),
                    None if policy.require_signed => Some(
                        "not installed with `skillbox skill install` and [trust] require_signed = true"
                            .into(),
                    ),
                    None => None,
                }
            }
        };
        match reason {
            None => catalog.skills.push(skill),
            Some(reason) => {
                tracing::warn!(skill = %skill.name, %reason, "skill disabled by the trust policy");
                disabled.push(skill.name.clone());
                catalog.withheld.push(Withheld {
                    name: skill.name,
                    dir: skill.dir,
                    reason,
                });
            }
        }
    }
    disabled
}

/// The trust label of each installed skill (`signed`/`local`); skills not in the lock
/// are `local`.
pub fn trust_label(lock: Option<&InstallLock>, name: &str) -> &'static str {
    lock.and_then(|l| l.get(name))
        .map_or("local", |e| e.trust.label())
}
