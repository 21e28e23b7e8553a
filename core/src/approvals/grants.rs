//! Time-boxed allowances against approval fatigue: "allow this tool for N minutes", set by
//! an operator in the console (docs/console.md) and consulted by the approve stage before
//! it asks. Each allowance is bounded (at most `[approvals] allow_max_minutes`, at most
//! `allow_max_entries` at once), listed in the console, and revocable there.
//!
//! Only `write` tools can be allowed: a `sign` tool asks at every signature, because the
//! operator must see each payload. Nothing but the console's signed-in, CSRF-checked form
//! writes an allowance: there is no REST route for it, and no tool argument or bot request
//! reaches [`Grants::allow`].

use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::Serialize;
use skillbox_protocol::skill::Security;

use crate::random::{self, SystemSource};

pub use crate::state::config::approvals::{DEFAULT_MAX_ENTRIES, DEFAULT_MAX_MINUTES};

/// The bounds of allowances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrantLimits {
    /// Longest allowance, in minutes.
    pub max_minutes: u64,
    /// Allowances in force at once.
    pub max_entries: usize,
}

impl Default for GrantLimits {
    fn default() -> Self {
        Self {
            max_minutes: DEFAULT_MAX_MINUTES,
            max_entries: DEFAULT_MAX_ENTRIES,
        }
    }
}

/// One allowance: calls of `skill:tool` run without asking until `until`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    /// Its id (for revocation).
    pub id: String,
    /// The skill.
    pub skill: String,
    /// The tool.
    pub tool: String,
    /// When it was set, Unix milliseconds.
    pub created_at: i64,
    /// When it ends, Unix milliseconds.
    pub until: i64,
}

/// Why an allowance was not set or revoked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// Zero minutes, or more than the limit.
    #[error("an allowance lasts 1 to {max} minutes, not {asked}; raise [approvals] allow_max_minutes in skillbox.toml for longer ones")]
    Minutes {
        /// What was asked.
        asked: u64,
        /// `[approvals] allow_max_minutes`.
        max: u64,
    },
    /// As many allowances as allowed are in force.
    #[error("{max} allowances are in force already (the [approvals] allow_max_entries limit); revoke one in the console first")]
    Full {
        /// `[approvals] allow_max_entries`.
        max: usize,
    },
    /// Only write tools can be allowed.
    #[error("{skill}:{tool} is a {security} tool; only write tools can be allowed for a while (every signature is shown to the operator)")]
    NotWrite {
        /// The skill.
        skill: String,
        /// The tool.
        tool: String,
        /// Its security level.
        security: &'static str,
    },
    /// No allowance has this id (it expired or was revoked).
    #[error("no allowance {id} is in force; it expired or was revoked")]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// The operating system's random source failed.
    #[error(transparent)]
    Random(#[from] random::RandomError),
}

/// Why [`Grants::allow_after`] wrote nothing: the allowance was refused (its decision was
/// not tried), or the decision it goes with failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllowError<E> {
    /// The allowance itself was refused.
    #[error(transparent)]
    Refused(GrantError),
    /// The decision failed; no allowance was written.
    #[error(transparent)]
    Decision(E),
}

/// The allowances in force.
#[derive(Debug)]
pub struct Grants {
    limits: GrantLimits,
    entries: Mutex<Vec<Grant>>,
}

impl Grants {
    /// No allowances, under `limits`.
    pub fn new(limits: GrantLimits) -> Self {
        Self {
            limits,
            entries: Mutex::new(Vec::new()),
        }
    }

    /// The bounds.
    pub fn limits(&self) -> GrantLimits {
        self.limits
    }

