//! The connection taken only when nobody holds it ([`Store::if_free`]), for the few
//! indexed reads of a call's gate on the caller's own thread: a call in a context that is
//! already owned, whose pins and list of files did not change, passes its gate without a
//! hop to a blocking thread (calls/gate.rs). Reads only; in WAL mode a reader does not
//! wait for a writer.

use std::sync::{MutexGuard, TryLockError};

use rusqlite::Connection;

use super::cached_tx::CachedTx;
use super::{contexts, files, tokens, Pin, Store, StoreError};

/// The store's connection, taken without waiting: reads only.
#[derive(Debug)]
pub struct FreeConn<'a>(MutexGuard<'a, Connection>);

impl Store {
    /// The connection if it is free this moment, else `None` (the caller goes to a
    /// blocking thread and waits there). A poisoned lock is taken as [`Store`]'s own is.
    pub fn if_free(&self) -> Option<FreeConn<'_>> {
        match self.inner.conn.try_lock() {
            Ok(conn) => Some(FreeConn(conn)),
            Err(TryLockError::Poisoned(p)) => Some(FreeConn(p.into_inner())),
            Err(TryLockError::WouldBlock) => None,
        }
    }
}

impl FreeConn<'_> {
    /// Runs `reads` in one read transaction: one snapshot, and the file locks of one read
    /// (two `fcntl`s on the shared-memory file), not of each statement.
    pub fn in_one_read<T>(&self, reads: impl FnOnce(&Self) -> T) -> Result<T, StoreError> {
        let read = CachedTx::deferred(&self.0).map_err(|source| StoreError::Files {
            step: "begin a read",
            source,
        })?;
        let out = reads(self);
        // A read changed nothing: its end is the same whether committed or rolled back.
        drop(read);
        Ok(out)
    }

    /// Who context `context_id` belongs to, if anybody used it.
    pub fn context_owner(&self, context_id: &str) -> Result<Option<String>, StoreError> {
        tokens::context_owner(&self.0, context_id)
    }

    /// The skills pinned in `context_id`, oldest first ([`Store::pinned_skills`]).
    pub fn pinned_skills(&self, context_id: &str) -> Result<Vec<Pin>, StoreError> {
        contexts::pinned_skills(&self.0, context_id)
    }

    /// The version of `context_id`'s list of files ([`Store::context_files_version`]).
    pub fn context_files_version(&self, context_id: &str) -> Result<i64, StoreError> {
        files::context_files_version(&self.0, context_id)
    }
}
