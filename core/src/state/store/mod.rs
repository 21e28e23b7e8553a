//! The core's state in SQLite, `<state>/skillbox.db`: approvals of `write`/`sign` tool
//! calls, one row per finished call, per-skill success counts, skills pinned per context,
//! every routing decision (bounded), the transitions of executed activation plans, the
//! records of skill repairs, bot tokens (hashed) and which caller each context belongs to.
//!
//! The database runs in WAL mode with `synchronous=NORMAL` and foreign keys on; its schema
//! version is `PRAGMA user_version`, and [`Store::open`] applies the missing migrations in
//! one transaction, so opening an existing database again is a no-op. [`Store`] is a
//! cheap handle over one connection; every method is synchronous and short, so async
//! callers run them under `tokio::task::spawn_blocking`.

mod approvals;
mod at_once;
mod cached_tx;
mod call_log;
mod calls;
mod contexts;
mod egress;
mod files;
mod history;
mod repairs;
mod schema;
mod tokens;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::Connection;

pub use approvals::{ApprovalRecord, ApprovalStatus, Decision};
pub use at_once::FreeConn;
pub use calls::{CallRecord, SkillStats};
pub use contexts::{Pin, RouteEvent};
pub use egress::{CallEgress, EgressEntry, EgressVerdict, MAX_LISTED as MAX_EGRESS_LISTED};
pub use files::ContextFile;
pub use history::{CallFilter, ContextPin, RouteRecord};
pub use repairs::{RepairOutcome, RepairRecord};
pub use tokens::BotTokenRow;

/// The caller name the operator's calls, approvals, decisions and routes are recorded
/// under ([`crate::auth`] gives bots their own names; none may take this one).
pub const OPERATOR: &str = "operator";

/// The database's file name inside the state directory.
pub use crate::state::workspace::DB_FILE;

