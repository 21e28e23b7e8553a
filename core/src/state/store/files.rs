//! The `context_files` table: what each context's working folder holds (path, size,
//! SHA-256, when it was written and by whom: a call id or `upload`). The bytes are on disk
//! ([`crate::contexts::files`]); a row is written after its file is in place.

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde::Serialize;

use super::{Store, StoreError};

/// One file of a context, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextFile {
    /// Its path in the context's folder, `/`-separated.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// Hex SHA-256 of its bytes.
    pub sha256: String,
    /// When it was written, Unix milliseconds.
    pub modified: i64,
    /// Who wrote it: a call id, or `upload`.
    pub written_by: String,
    /// Whether the call that wrote it left it executable (laid out 0755 for the next
    /// call); an upload never is. Listed only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub executable: bool,
}

/// The columns [`from_row`] reads, in its order.
const COLUMNS: &str = "path, size, sha256, modified, written_by, executable";

fn from_row(row: &Row<'_>) -> rusqlite::Result<ContextFile> {
    Ok(ContextFile {
        path: row.get(0)?,
        size: row.get(1)?,
        sha256: row.get(2)?,
        modified: row.get(3)?,
        written_by: row.get(4)?,
        executable: row.get(5)?,
    })
}

fn failed(step: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |source| StoreError::Files { step, source }
}

/// The version of `context_id`'s list of files (0 before its first file).
pub(super) fn context_files_version(
    conn: &Connection,
    context_id: &str,
) -> Result<i64, StoreError> {
    conn.prepare_cached("SELECT version FROM context_files_versions WHERE context_id = ?1")
        .and_then(|mut stmt| stmt.query_row([context_id], |row| row.get(0)).optional())
        .map(|v| v.unwrap_or(0))
        .map_err(failed("read the list's version"))
}

