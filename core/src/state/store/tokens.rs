//! The `bot_tokens` and `context_owners` tables: one row per bot token (its SHA-256, never
//! the token), and which caller a context id belongs to (the first one that used it).

use rusqlite::{params, Connection, OptionalExtension, Row};

use super::{Store, StoreError};

/// A bot token as stored: the hash of the token, never the token itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotTokenRow {
    /// The bot's name (unique).
    pub name: String,
    /// Hex SHA-256 of the token.
    pub token_hash: String,
    /// The skills the bot may use; `None` for every skill.
    pub skills: Option<Vec<String>>,
    /// When it was made, Unix milliseconds.
    pub created_at: i64,
    /// When it stops working, Unix milliseconds; `None` for never.
    pub expires_at: Option<i64>,
    /// When it was last presented, Unix milliseconds.
    pub last_used_at: Option<i64>,
}

const COLUMNS: &str = "name, token_hash, skills_json, created_at, expires_at, last_used_at";

fn from_row(row: &Row<'_>) -> rusqlite::Result<BotTokenRow> {
    let skills: Option<String> = row.get(2)?;
    let skills = match skills {
        Some(json) => Some(serde_json::from_str(&json).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, Box::new(e))
        })?),
        None => None,
    };
    Ok(BotTokenRow {
        name: row.get(0)?,
        token_hash: row.get(1)?,
        skills,
        created_at: row.get(3)?,
        expires_at: row.get(4)?,
        last_used_at: row.get(5)?,
    })
}

fn failed(step: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |source| StoreError::Tokens { step, source }
}

/// Who context `context_id` belongs to, if anybody used it.
pub(super) fn context_owner(
    conn: &Connection,
    context_id: &str,
) -> Result<Option<String>, StoreError> {
    conn.prepare_cached("SELECT owner FROM context_owners WHERE context_id = ?1")
        .and_then(|mut stmt| stmt.query_row([context_id], |row| row.get(0)).optional())
        .map_err(failed("claim a context"))
}

impl Store {
    /// Saves a new bot token. A name already taken is refused with
    /// [`StoreError::TokenNameTaken`].
    pub fn insert_bot_token(&self, row: &BotTokenRow) -> Result<(), StoreError> {
        let skills = row
            .skills
            .as_ref()
            .map(|s| serde_json::Value::from(s.clone()).to_string());
        let inserted = self
            .conn()
            .execute(
                &format!(
                    "INSERT INTO bot_tokens ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                     ON CONFLICT (name) DO NOTHING"
                ),
                params![
                    row.name,
                    row.token_hash,
                    skills,
                    row.created_at,
                    row.expires_at,
                    row.last_used_at
                ],
            )
            .map_err(failed("insert"))?;
        if inserted == 0 {
            return Err(StoreError::TokenNameTaken {
                name: row.name.clone(),
            });
        }
        Ok(())
    }

    /// Every bot token, by name.
    pub fn bot_tokens(&self) -> Result<Vec<BotTokenRow>, StoreError> {
        let conn = self.conn();
        let read = || -> rusqlite::Result<Vec<BotTokenRow>> {
            let mut stmt =
                conn.prepare_cached(&format!("SELECT {COLUMNS} FROM bot_tokens ORDER BY name"))?;
            let rows = stmt.query_map([], from_row)?;
            rows.collect()
        };
        read().map_err(failed("read"))
    }

    /// Deletes the bot token `name`. Returns whether there was one.
    pub fn delete_bot_token(&self, name: &str) -> Result<bool, StoreError> {
        self.conn()
            .execute("DELETE FROM bot_tokens WHERE name = ?1", [name])
            .map(|n| n > 0)
            .map_err(failed("delete"))
    }