    fn lock(&self, now_ms: i64) -> MutexGuard<'_, Vec<Grant>> {
        // Each operation leaves the list consistent: a panic elsewhere cannot tear it.
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|g| g.until > now_ms);
        entries
    }

    /// Allows `skill:tool` (a tool of `security`) for `minutes` from `now_ms`. An
    /// allowance for the same tool is replaced, not added.
    pub fn allow(
        &self,
        skill: &str,
        tool: &str,
        security: Security,
        minutes: u64,
        now_ms: i64,
    ) -> Result<Grant, GrantError> {
        self.allow_after::<(), std::convert::Infallible>(
            skill,
            tool,
            security,
            minutes,
            now_ms,
            || Ok(()),
        )
        .map(|(grant, ())| grant)
        .map_err(|e| match e {
            AllowError::Refused(e) => e,
            AllowError::Decision(never) => match never {},
        })
    }

    /// [`Grants::allow`] that first runs `decide` (the approval the allowance goes with)
    /// and writes the allowance only when it succeeds, all under the lock of the list: the
    /// bounds are checked before `decide` runs (a refused allowance decides nothing), and a
    /// failed decision (an approval already decided, say) writes nothing.
    pub fn allow_after<T, E>(
        &self,
        skill: &str,
        tool: &str,
        security: Security,
        minutes: u64,
        now_ms: i64,
        decide: impl FnOnce() -> Result<T, E>,
    ) -> Result<(Grant, T), AllowError<E>> {
        if security != Security::Write {
            return Err(AllowError::Refused(GrantError::NotWrite {
                skill: skill.to_string(),
                tool: tool.to_string(),
                security: security_name(security),
            }));
        }
        if minutes == 0 || minutes > self.limits.max_minutes {
            return Err(AllowError::Refused(GrantError::Minutes {
                asked: minutes,
                max: self.limits.max_minutes,
            }));
        }
        let mut entries = self.lock(now_ms);
        let replaced = entries.iter().any(|g| g.skill == skill && g.tool == tool);
        if !replaced && entries.len() >= self.limits.max_entries {
            return Err(AllowError::Refused(GrantError::Full {
                max: self.limits.max_entries,
            }));
        }
        let span = i64::try_from(minutes.saturating_mul(60_000)).unwrap_or(i64::MAX);
        let grant = Grant {
            id: format!(
                "al_{}",
                random::hex(&SystemSource::default(), 8, "allowance id")
                    .map_err(|e| AllowError::Refused(e.into()))?
            ),
            skill: skill.to_string(),
            tool: tool.to_string(),
            created_at: now_ms,
            until: now_ms.saturating_add(span),
        };
        let decided = decide().map_err(AllowError::Decision)?;
        entries.retain(|g| !(g.skill == skill && g.tool == tool));
        entries.push(grant.clone());
        Ok((grant, decided))
    }

    /// Ends allowance `id`.
    pub fn revoke(&self, id: &str, now_ms: i64) -> Result<Grant, GrantError> {
        let mut entries = self.lock(now_ms);
        let at = entries
            .iter()
            .position(|g| g.id == id)
            .ok_or_else(|| GrantError::NotFound { id: id.to_string() })?;
        Ok(entries.remove(at))
    }

    /// The allowances in force at `now_ms`, oldest first.
    pub fn list(&self, now_ms: i64) -> Vec<Grant> {
        self.lock(now_ms).clone()
    }

    /// The allowance covering `skill:tool` at `now_ms`, if any.
    pub fn covering(&self, skill: &str, tool: &str, now_ms: i64) -> Option<Grant> {
        self.lock(now_ms)
            .iter()
            .find(|g| g.skill == skill && g.tool == tool)
            .cloned()
    }
}

