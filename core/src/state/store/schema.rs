//! The state database's schema: the migrations in order, and [`migrate`], which brings a
//! database to the newest version in one transaction (`PRAGMA user_version` is the version).

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use super::StoreError;

/// The migrations, in order: entry `i` brings the schema from version `i` to `i + 1`.
/// Never edit one that has shipped; append a new one.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: approvals, calls, skill_stats.
    "CREATE TABLE approvals (
        id         TEXT PRIMARY KEY NOT NULL,
        skill      TEXT NOT NULL,
        tool       TEXT NOT NULL,
        args_hash  TEXT NOT NULL,
        args_json  TEXT NOT NULL,
        security   TEXT NOT NULL,
        status     TEXT NOT NULL
                   CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'used')),
        created_at INTEGER NOT NULL,
        decided_at INTEGER,
        reason     TEXT
    ) STRICT;
    CREATE INDEX approvals_by_status ON approvals (status, created_at);
    CREATE INDEX approvals_by_call ON approvals (skill, tool, args_hash, status);
    CREATE TABLE calls (
        call_id     TEXT PRIMARY KEY NOT NULL,
        skill       TEXT NOT NULL,
        tool        TEXT NOT NULL,
        started_at  INTEGER NOT NULL,
        duration_ms INTEGER NOT NULL CHECK (duration_ms >= 0),
        success     INTEGER NOT NULL CHECK (success IN (0, 1)),
        error_kind  TEXT
    ) STRICT;
    CREATE INDEX calls_by_skill ON calls (skill, started_at);
    CREATE TABLE skill_stats (
        skill          TEXT PRIMARY KEY NOT NULL,
        successes      INTEGER NOT NULL DEFAULT 0 CHECK (successes >= 0),
        failures       INTEGER NOT NULL DEFAULT 0 CHECK (failures >= 0),
        last_called_at INTEGER NOT NULL
    ) STRICT;",
    // 2: skills pinned per context, and the transitions of executed activation plans.
    "CREATE TABLE contexts (
        context_id TEXT NOT NULL,
        skill      TEXT NOT NULL,
        pinned_at  INTEGER NOT NULL,
        PRIMARY KEY (context_id, skill)
    ) STRICT;
    CREATE TABLE route_events (
        route_id   TEXT NOT NULL,
        seq        INTEGER NOT NULL CHECK (seq >= 0),
        from_state TEXT NOT NULL,
        to_state   TEXT NOT NULL,
        skill      TEXT,
        tool       TEXT,
        reason     TEXT NOT NULL,
        at         INTEGER NOT NULL,
        PRIMARY KEY (route_id, seq)
    ) STRICT;",
    // 3: the structured records of skill repairs (routing spec §12).
    "CREATE TABLE repairs (
        id              TEXT PRIMARY KEY NOT NULL,
        skill           TEXT NOT NULL,
        run_id          TEXT NOT NULL,
        attempt         INTEGER NOT NULL CHECK (attempt >= 0),
        error_signature TEXT NOT NULL,
        root_cause      TEXT NOT NULL,
        patched_files   TEXT NOT NULL,
        expected_effect TEXT NOT NULL,
        outcome         TEXT NOT NULL CHECK (outcome IN ('applied', 'rolled_back', 'refused')),
        check_name      TEXT,
        reason          TEXT,
        at              INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX repairs_by_run ON repairs (skill, run_id);",
    // 4: every routing decision (`POST /v1/route`, executed or not), newest kept.
    "CREATE TABLE routes (
        route_id      TEXT PRIMARY KEY NOT NULL,
        at            INTEGER NOT NULL,
        query         TEXT NOT NULL,
        context_id    TEXT,
        primary_skill TEXT,
        plan_json     TEXT NOT NULL
    ) STRICT;
    CREATE INDEX routes_by_time ON routes (at);
    CREATE INDEX calls_by_time ON calls (started_at);",
    // 5: roles. Bot tokens (stored hashed), which bot (or the operator) asked for each
    // call, approval and route, who decided an approval, and which bot a context belongs to.
    "CREATE TABLE bot_tokens (
        name         TEXT PRIMARY KEY NOT NULL,
        token_hash   TEXT NOT NULL UNIQUE,
        skills_json  TEXT,
        created_at   INTEGER NOT NULL,
        expires_at   INTEGER,
        last_used_at INTEGER
    ) STRICT;
    CREATE TABLE context_owners (
        context_id TEXT PRIMARY KEY NOT NULL,
        owner      TEXT NOT NULL,
        created_at INTEGER NOT NULL
    ) STRICT;
    ALTER TABLE approvals ADD COLUMN requested_by TEXT NOT NULL DEFAULT 'operator';
    ALTER TABLE approvals ADD COLUMN context_id TEXT;
    ALTER TABLE approvals ADD COLUMN decided_by TEXT;
    ALTER TABLE calls ADD COLUMN caller TEXT NOT NULL DEFAULT 'operator';
    CREATE INDEX calls_by_caller ON calls (caller, started_at);
    ALTER TABLE routes ADD COLUMN caller TEXT NOT NULL DEFAULT 'operator';",
    // 6: the files of each context's working folder (the bytes are on disk under
    // <state>/contexts/; these rows say what is there and who wrote it).
    "CREATE TABLE context_files (
        context_id TEXT NOT NULL,
        path       TEXT NOT NULL,
        size       INTEGER NOT NULL CHECK (size >= 0),
        sha256     TEXT NOT NULL,
        modified   INTEGER NOT NULL,
        written_by TEXT NOT NULL,
        PRIMARY KEY (context_id, path)
    ) STRICT;
    CREATE INDEX context_files_by_time ON context_files (modified);",
    // 7: the connections a call's programs made through the egress proxy (JSON of
    // `CallEgress`; NULL when none).
    "ALTER TABLE calls ADD COLUMN egress_json TEXT;",
    // 8: a context file's exec bit, as the call that wrote it left it (a script made
    // executable by one command runs in the next).
    "ALTER TABLE context_files ADD COLUMN executable INTEGER NOT NULL DEFAULT 0;",
    // 9: a version of each context's list of files, moved on by every change to it (by
    // this process or any other), so that a list read at one version is current while
    // the version is the same. A row is never removed: a context made again under an old
    // id goes on from its last version, never back to one a list was read at.
    "CREATE TABLE context_files_versions (
        context_id TEXT PRIMARY KEY,
        version    INTEGER NOT NULL
    ) STRICT;
    CREATE TRIGGER context_file_inserted AFTER INSERT ON context_files BEGIN
        INSERT INTO context_files_versions (context_id, version) VALUES (NEW.context_id, 1)
        ON CONFLICT (context_id) DO UPDATE SET version = version + 1;
    END;
    CREATE TRIGGER context_file_updated AFTER UPDATE ON context_files BEGIN
        INSERT INTO context_files_versions (context_id, version) VALUES (NEW.context_id, 1)
        ON CONFLICT (context_id) DO UPDATE SET version = version + 1;
    END;
    CREATE TRIGGER context_file_deleted AFTER DELETE ON context_files BEGIN
        INSERT INTO context_files_versions (context_id, version) VALUES (OLD.context_id, 1)
        ON CONFLICT (context_id) DO UPDATE SET version = version + 1;
    END;",
];

/// Brings the schema to the newest version in one immediate transaction (so two
/// processes opening a fresh database do not both migrate it).
pub(super) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let supported = (1i64..).zip(MIGRATIONS).last().map_or(0, |(v, _)| v);
    let failed = |version: i64| {
        move |source| StoreError::Migrate {
            path: path.to_owned(),
            version,
            source,
        }
    };
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(failed(supported))?;
    let found: i64 = tx
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(failed(supported))?;
    if found > supported {
        return Err(StoreError::SchemaTooNew {
            path: path.to_owned(),
            found,
            supported,
        });
    }
    if found == supported {
        return Ok(());
    }
    for (version, sql) in (1i64..).zip(MIGRATIONS).filter(|(v, _)| *v > found) {
        tx.execute_batch(sql).map_err(failed(version))?;
    }
    tx.pragma_update(None, "user_version", supported)
        .map_err(failed(supported))?;
    tx.commit().map_err(failed(supported))?;
    tracing::info!(path = %path.display(), from = found, to = supported, "migrated the state database");
    Ok(())
}