/// How long a statement waits for another connection (the CLI, a second core) to release
/// the database before it fails with "database is locked".
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a state-database operation failed. Each variant names the step.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Creating the database file failed.
    #[error("could not create the state database {path}: {source}; check that the state directory exists and is writable")]
    Create {
        /// The database file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// SQLite could not open the database file.
    #[error("could not open the state database {path}: {source}")]
    Open {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Setting a connection pragma failed.
    #[error("could not set `PRAGMA {pragma}` on the state database {path}: {source}")]
    Configure {
        /// The database file.
        path: PathBuf,
        /// The pragma being set.
        pragma: &'static str,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// SQLite kept another journal mode than WAL (e.g. on a file system without shared
    /// memory).
    #[error("the state database {path} cannot use WAL (journal mode stayed {mode:?}); put the state directory on a local file system")]
    WalUnavailable {
        /// The database file.
        path: PathBuf,
        /// The journal mode SQLite reported.
        mode: String,
    },
    /// The database was written by a newer skillbox.
    #[error("the state database {path} has schema version {found}, newer than the {supported} this skillbox knows; upgrade skillbox or use another state directory")]
    SchemaTooNew {
        /// The database file.
        path: PathBuf,
        /// The version in the file.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// Applying the migrations failed; the transaction was rolled back.
    #[error("could not migrate the state database {path} to schema version {version}: {source}")]
    Migrate {
        /// The database file.
        path: PathBuf,
        /// The version being reached.
        version: i64,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Writing a new approval failed.
    #[error("could not save approval {id}: {source}")]
    InsertApproval {
        /// The approval's id.
        id: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Reading approvals failed.
    #[error("could not read approvals: {source}")]
    ReadApprovals {
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Changing an approval's status failed.
    #[error("could not set approval {id} to {to}: {source}")]
    UpdateApproval {
        /// The approval's id.
        id: String,
        /// The status being set.
        to: ApprovalStatus,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Taking an approved approval for a call failed; nothing was taken.
    #[error("could not use an approval of {skill}:{tool}: {source}")]
    ClaimApproval {
        /// The skill.
        skill: String,
        /// The tool.
        tool: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// No approval has this id.
    #[error(
        "no approval with id {id}; list them with `skillbox approvals list` or GET /v1/approvals"
    )]
    ApprovalNotFound {
        /// The id asked for.
        id: String,
    },
    /// The approval was already decided (or expired), so it cannot be decided or expired.
    #[error(
        "approval {id} is already {status}; only a pending approval can be decided or expired"
    )]
    NotPending {
        /// The approval's id.
        id: String,
        /// Its current status.
        status: ApprovalStatus,
    },
    /// The approval is not approved-and-unused, so it cannot be used.
    #[error("approval {id} is {status}, not approved; only an approved, unused approval lets a call run")]
    NotApproved {
        /// The approval's id.
        id: String,
        /// Its current status.
        status: ApprovalStatus,
    },
    /// Recording a call (its row and its skill's stats, in one transaction) failed; nothing
    /// was written.
    #[error("could not record call {call_id}: {source}")]
    RecordCall {
        /// The call's id.
        call_id: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Reading calls failed.
    #[error("could not read calls: {source}")]
    ReadCalls {
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Reading skill stats failed.
    #[error("could not read skill stats: {source}")]
    ReadStats {
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Pinning or unpinning a skill in a context failed.
    #[error("could not change the pins of context {context_id}: {source}")]
    WritePins {
        /// The context.
        context_id: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Reading a context's pins failed.
    #[error("could not read the pins of context {context_id}: {source}")]
    ReadPins {
        /// The context.
        context_id: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Reading the transitions of an executed plan failed.
    #[error("could not read the events of route {route_id}: {source}")]
    ReadRouteEvents {
        /// The route.
        route_id: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Recording the transitions of an executed plan failed; nothing was written.
    #[error("could not record the events of route {route_id}: {source}")]
    RecordRouteEvents {
        /// The route.
        route_id: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Recording a routing decision failed.
    #[error("could not record route {route_id}: {source}")]
    RecordRoute {
        /// The route.
        route_id: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Reading routing decisions, recent calls or pins failed.
    #[error("could not read the {what} history: {source}")]
    ReadHistory {
        /// `routes`, `calls` or `pins`.
        what: &'static str,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Saving a repair record failed.
    #[error("could not record a repair of {skill}: {source}")]
    RecordRepair {
        /// The skill.
        skill: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Reading repair records failed.
    #[error("could not read the repairs of {skill}: {source}")]
    ReadRepairs {
        /// The skill.
        skill: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// A step on bot tokens or context owners failed.
    #[error("could not {step} in the bot tokens: {source}")]
    Tokens {
        /// What was being done.
        step: &'static str,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// A step on a context's files failed.
    #[error("could not {step} of a context: {source}")]
    Files {
        /// What was being done.
        step: &'static str,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// A bot token with this name exists.
    #[error("a bot token named {name:?} exists; revoke it first (`skillbox tokens revoke {name}`) or pick another name")]
    TokenNameTaken {
        /// The name.
        name: String,
    },
}

/// A handle on the state database. Clones share one connection.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    conn: Mutex<Connection>,
    call_log: call_log::CallLog,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// The database file inside a state directory: `<state>/skillbox.db`.
    pub fn db_path(state_dir: &Path) -> PathBuf {
        state_dir.join(DB_FILE)
    }

    /// Opens (creating it, owner-only, if missing) the database at `path`, configures the
    /// connection and applies the missing migrations.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        create_private(path)?;
        let mut conn = Connection::open(path).map_err(|source| StoreError::Open {
            path: path.to_owned(),
            source,
        })?;
        configure(&conn, path)?;
        schema::migrate(&mut conn, path)?;
        Ok(Store {
            inner: Arc::new(Inner {
                path: path.to_owned(),
                conn: Mutex::new(conn),
                call_log: call_log::CallLog::default(),
            }),
        })
    }

    /// The database file this store has open.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The connection. A panic while it was held cannot leave a transaction open (the
    /// `Transaction` rolls back on drop), so a poisoned lock is still safe to use.
    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.inner
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Now, in milliseconds since the Unix epoch, as stored in every timestamp column.
pub fn unix_ms_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Creates an empty database file readable by the owner only (approvals hold call
/// arguments). SQLite gives its `-wal` and `-shm` files the same mode.
fn create_private(path: &Path) -> Result<(), StoreError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(StoreError::Create {
            path: path.to_owned(),
            source,
        }),
    }
}

fn configure(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let failed = |pragma: &'static str| {
        move |source| StoreError::Configure {
            path: path.to_owned(),
            pragma,
            source,
        }
    };
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(failed("busy_timeout"))?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .map_err(failed("journal_mode"))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::WalUnavailable {
            path: path.to_owned(),
            mode,
        });
    }
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(failed("synchronous"))?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(failed("foreign_keys"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user_version(store: &Store) -> i64 {
        store
            .conn()
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap()
    }

    #[test]
    fn open_twice_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let path = Store::db_path(dir.path());
        let first = Store::open(&path).unwrap();
        let version = user_version(&first);
        assert_eq!(version, i64::try_from(schema::MIGRATIONS.len()).unwrap());
        drop(first);
        let second = Store::open(&path).unwrap();
        assert_eq!(user_version(&second), version);
        // A second handle while the first is open migrates nothing either.
        let third = Store::open(&path).unwrap();
        assert_eq!(user_version(&third), version);
    }

    #[test]
    fn open_sets_wal_synchronous_and_foreign_keys() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Store::db_path(dir.path())).unwrap();
        let conn = store.conn();
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        // NORMAL is 1.
        let sync: i64 = conn
            .pragma_query_value(None, "synchronous", |r| r.get(0))
            .unwrap();
        assert_eq!(sync, 1);
        let fk: i64 = conn
            .pragma_query_value(None, "foreign_keys", |r| r.get(0))
            .unwrap();
        assert_eq!(fk, 1);
    }

    #[cfg(unix)]
    #[test]
    fn open_creates_database_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = Store::db_path(dir.path());
        let _store = Store::open(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "mode {mode:o}");
    }

    #[test]
    fn open_refuses_newer_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = Store::db_path(dir.path());
        {
            let store = Store::open(&path).unwrap();
            store
                .conn()
                .pragma_update(None, "user_version", 999)
                .unwrap();
        }
        let err = Store::open(&path).unwrap_err();
        assert!(
            matches!(err, StoreError::SchemaTooNew { found: 999, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("upgrade skillbox"), "{err}");
    }

    #[test]
    fn open_fails_in_missing_directory() {
        let dir = tempfile::tempdir().unwrap();
        let err = Store::open(&dir.path().join("missing/skillbox.db")).unwrap_err();
        assert!(matches!(err, StoreError::Create { .. }), "{err}");
    }
}
