//! The `repairs` table: one structured record per repair proposal of a skill (routing
//! spec §12), applied, rolled back or refused, and the attempts a run has used.

use rusqlite::params;
use serde::Serialize;

use super::{Store, StoreError};

/// What became of a repair proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RepairOutcome {
    /// The patch was written.
    Applied,
    /// Writing failed part-way; the originals were restored.
    RolledBack,
    /// Refused before anything was written (eligibility, scope or budget).
    Refused,
}

impl RepairOutcome {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            RepairOutcome::Applied => "applied",
            RepairOutcome::RolledBack => "rolled_back",
            RepairOutcome::Refused => "refused",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        [Self::Applied, Self::RolledBack, Self::Refused]
            .into_iter()
            .find(|o| o.as_str() == name)
    }
}

/// The structured record of one repair proposal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RepairRecord {
    /// The record's id (`rp_<hex>`).
    pub id: String,
    /// The skill repaired.
    pub skill: String,
    /// The run (route id) the repair belongs to.
    pub run_id: String,
    /// Which attempt of the run, from 1 (0 for a refusal: it used no attempt).
    pub attempt: u32,
    /// The failure being repaired, as the agent identified it.
    pub error_signature: String,
    /// Its root cause.
    pub root_cause: String,
    /// The files the patch names, relative to the skill folder.
    pub patched_files: Vec<String>,
    /// What the patch should change in the next run.
    pub expected_effect: String,
    /// What happened.
    pub outcome: RepairOutcome,
    /// The check that refused it or the step that failed.
    pub check: Option<String>,
    /// Why, in words.
    pub reason: Option<String>,
    /// When, Unix milliseconds.
    pub at: i64,
}

impl Store {
    /// Saves a repair record.
    pub fn record_repair(&self, r: &RepairRecord) -> Result<(), StoreError> {
        let files = serde_json::to_string(&r.patched_files).unwrap_or_else(|_| "[]".into());
        self.conn()
            .execute(
                "INSERT INTO repairs (id, skill, run_id, attempt, error_signature, root_cause, \
                 patched_files, expected_effect, outcome, check_name, reason, at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    r.id,
                    r.skill,
                    r.run_id,
                    r.attempt,
                    r.error_signature,
                    r.root_cause,
                    files,
                    r.expected_effect,
                    r.outcome.as_str(),
                    r.check,
                    r.reason,
                    r.at
                ],
            )
            .map(|_| ())
            .map_err(|source| StoreError::RecordRepair {
                skill: r.skill.clone(),
                source,
            })
    }

    /// The attempts `run_id` has used on `skill`: records applied or rolled back.
    pub fn repair_attempts(&self, skill: &str, run_id: &str) -> Result<u32, StoreError> {
        self.conn()
            .query_row(
                "SELECT COUNT(*) FROM repairs WHERE skill = ?1 AND run_id = ?2 \
                 AND outcome IN ('applied', 'rolled_back')",
                params![skill, run_id],
                |row| row.get(0),
            )
            .map_err(|source| StoreError::ReadRepairs {
                skill: skill.to_owned(),
                source,
            })
    }

    /// The repair records of `skill`, oldest first.
    pub fn repairs_of(&self, skill: &str) -> Result<Vec<RepairRecord>, StoreError> {
        let conn = self.conn();
        let read = || -> rusqlite::Result<Vec<RepairRecord>> {
            let mut stmt = conn.prepare_cached(
                "SELECT id, skill, run_id, attempt, error_signature, root_cause, patched_files, \
                 expected_effect, outcome, check_name, reason, at \
                 FROM repairs WHERE skill = ?1 ORDER BY at, rowid",
            )?;
            let rows = stmt.query_map([skill], |row| {
                let files: String = row.get(6)?;
                let outcome: String = row.get(8)?;
                Ok(RepairRecord {
                    id: row.get(0)?,
                    skill: row.get(1)?,
                    run_id: row.get(2)?,
                    attempt: row.get(3)?,
                    error_signature: row.get(4)?,
                    root_cause: row.get(5)?,
                    patched_files: serde_json::from_str(&files).unwrap_or_default(),
                    expected_effect: row.get(7)?,
                    outcome: RepairOutcome::from_name(&outcome).unwrap_or(RepairOutcome::Refused),
                    check: row.get(9)?,
                    reason: row.get(10)?,
                    at: row.get(11)?,
                })
            })?;
            rows.collect()
        };
        read().map_err(|source| StoreError::ReadRepairs {
            skill: skill.to_owned(),
            source,
        })
    }
}
