//! The `calls` and `skill_stats` tables: one row per finished tool call, and per skill the
//! running success and failure counts that the router's scoring reads.

use rusqlite::{params, OptionalExtension, Row};
use serde::{Deserialize, Serialize};
use skillbox_protocol::result::ErrorKind;

use super::cached_tx::CachedTx;
use super::egress::{CallEgress, EgressEntry};
use super::{Store, StoreError};

/// One finished tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The call id the core issued.
    pub call_id: String,
    /// The skill called.
    pub skill: String,
    /// The tool called.
    pub tool: String,
    /// When the call started, Unix milliseconds.
    pub started_at: i64,
    /// How long it took.
    pub duration_ms: u64,
    /// Whether the tool succeeded.
    pub success: bool,
    /// Why it failed (docs/http-api.md), when it did.
    pub error_kind: Option<ErrorKind>,
    /// Who asked: a bot's name, or `operator`.
    #[serde(default = "operator_name")]
    pub caller: String,
    /// The connections its programs made through the egress proxy (docs/sandbox.md), the
    /// first [`super::MAX_EGRESS_LISTED`] of them.
    #[serde(default)]
    pub egress: Vec<EgressEntry>,
    /// Connections past those listed, counted only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub egress_unlisted: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl CallRecord {
    /// The egress record as stored.
    fn egress_column(&self) -> Option<String> {
        CallEgress {
            connections: self.egress.clone(),
            unlisted: self.egress_unlisted,
        }
        .to_column()
    }
}

fn operator_name() -> String {
    super::OPERATOR.to_string()
}

/// A skill's running counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillStats {
    /// The skill.
    pub skill: String,
    /// Calls that succeeded.
    pub successes: u64,
    /// Calls that failed.
    pub failures: u64,
    /// Start of the latest call, Unix milliseconds.
    pub last_called_at: i64,
}

fn error_kind_from_name(name: &str) -> Option<ErrorKind> {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
}

fn stats_from_row(row: &Row<'_>) -> rusqlite::Result<SkillStats> {
    Ok(SkillStats {
        skill: row.get(0)?,
        successes: row.get(1)?,
        failures: row.get(2)?,
        last_called_at: row.get(3)?,
    })
}

const STATS_COLUMNS: &str = "skill, successes, failures, last_called_at";

impl Store {
    /// Records a finished call: its skill's stats and the call row, in one transaction, so
    /// either both are written or neither (a repeated call id writes nothing).
    pub fn record_call(&self, call: &CallRecord) -> Result<(), StoreError> {
        self.record_calls(std::slice::from_ref(call))
            .into_iter()
            .next()
            .unwrap_or(Ok(()))
    }

    /// Records `calls` in one transaction (one WAL commit for the batch, statements
    /// prepared once). When one of them fails (a repeated call id), the batch is rolled back
    /// and each call is written in a transaction of its own, so the others still land.
    /// One result per call, in order.
    pub fn record_calls(&self, calls: &[CallRecord]) -> Vec<Result<(), StoreError>> {
        let conn = self.conn();
        let batch = (|| -> rusqlite::Result<()> {
            let tx = CachedTx::immediate(&conn)?;
            for call in calls {
                insert_call(&tx, call)?;
            }
            tx.commit()
        })();
        if batch.is_ok() {
            return calls.iter().map(|_| Ok(())).collect();
        }
        calls
            .iter()
            .map(|call| {
                (|| -> rusqlite::Result<()> {
                    let tx = CachedTx::immediate(&conn)?;
                    insert_call(&tx, call)?;
                    tx.commit()
                })()
                .map_err(|source| StoreError::RecordCall {
                    call_id: call.call_id.clone(),
                    source,
                })
            })
            .collect()
    }

    /// The call with this id, if recorded.
    pub fn get_call(&self, call_id: &str) -> Result<Option<CallRecord>, StoreError> {
        self.flush_calls();
        self.conn()
            .query_row(
                "SELECT call_id, skill, tool, started_at, duration_ms, success, error_kind, \
                 caller, egress_json FROM calls WHERE call_id = ?1",
                [call_id],
                |row| {
                    let error_kind: Option<String> = row.get(6)?;
                    let egress = CallEgress::from_column(row.get(8)?);
                    Ok(CallRecord {
                        call_id: row.get(0)?,
                        skill: row.get(1)?,
                        tool: row.get(2)?,
                        started_at: row.get(3)?,
                        duration_ms: row.get(4)?,
                        success: row.get(5)?,
                        // A kind this build does not know reads as none rather than
                        // hiding the call.
                        error_kind: error_kind.as_deref().and_then(error_kind_from_name),
                        caller: row.get(7)?,
                        egress: egress.connections,
                        egress_unlisted: egress.unlisted,
                    })
                },
            )
            .optional()
            .map_err(|source| StoreError::ReadCalls { source })
    }

    /// One skill's counts, if it was ever called.
    pub fn skill_stats(&self, skill: &str) -> Result<Option<SkillStats>, StoreError> {
        self.flush_calls();
        self.conn()
            .query_row(
                &format!("SELECT {STATS_COLUMNS} FROM skill_stats WHERE skill = ?1"),
                [skill],
                stats_from_row,
            )
            .optional()
            .map_err(|source| StoreError::ReadStats { source })
    }

    /// Every called skill's counts, by skill name.
    pub fn all_skill_stats(&self) -> Result<Vec<SkillStats>, StoreError> {
        self.flush_calls();
        let conn = self.conn();
        let read = || -> rusqlite::Result<Vec<SkillStats>> {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {STATS_COLUMNS} FROM skill_stats ORDER BY skill"
            ))?;
            let rows = stmt.query_map([], stats_from_row)?;
            rows.collect()
        };
        read().map_err(|source| StoreError::ReadStats { source })
    }
}

