//! The `approvals` table: one row per approval asked for a `write`/`sign` tool call, and
//! its life: pending → approved | denied | expired, approved → used.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSqlOutput, Type, ValueRef};
use rusqlite::{params, OptionalExtension, Row, ToSql, TransactionBehavior};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use skillbox_protocol::skill::Security;

use super::{unix_ms_now, Store, StoreError};

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    /// Waiting for an operator.
    Pending,
    /// Approved and not yet used: the next identical call may run once.
    Approved,
    /// Denied by an operator.
    Denied,
    /// Nobody decided in time.
    Expired,
    /// Approved and consumed by a call.
    Used,
}

impl ApprovalStatus {
    /// The status as stored and shown: `pending`, `approved`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Denied => "denied",
            ApprovalStatus::Expired => "expired",
            ApprovalStatus::Used => "used",
        }
    }

    /// Parses [`ApprovalStatus::as_str`]'s names.
    pub fn from_name(name: &str) -> Option<ApprovalStatus> {
        [
            ApprovalStatus::Pending,
            ApprovalStatus::Approved,
            ApprovalStatus::Denied,
            ApprovalStatus::Expired,
            ApprovalStatus::Used,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }
}

impl std::fmt::Display for ApprovalStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ToSql for ApprovalStatus {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for ApprovalStatus {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let name = value.as_str()?;
        ApprovalStatus::from_name(name).ok_or_else(|| {
            FromSqlError::Other(Box::new(UnknownName {
                what: "approval status",
                name: name.to_owned(),
            }))
        })
    }
}

/// An operator's decision on a pending approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Let the call run (once).
    Approve,
    /// Refuse the call.
    Deny,
}

impl Decision {
    /// The status a pending approval takes on this decision.
    pub fn status(self) -> ApprovalStatus {
        match self {
            Decision::Approve => ApprovalStatus::Approved,
            Decision::Deny => ApprovalStatus::Denied,
        }
    }
}

/// One approval, as stored and as listed to operators.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalRecord {
    /// Random id, 32 hex digits.
    pub id: String,
    /// The skill whose tool is called.
    pub skill: String,
    /// The tool.
    pub tool: String,
    /// Hex SHA-256 of the canonical JSON of `args`; identical calls share it.
    pub args_hash: String,
    /// The call's arguments, shown to the operator who decides.
    pub args: Value,
    /// The tool's declared security.
    pub security: Security,
    /// Where the approval stands.
    pub status: ApprovalStatus,
    /// When it was asked for, Unix milliseconds.
    pub created_at: i64,
    /// When it was decided or expired, Unix milliseconds.
    pub decided_at: Option<i64>,
    /// The operator's reason, if one was given.
    pub reason: Option<String>,
    /// Who asked for the call: a bot's name, or `operator`. Only a call of the same
    /// caller can use the approval.
    pub requested_by: String,
    /// The context the call was made in, if any.
    pub context_id: Option<String>,
    /// Who decided: `operator`, or the bot that relayed its user's confirmation.
    pub decided_by: Option<String>,
}

/// A stored name this build does not know.
#[derive(Debug, thiserror::Error)]
#[error("unknown {what} {name:?} in the state database")]
struct UnknownName {
    what: &'static str,
    name: String,
}

fn security_name(security: Security) -> &'static str {
    match security {
        Security::Read => "read",
        Security::Write => "write",
        Security::Sign => "sign",
    }
}

fn security_from_name(name: &str) -> Option<Security> {
    [Security::Read, Security::Write, Security::Sign]
        .into_iter()
        .find(|s| security_name(*s) == name)
}

const COLUMNS: &str = "id, skill, tool, args_hash, args_json, security, status, created_at, \
     decided_at, reason, requested_by, context_id, decided_by";

fn from_row(row: &Row<'_>) -> rusqlite::Result<ApprovalRecord> {
    let args_json: String = row.get(4)?;
    let args = serde_json::from_str(&args_json)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(4, Type::Text, Box::new(e)))?;
    let security: String = row.get(5)?;
    let security = security_from_name(&security).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            5,
            Type::Text,
            Box::new(UnknownName {
                what: "security",
                name: security,
            }),
        )
    })?;
    Ok(ApprovalRecord {
        id: row.get(0)?,
        skill: row.get(1)?,
        tool: row.get(2)?,
        args_hash: row.get(3)?,
        args,
        security,
        status: row.get(6)?,
        created_at: row.get(7)?,
        decided_at: row.get(8)?,
        reason: row.get(9)?,
        requested_by: row.get(10)?,
        context_id: row.get(11)?,
        decided_by: row.get(12)?,
    })
}

fn select_by_id(conn: &rusqlite::Connection, id: &str) -> rusqlite::Result<Option<ApprovalRecord>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM approvals WHERE id = ?1"),
        [id],
        from_row,
    )
    .optional()
}

impl Store {
    /// Saves a new approval (normally `pending`).
    pub fn insert_approval(&self, record: &ApprovalRecord) -> Result<(), StoreError> {
        self.conn()
            .execute(
                &format!("INSERT INTO approvals ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"),
                params![
                    record.id,
                    record.skill,
                    record.tool,
                    record.args_hash,
                    record.args.to_string(),
                    security_name(record.security),
                    record.status,
                    record.created_at,
                    record.decided_at,
                    record.reason,
                    record.requested_by,
                    record.context_id,
                    record.decided_by,
                ],
            )
            .map(drop)
            .map_err(|source| StoreError::InsertApproval {
                id: record.id.clone(),
                source,
            })
    }

    /// The approval with this id, if any.
    pub fn get_approval(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        select_by_id(&self.conn(), id).map_err(|source| StoreError::ReadApprovals { source })
    }

