//! What may replace an installed skill: no signed → unsigned swap, no rollback to a lower
//! version, no other contents under the same version, and a signed skill stays bound to
//! its publisher: the replacing package must come from the same developer key, or the
//! same publisher name under the same root (or a root it rotated to), unless the operator
//! allows the change ([`PublisherChange::Allow`]).

use std::cmp::Ordering;

use skillbox_certs::trust::TrustStore;
use skillbox_protocol::skill::digest::digest_hex;
use skillbox_protocol::skill::{LockedSkill, Trust};

use super::InstallError;

/// Whether an install may hand an installed signed skill to another publisher
/// (`--allow-publisher-change`, `"allow_publisher_change": true`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PublisherChange {
    /// Refuse a package from another publisher (the default).
    #[default]
    Refuse,
    /// The operator accepts the new publisher.
    Allow,
}

impl PublisherChange {
    /// `Allow` when `allow` is true.
    pub fn allowed(allow: bool) -> Self {
        if allow {
            Self::Allow
        } else {
            Self::Refuse
        }
    }
}

/// Refuses a signed → unsigned swap, a publisher change (unless allowed), a rollback, and
/// the same version with other contents. `store` is the trust store the new package was
/// verified against (signed packages), for root rotation links.
pub(crate) fn check_replace(
    name: &str,
    old: &LockedSkill,
    new: &LockedSkill,
    offered: Option<&semver::Version>,
    store: Option<&TrustStore>,
    publisher_change: PublisherChange,
) -> Result<(), InstallError> {
    if old.trust == Trust::Signed && new.trust == Trust::Local {
        return Err(InstallError::TrustDowngrade {
            name: name.to_string(),
        });
    }
    if publisher_change == PublisherChange::Refuse && !same_publisher(old, new, store) {
        return Err(InstallError::PublisherChange {
            name: name.to_string(),
            installed: describe(old),
            offered: describe(new),
        });
    }
    let installed = old
        .version
        .as_deref()
        .and_then(|v| semver::Version::parse(v).ok());
    match (installed, offered) {
        (Some(installed), Some(offered)) => match offered.cmp_precedence(&installed) {
            Ordering::Less => Err(InstallError::Rollback {
                name: name.to_string(),
                installed: installed.to_string(),
                offered: offered.to_string(),
            }),
            // An unsigned skill added from git is identified by its commit: its author
            // need not bump the version for the update to apply.
            Ordering::Equal
                if digest_hex(&old.digest) != digest_hex(&new.digest)
                    && !(new.trust == Trust::Local && new.origin.is_some()) =>
            {
                Err(InstallError::SameVersion {
                    name: name.to_string(),
                    version: offered.to_string(),
                    installed: old.digest.clone(),
                    offered: new.digest.clone(),
                })
            }
            _ => Ok(()),
        },
        (Some(installed), None) => Err(InstallError::Rollback {
            name: name.to_string(),
            installed: installed.to_string(),
            offered: "(no version)".into(),
        }),
        _ => Ok(()),
    }
}

/// Whether `new` comes from the publisher `old` is bound to. Only a signed installed
/// skill is bound; an unsigned one has no publisher to keep.
fn same_publisher(old: &LockedSkill, new: &LockedSkill, store: Option<&TrustStore>) -> bool {
    if old.trust != Trust::Signed {
        return true;
    }
    if old.publisher_key.is_some() && old.publisher_key == new.publisher_key {
        return true;
    }
    let same_name = old.publisher.is_some() && old.publisher == new.publisher;
    let same_root = match (&old.root_fingerprint, &new.root_fingerprint) {
        (Some(a), Some(b)) => a == b || store.is_some_and(|s| s.same_root_lineage(a, b)),
        _ => false,
    };
    same_name && same_root
}

/// A publisher as a refusal names it: `"acme" (key 1a2b…, root 3c4d…)`.
fn describe(entry: &LockedSkill) -> String {
    let short = |v: &Option<String>| {
        v.as_deref()
            .map(|s| s.get(..16).unwrap_or(s).to_string())
            .unwrap_or_else(|| "unknown".into())
    };
    format!(
        "{:?} (key {}, root {})",
        entry.publisher.as_deref().unwrap_or("unknown"),
        short(&entry.publisher_key),
        short(&entry.root_fingerprint)
    )
}
