//! Transactions begun and ended by statements prepared once, from the connection's
//! statement cache. rusqlite's `transaction()` runs `BEGIN` and its end through
//! `execute_batch`, which parses the SQL again every time: in a profile of calls in a
//! context, that parse was about a third of the gate's one read transaction
//! (docs/hot-path.md). The statements are the same; only the parse is saved.

use std::ops::Deref;

use rusqlite::Connection;

/// An open transaction on a connection: committed by [`CachedTx::commit`], rolled back
/// when dropped without it (also on a panic, and when the commit failed).
pub(super) struct CachedTx<'c> {
    conn: &'c Connection,
    open: bool,
}

impl<'c> CachedTx<'c> {
    /// A deferred transaction: its first read takes the read snapshot, no write lock.
    pub(super) fn deferred(conn: &'c Connection) -> rusqlite::Result<Self> {
        Self::begin(conn, "BEGIN DEFERRED")
    }

    /// An immediate transaction: the write lock taken at once (waiting up to the busy
    /// timeout for another connection's writer).
    pub(super) fn immediate(conn: &'c Connection) -> rusqlite::Result<Self> {
        Self::begin(conn, "BEGIN IMMEDIATE")
    }

    fn begin(conn: &'c Connection, sql: &str) -> rusqlite::Result<Self> {
        conn.prepare_cached(sql)?.execute([])?;
        Ok(Self { conn, open: true })
    }

    /// Commits; on failure the transaction is rolled back when this is dropped.
    pub(super) fn commit(mut self) -> rusqlite::Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        self.open = false;
        Ok(())
    }
}

impl Deref for CachedTx<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for CachedTx<'_> {
    fn drop(&mut self) {
        if !self.open || self.conn.is_autocommit() {
            return;
        }
        let rolled_back = (self.conn.prepare_cached("ROLLBACK")).and_then(|mut s| s.execute([]));
        if let Err(e) = rolled_back {
            tracing::error!(error = %e, "could not roll back a state-database transaction");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn table() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        conn
    }

    fn count(conn: &Connection) -> i64 {
        conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_committed_transaction_keeps_its_writes_and_a_dropped_one_does_not() {
        let conn = table();
        for round in 0..3 {
            let tx = CachedTx::immediate(&conn).unwrap();
            tx.execute("INSERT INTO t VALUES (1)", []).unwrap();
            tx.commit().unwrap();
            let tx = CachedTx::deferred(&conn).unwrap();
            tx.execute("INSERT INTO t VALUES (2)", []).unwrap();
            drop(tx);
            assert_eq!(count(&conn), round + 1);
            assert!(conn.is_autocommit(), "no transaction is left open");
        }
    }

    #[test]
    fn a_panic_inside_rolls_the_transaction_back_and_frees_the_connection() {
        let conn = table();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let tx = CachedTx::immediate(&conn).unwrap();
            tx.execute("INSERT INTO t VALUES (1)", []).unwrap();
            panic!("a read failed badly");
        }));
        assert!(caught.is_err());
        assert!(conn.is_autocommit());
        assert_eq!(count(&conn), 0);
        CachedTx::deferred(&conn).unwrap().commit().unwrap();
    }
}