impl Store {
    /// Records `file` of `context_id` (replacing the row of the same path).
    pub fn put_context_file(&self, context_id: &str, file: &ContextFile) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT INTO context_files \
                 (context_id, path, size, sha256, modified, written_by, executable) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
                 ON CONFLICT (context_id, path) DO UPDATE SET size = excluded.size, \
                 sha256 = excluded.sha256, modified = excluded.modified, \
                 written_by = excluded.written_by, executable = excluded.executable",
                params![
                    context_id,
                    file.path,
                    file.size,
                    file.sha256,
                    file.modified,
                    file.written_by,
                    file.executable
                ],
            )
            .map(drop)
            .map_err(failed("record a file"))
    }

    /// The files of `context_id`, by path.
    pub fn context_files(&self, context_id: &str) -> Result<Vec<ContextFile>, StoreError> {
        let conn = self.conn();
        let read = || -> rusqlite::Result<Vec<ContextFile>> {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM context_files WHERE context_id = ?1 ORDER BY path"
            ))?;
            let rows = stmt.query_map([context_id], from_row)?;
            rows.collect()
        };
        read().map_err(failed("list files"))
    }

    /// The version of `context_id`'s list of files: every change to the list, by any
    /// connection, moves it on (0 before the first file). Read it before the list, and the
    /// list is at least as new as the version says.
    pub fn context_files_version(&self, context_id: &str) -> Result<i64, StoreError> {
        context_files_version(&self.conn(), context_id)
    }

    /// One file of `context_id`, if recorded.
    pub fn context_file(
        &self,
        context_id: &str,
        path: &str,
    ) -> Result<Option<ContextFile>, StoreError> {
        self.conn()
            .query_row(
                &format!("SELECT {COLUMNS} FROM context_files WHERE context_id = ?1 AND path = ?2"),
                params![context_id, path],
                from_row,
            )
            .optional()
            .map_err(failed("read a file"))
    }

    /// Sets whether `path` of `context_id` is executable. Returns whether it was recorded.
    pub fn set_context_file_executable(
        &self,
        context_id: &str,
        path: &str,
        executable: bool,
    ) -> Result<bool, StoreError> {
        self.conn()
            .execute(
                "UPDATE context_files SET executable = ?3 WHERE context_id = ?1 AND path = ?2",
                params![context_id, path, executable],
            )
            .map(|n| n > 0)
            .map_err(failed("record a file's exec bit"))
    }

    /// Forgets one file of `context_id`. Returns whether it was recorded.
    pub fn delete_context_file(&self, context_id: &str, path: &str) -> Result<bool, StoreError> {
        self.conn()
            .execute(
                "DELETE FROM context_files WHERE context_id = ?1 AND path = ?2",
                params![context_id, path],
            )
            .map(|n| n > 0)
            .map_err(failed("forget a file"))
    }

    /// Forgets a context whole: its files, pins and owner.
    pub fn delete_context(&self, context_id: &str) -> Result<(), StoreError> {
        let conn = self.conn();
        let run = || -> rusqlite::Result<()> {
            conn.execute(
                "DELETE FROM context_files WHERE context_id = ?1",
                [context_id],
            )?;
            conn.execute("DELETE FROM contexts WHERE context_id = ?1", [context_id])?;
            conn.execute(
                "DELETE FROM context_owners WHERE context_id = ?1",
                [context_id],
            )?;
            Ok(())
        };
        run().map_err(failed("delete a context"))
    }

    /// The contexts whose newest file was written before `before` (Unix ms).
    pub fn idle_contexts(&self, before: i64) -> Result<Vec<String>, StoreError> {
        let conn = self.conn();
        let read = || -> rusqlite::Result<Vec<String>> {
            let mut stmt = conn.prepare_cached(
                "SELECT context_id FROM context_files GROUP BY context_id \
                 HAVING MAX(modified) < ?1",
            )?;
            let rows = stmt.query_map([before], |r| r.get(0))?;
            rows.collect()
        };
        read().map_err(failed("list idle contexts"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, modified: i64) -> ContextFile {
        ContextFile {
            path: path.into(),
            size: 3,
            sha256: "ab".into(),
            modified,
            written_by: "upload".into(),
            executable: false,
        }
    }

    #[test]
    fn files_are_recorded_replaced_listed_and_forgotten_per_context() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Store::db_path(dir.path())).unwrap();
        store.put_context_file("c1", &file("b.txt", 5)).unwrap();
        store.put_context_file("c1", &file("a/x.csv", 6)).unwrap();
        store.put_context_file("c2", &file("b.txt", 100)).unwrap();
        let mut again = file("b.txt", 7);
        again.written_by = "call-1".into();
        store.put_context_file("c1", &again).unwrap();
        let listed = store.context_files("c1").unwrap();
        assert_eq!(listed, [file("a/x.csv", 6), again.clone()]);
        assert_eq!(
            store.context_file("c2", "b.txt").unwrap().unwrap().modified,
            100
        );
        assert_eq!(store.idle_contexts(50).unwrap(), ["c1"]);
        // The exec bit: set, listed, and reset by a write that does not keep it.
        assert!(store
            .set_context_file_executable("c2", "b.txt", true)
            .unwrap());
        assert!(
            store
                .context_file("c2", "b.txt")
                .unwrap()
                .unwrap()
                .executable
        );
        assert!(!store
            .set_context_file_executable("c2", "none", true)
            .unwrap());
        store.put_context_file("c2", &file("b.txt", 101)).unwrap();
        assert!(
            !store
                .context_file("c2", "b.txt")
                .unwrap()
                .unwrap()
                .executable
        );
        assert!(store.delete_context_file("c1", "b.txt").unwrap());
        assert!(!store.delete_context_file("c1", "b.txt").unwrap());
        store.delete_context("c1").unwrap();
        assert!(store.context_files("c1").unwrap().is_empty());
        assert_eq!(store.context_files("c2").unwrap().len(), 1);
    }

    /// Every change to a context's list moves its version on, by this store or another
    /// connection to the same database (the CLI's); another context's does not; a
    /// context made again goes on from its last version.
    #[test]
    fn every_change_to_a_list_moves_its_version_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Store::db_path(dir.path())).unwrap();
        let other = Store::open(&Store::db_path(dir.path())).unwrap();
        let version = || store.context_files_version("c1").unwrap();
        assert_eq!(version(), 0, "no file yet");
        let mut seen = vec![version()];
        let mut moved = |why: &str| {
            let now = version();
            assert!(!seen.contains(&now), "{why}: {now} again after {seen:?}");
            seen.push(now);
        };
        store.put_context_file("c1", &file("a.txt", 1)).unwrap();
        moved("a file recorded");
        store.put_context_file("c1", &file("a.txt", 2)).unwrap();
        moved("a file replaced");
        store
            .set_context_file_executable("c1", "a.txt", true)
            .unwrap();
        moved("its exec bit set");
        other.put_context_file("c1", &file("b.txt", 3)).unwrap();
        moved("a file recorded by another connection");
        let before = version();
        store.put_context_file("c2", &file("a.txt", 4)).unwrap();
        assert_eq!(version(), before, "another context's file");
        store.delete_context_file("c1", "a.txt").unwrap();
        moved("a file forgotten");
        store.delete_context("c1").unwrap();
        moved("the context forgotten");
        store.put_context_file("c1", &file("a.txt", 5)).unwrap();
        moved("the context made again");
    }
}