fn security_name(security: Security) -> &'static str {
    match security {
        Security::Read => "read",
        Security::Write => "write",
        Security::Sign => "sign",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_000;

    fn grants(max_minutes: u64, max_entries: usize) -> Grants {
        Grants::new(GrantLimits {
            max_minutes,
            max_entries,
        })
    }

    #[test]
    fn allowance_covers_its_tool_until_it_ends() {
        let g = grants(60, 4);
        let grant = g.allow("notes", "add", Security::Write, 10, NOW).unwrap();
        assert_eq!(grant.until, NOW + 600_000);
        assert_eq!(g.covering("notes", "add", NOW + 599_999), Some(grant));
        assert_eq!(g.covering("notes", "remove", NOW), None);
        assert_eq!(g.covering("notes", "add", NOW + 600_000), None);
        assert!(g.list(NOW + 600_000).is_empty());
    }

    #[test]
    fn allowance_refuses_minutes_over_the_limit_and_zero() {
        let g = grants(30, 4);
        assert_eq!(
            g.allow("notes", "add", Security::Write, 31, NOW),
            Err(GrantError::Minutes { asked: 31, max: 30 })
        );
        let e = g
            .allow("notes", "add", Security::Write, 0, NOW)
            .unwrap_err();
        assert!(e.to_string().contains("allow_max_minutes"), "{e}");
        assert!(g.list(NOW).is_empty());
        g.allow("notes", "add", Security::Write, 30, NOW).unwrap();
    }

    #[test]
    fn allowance_refuses_past_max_entries_until_one_is_revoked_or_expires() {
        let g = grants(60, 2);
        let first = g.allow("a", "t", Security::Write, 1, NOW).unwrap();
        g.allow("b", "t", Security::Write, 5, NOW).unwrap();
        let e = g.allow("c", "t", Security::Write, 5, NOW).unwrap_err();
        assert_eq!(e, GrantError::Full { max: 2 });
        assert!(e.to_string().contains("allow_max_entries"), "{e}");
        // Renewing a tool that has one replaces it rather than adding.
        g.allow("b", "t", Security::Write, 10, NOW).unwrap();
        assert_eq!(g.list(NOW).len(), 2);
        g.revoke(&first.id, NOW).unwrap();
        g.allow("c", "t", Security::Write, 5, NOW).unwrap();
        // An expired one frees its place too.
        let g = grants(60, 1);
        g.allow("a", "t", Security::Write, 1, NOW).unwrap();
        g.allow("b", "t", Security::Write, 1, NOW + 60_000).unwrap();
    }

    #[test]
    fn allowance_refuses_sign_and_read_tools() {
        let g = grants(60, 4);
        let e = g
            .allow("wallet", "pay", Security::Sign, 5, NOW)
            .unwrap_err();
        assert!(
            matches!(
                e,
                GrantError::NotWrite {
                    security: "sign",
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("every signature"), "{e}");
        assert!(g.allow("notes", "list", Security::Read, 5, NOW).is_err());
        assert!(g.list(NOW).is_empty());
    }

    #[test]
    fn allowance_whose_decision_fails_is_not_written() {
        let g = grants(60, 4);
        let refused: Result<(Grant, ()), _> =
            g.allow_after("notes", "add", Security::Write, 5, NOW, || {
                Err("approval ap_1 is already denied")
            });
        assert_eq!(
            refused.unwrap_err(),
            AllowError::Decision("approval ap_1 is already denied")
        );
        assert!(g.list(NOW).is_empty());
        assert_eq!(g.covering("notes", "add", NOW), None);
    }

    #[test]
    fn allowance_refused_by_its_bounds_never_runs_its_decision() {
        let g = grants(30, 1);
        g.allow("a", "t", Security::Write, 5, NOW).unwrap();
        for (tool, security, minutes) in [
            ("t", Security::Write, 31),
            ("t", Security::Sign, 5),
            ("other", Security::Write, 5),
        ] {
            let mut ran = false;
            let r = g.allow_after("b", tool, security, minutes, NOW, || {
                ran = true;
                Ok::<(), ()>(())
            });
            assert!(matches!(r, Err(AllowError::Refused(_))), "{r:?}");
            assert!(!ran, "{tool} {minutes}: the decision ran");
        }
        // Renewing the one in force is not over the limit.
        let (renewed, ()) = g
            .allow_after("a", "t", Security::Write, 10, NOW, || Ok::<(), ()>(()))
            .unwrap();
        assert_eq!(g.list(NOW), vec![renewed]);
    }

    #[test]
    fn revoking_an_unknown_allowance_says_so() {
        let g = grants(60, 4);
        let e = g.revoke("al_nope", NOW).unwrap_err();
        assert_eq!(
            e,
            GrantError::NotFound {
                id: "al_nope".into()
            }
        );
    }
}