/// The skill's stats and the call row of `call`, inside the caller's transaction.
fn insert_call(tx: &rusqlite::Connection, call: &CallRecord) -> rusqlite::Result<()> {
    let (successes, failures) = if call.success { (1, 0) } else { (0, 1) };
    tx.prepare_cached(
        "INSERT INTO skill_stats (skill, successes, failures, last_called_at) \
         VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (skill) DO UPDATE SET \
           successes = skill_stats.successes + excluded.successes, \
           failures = skill_stats.failures + excluded.failures, \
           last_called_at = MAX(skill_stats.last_called_at, excluded.last_called_at)",
    )?
    .execute(params![call.skill, successes, failures, call.started_at])?;
    tx.prepare_cached(
        "INSERT INTO calls \
         (call_id, skill, tool, started_at, duration_ms, success, error_kind, caller, \
          egress_json) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        call.call_id,
        call.skill,
        call.tool,
        call.started_at,
        call.duration_ms,
        call.success,
        call.error_kind.map(ErrorKind::as_str),
        call.caller,
        call.egress_column(),
    ])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, skill: &str, started_at: i64, success: bool) -> CallRecord {
        CallRecord {
            call_id: id.to_owned(),
            skill: skill.to_owned(),
            tool: "run".to_owned(),
            started_at,
            duration_ms: 12,
            success,
            error_kind: (!success).then_some(ErrorKind::ToolError),
            caller: "operator".to_owned(),
            egress: Vec::new(),
            egress_unlisted: 0,
        }
    }

    fn open() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Store::db_path(dir.path())).unwrap();
        (dir, store)
    }

    fn call_count(store: &Store) -> i64 {
        store
            .conn()
            .query_row("SELECT COUNT(*) FROM calls", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn record_call_round_trips_and_counts() {
        let (_dir, store) = open();
        assert_eq!(store.skill_stats("notes").unwrap(), None);
        let first = call("c1", "notes", 1_000, true);
        store.record_call(&first).unwrap();
        store
            .record_call(&call("c2", "notes", 3_000, false))
            .unwrap();
        // An older call arriving late does not move last_called_at back.
        store
            .record_call(&call("c3", "notes", 2_000, true))
            .unwrap();
        store.record_call(&call("c4", "mail", 5_000, true)).unwrap();

        assert_eq!(store.get_call("c1").unwrap(), Some(first));
        let failed = store.get_call("c2").unwrap().unwrap();
        assert_eq!(failed.error_kind, Some(ErrorKind::ToolError));
        assert!(!failed.success);
        assert_eq!(
            store.skill_stats("notes").unwrap(),
            Some(SkillStats {
                skill: "notes".to_owned(),
                successes: 2,
                failures: 1,
                last_called_at: 3_000,
            })
        );
        let all = store.all_skill_stats().unwrap();
        let names: Vec<_> = all.iter().map(|s| s.skill.as_str()).collect();
        assert_eq!(names, ["mail", "notes"]);
        assert_eq!(call_count(&store), 4);
    }

    #[test]
    fn record_calls_writes_a_batch_and_keeps_the_good_calls_when_one_fails() {
        let (_dir, store) = open();
        let results = store.record_calls(&[call("a", "s", 1, true), call("b", "s", 2, false)]);
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        // "a" again in a batch: the batch falls back to one transaction per call.
        let results = store.record_calls(&[
            call("c", "s", 3, true),
            call("a", "s", 4, true),
            call("d", "s", 5, true),
        ]);
        assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
        assert!(
            matches!(&results[1], Err(StoreError::RecordCall { call_id, .. }) if call_id == "a")
        );
        assert_eq!(call_count(&store), 4);
        let stats = store.skill_stats("s").unwrap().unwrap();
        assert_eq!((stats.successes, stats.failures), (3, 1));
    }

    #[test]
    fn record_call_is_atomic_when_call_insert_fails() {
        let (_dir, store) = open();
        store
            .record_call(&call("c1", "notes", 1_000, true))
            .unwrap();
        let before = store.all_skill_stats().unwrap();

        // Same call id again: the stats update (first statement) succeeds, the call insert
        // (second statement) hits the primary key; the transaction must undo both.
        let err = store
            .record_call(&call("c1", "notes", 9_000, false))
            .unwrap_err();
        assert!(matches!(err, StoreError::RecordCall { .. }), "{err}");
        assert!(err.to_string().contains("UNIQUE"), "{err}");
        // Also with a skill that has no stats row yet: no row may appear.
        store
            .record_call(&call("c1", "mail", 9_000, true))
            .unwrap_err();

        assert_eq!(store.all_skill_stats().unwrap(), before);
        assert_eq!(store.skill_stats("mail").unwrap(), None);
        assert_eq!(call_count(&store), 1);
    }

    #[test]
    fn record_call_refuses_duration_beyond_sqlite_integer() {
        let (_dir, store) = open();
        let mut huge = call("c1", "notes", 1_000, true);
        huge.duration_ms = u64::MAX;
        store.record_call(&huge).unwrap_err();
        assert_eq!(store.skill_stats("notes").unwrap(), None);
    }

    #[test]
    fn reopening_keeps_calls_and_stats() {
        let dir = tempfile::tempdir().unwrap();
        let path = Store::db_path(dir.path());
        {
            let store = Store::open(&path).unwrap();
            store
                .record_call(&call("c1", "notes", 1_000, true))
                .unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert!(store.get_call("c1").unwrap().is_some());
        assert_eq!(store.skill_stats("notes").unwrap().unwrap().successes, 1);
    }
}