    /// Approvals, oldest first, all or those with one status.
    pub fn list_approvals(
        &self,
        status: Option<ApprovalStatus>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        let conn = self.conn();
        let read = || -> rusqlite::Result<Vec<ApprovalRecord>> {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM approvals WHERE ?1 IS NULL OR status = ?1 \
                 ORDER BY created_at, id"
            ))?;
            let rows = stmt.query_map([status], from_row)?;
            rows.collect()
        };
        read().map_err(|source| StoreError::ReadApprovals { source })
    }

    /// Decides a pending approval as the operator. Anything but `pending` is refused with
    /// [`StoreError::NotPending`], which carries the current status.
    pub fn decide_approval(
        &self,
        id: &str,
        decision: Decision,
        reason: Option<&str>,
    ) -> Result<ApprovalRecord, StoreError> {
        self.decide_approval_by(id, decision, reason, super::OPERATOR)
    }

    /// [`Store::decide_approval`], recording who decided (`operator` or a bot's name).
    pub fn decide_approval_by(
        &self,
        id: &str,
        decision: Decision,
        reason: Option<&str>,
        decided_by: &str,
    ) -> Result<ApprovalRecord, StoreError> {
        self.transition(
            id,
            ApprovalStatus::Pending,
            decision.status(),
            Some(unix_ms_now()),
            reason,
            Some(decided_by),
        )
    }

    /// Marks a pending approval expired (nobody decided in time).
    pub fn expire_approval(&self, id: &str) -> Result<ApprovalRecord, StoreError> {
        self.transition(
            id,
            ApprovalStatus::Pending,
            ApprovalStatus::Expired,
            Some(unix_ms_now()),
            None,
            None,
        )
    }

    /// The oldest approved, unused approval of this exact call (skill, tool, args hash)
    /// asked for by `requested_by`.
    pub fn find_usable_approval(
        &self,
        skill: &str,
        tool: &str,
        args_hash: &str,
        requested_by: &str,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        find_usable(&self.conn(), skill, tool, args_hash, requested_by)
            .map_err(|source| StoreError::ReadApprovals { source })
    }

    /// Consumes an approved approval (approved → used). Anything else is refused with
    /// [`StoreError::NotApproved`], so two calls cannot use one approval.
    pub fn mark_used(&self, id: &str) -> Result<ApprovalRecord, StoreError> {
        self.transition(
            id,
            ApprovalStatus::Approved,
            ApprovalStatus::Used,
            None,
            None,
            None,
        )
    }

    /// [`Store::find_usable_approval`] and [`Store::mark_used`] in one transaction: the
    /// approval returned (now `used`) was taken by this caller only. An approval given
    /// for one bot's call is never used by another's identical call.
    pub fn claim_usable_approval(
        &self,
        skill: &str,
        tool: &str,
        args_hash: &str,
        requested_by: &str,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        let mut conn = self.conn();
        let mut claim = || -> rusqlite::Result<Option<ApprovalRecord>> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let Some(mut record) = find_usable(&tx, skill, tool, args_hash, requested_by)? else {
                return Ok(None);
            };
            tx.execute(
                "UPDATE approvals SET status = ?2 WHERE id = ?1",
                params![record.id, ApprovalStatus::Used],
            )?;
            tx.commit()?;
            record.status = ApprovalStatus::Used;
            Ok(Some(record))
        };
        claim().map_err(|source| StoreError::ClaimApproval {
            skill: skill.to_owned(),
            tool: tool.to_owned(),
            source,
        })
    }

    /// Moves one approval from `from` to `to` in one transaction, or says why not.
    fn transition(
        &self,
        id: &str,
        from: ApprovalStatus,
        to: ApprovalStatus,
        decided_at: Option<i64>,
        reason: Option<&str>,
        decided_by: Option<&str>,
    ) -> Result<ApprovalRecord, StoreError> {
        let mut conn = self.conn();
        let failed = |source| StoreError::UpdateApproval {
            id: id.to_owned(),
            to,
            source,
        };
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(failed)?;
        let Some(mut record) = select_by_id(&tx, id).map_err(failed)? else {
            return Err(StoreError::ApprovalNotFound { id: id.to_owned() });
        };
        if record.status != from {
            let status = record.status;
            let id = id.to_owned();
            return Err(match from {
                ApprovalStatus::Approved => StoreError::NotApproved { id, status },
                _ => StoreError::NotPending { id, status },
            });
        }
        record.status = to;
        record.decided_at = decided_at.or(record.decided_at);
        record.reason = reason.map(str::to_owned).or(record.reason);
        record.decided_by = decided_by.map(str::to_owned).or(record.decided_by);
        tx.execute(
            "UPDATE approvals SET status = ?2, decided_at = ?3, reason = ?4, decided_by = ?5 \
             WHERE id = ?1",
            params![id, to, record.decided_at, record.reason, record.decided_by],
        )
        .map_err(failed)?;
        tx.commit().map_err(failed)?;
        Ok(record)
    }
}

fn find_usable(
    conn: &rusqlite::Connection,
    skill: &str,
    tool: &str,
    args_hash: &str,
    requested_by: &str,
) -> rusqlite::Result<Option<ApprovalRecord>> {
    conn.query_row(
        &format!(
            "SELECT {COLUMNS} FROM approvals \
             WHERE skill = ?1 AND tool = ?2 AND args_hash = ?3 AND status = 'approved' \
               AND requested_by = ?4 \
             ORDER BY decided_at, id LIMIT 1"
        ),
        params![skill, tool, args_hash, requested_by],
        from_row,
    )
    .optional()
}

#[cfg(test)]
mod tests;