    /// Notes when the token `name` was last presented.
    pub fn touch_bot_token(&self, name: &str, at: i64) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "UPDATE bot_tokens SET last_used_at = MAX(COALESCE(last_used_at, 0), ?2) \
                 WHERE name = ?1",
                params![name, at],
            )
            .map(drop)
            .map_err(failed("touch"))
    }

    /// The caller `context_id` belongs to, claiming it for `caller` when nobody has used it
    /// yet (one statement, so two first uses cannot both win). A context already claimed,
    /// as on every call in it after the first, is only read: no write transaction, and the
    /// statements are prepared once per connection.
    pub fn claim_context(
        &self,
        context_id: &str,
        caller: &str,
        at: i64,
    ) -> Result<String, StoreError> {
        let conn = self.conn();
        let owner = || context_owner(&conn, context_id);
        if let Some(owner) = owner()? {
            return Ok(owner);
        }
        conn.prepare_cached(
            "INSERT INTO context_owners (context_id, owner, created_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT (context_id) DO NOTHING",
        )
        .and_then(|mut stmt| stmt.execute(params![context_id, caller, at]))
        .map_err(failed("claim a context"))?;
        // Another connection may have claimed it between the two: its owner wins.
        owner()?.ok_or_else(|| failed("claim a context")(rusqlite::Error::QueryReturnedNoRows))
    }

    /// The caller `context_id` belongs to, if anybody used it.
    pub fn context_owner(&self, context_id: &str) -> Result<Option<String>, StoreError> {
        self.conn()
            .query_row(
                "SELECT owner FROM context_owners WHERE context_id = ?1",
                [context_id],
                |row| row.get(0),
            )
            .optional()
            .map_err(failed("read a context's owner"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Store::db_path(dir.path())).unwrap();
        (dir, store)
    }

    fn row(name: &str, hash: &str) -> BotTokenRow {
        BotTokenRow {
            name: name.into(),
            token_hash: hash.into(),
            skills: Some(vec!["notes".into()]),
            created_at: 1,
            expires_at: Some(99),
            last_used_at: None,
        }
    }

    #[test]
    fn tokens_round_trip_and_names_are_unique() {
        let (_dir, store) = open();
        store.insert_bot_token(&row("a", "h1")).unwrap();
        let err = store.insert_bot_token(&row("a", "h2")).unwrap_err();
        assert!(matches!(err, StoreError::TokenNameTaken { .. }), "{err}");
        assert_eq!(store.bot_tokens().unwrap(), [row("a", "h1")]);
        store.touch_bot_token("a", 50).unwrap();
        store.touch_bot_token("a", 40).unwrap();
        assert_eq!(store.bot_tokens().unwrap()[0].last_used_at, Some(50));
        assert!(store.delete_bot_token("a").unwrap());
        assert!(!store.delete_bot_token("a").unwrap());
        assert!(store.bot_tokens().unwrap().is_empty());
    }

    #[test]
    fn a_context_belongs_to_its_first_user() {
        let (_dir, store) = open();
        assert_eq!(store.context_owner("c1").unwrap(), None);
        assert_eq!(store.claim_context("c1", "bot-a", 1).unwrap(), "bot-a");
        assert_eq!(store.claim_context("c1", "bot-b", 2).unwrap(), "bot-a");
        assert_eq!(store.context_owner("c1").unwrap().as_deref(), Some("bot-a"));
    }

    /// A context claimed through another connection to the same database (another
    /// process's store) is that claimer's, read or claimed here afterwards.
    #[test]
    fn a_context_claimed_by_another_connection_stays_its_claimers() {
        let (dir, store) = open();
        let other = Store::open(&Store::db_path(dir.path())).unwrap();
        assert_eq!(other.claim_context("c2", "bot-b", 1).unwrap(), "bot-b");
        assert_eq!(store.claim_context("c2", "bot-a", 2).unwrap(), "bot-b");
        assert_eq!(store.claim_context("c3", "bot-a", 3).unwrap(), "bot-a");
        assert_eq!(other.claim_context("c3", "bot-b", 4).unwrap(), "bot-a");
    }
}
