//! Bot tokens: made by the operator (`skillbox tokens create`, `POST /v1/tokens`), shown
//! once, stored as their SHA-256 in the state database, listed and revoked by name. The
//! core keeps them in memory and answers each request from there: a revocation through
//! the running core acts on its next request. Tokens written by a CLI while no core ran
//! are read at start, and a token the core does not know makes it re-read the table (at
//! most once a second), so one made by another process is taken without a restart.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use ring::digest::{digest, SHA256};
use serde::Serialize;

use super::{Bot, OPERATOR};
use crate::random::{self, RandomError, RandomSource};
use crate::state::store::{unix_ms_now, BotTokenRow, Store, StoreError};

/// The prefix of every bot token, so a leaked one is recognisable.
pub const TOKEN_PREFIX: &str = "sbx_bot_";

/// Longest bot name.
pub const MAX_NAME_LEN: usize = 64;

/// Longest lifetime `--expires` takes, in days (ten years).
pub const MAX_EXPIRES_DAYS: u64 = 3650;

/// How often an unknown token may make the core re-read the table.
const REFRESH_EVERY: Duration = Duration::from_secs(1);

/// How stale the stored "last used" may get (it is kept exact in memory).
const TOUCH_EVERY_MS: i64 = 60_000;

/// Why a bot token could not be made, revoked or accepted.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The name is not a bot name.
    #[error("bot name {0:?} is not valid: use 1 to 64 of a-z, 0-9, '-' and '_', starting with a letter or digit, and not \"operator\"")]
    BadName(String),
    /// A skill name in `--skills` is not a skill name.
    #[error("skill name {0:?} in --skills is not valid: skill names are lowercase letters, digits and '-'")]
    BadSkill(String),
    /// `--expires` is zero or too large.
    #[error("--expires {0} is out of range: give 1 to 3650 days, or leave it out for a token that does not expire")]
    BadExpiry(u64),
    /// No token has this name.
    #[error("no bot token named {0:?}; list them with `skillbox tokens list`")]
    NoSuchBot(String),
    /// The token is known but past its expiry.
    #[error("the token of bot {name:?} expired; ask the operator for a new one (`skillbox tokens create`)")]
    Expired {
        /// The bot.
        name: String,
    },
    /// The random source failed.
    #[error(transparent)]
    Random(#[from] RandomError),
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A bot token as listed: never the token itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BotTokenInfo {
    /// The bot's name.
    pub name: String,
    /// The skills it may use; `null` for every skill.
    pub skills: Option<Vec<String>>,
    /// When it was made, Unix milliseconds.
    pub created_at: i64,
    /// When it stops working, Unix milliseconds; `null` for never.
    pub expires_at: Option<i64>,
    /// When it was last presented, Unix milliseconds.
    pub last_used_at: Option<i64>,
}

/// One token the core knows.
#[derive(Debug)]
struct Entry {
    bot: Arc<Bot>,
    created_at: i64,
    expires_at: Option<i64>,
    last_used: AtomicI64,
    stored_used: AtomicI64,
}

impl Entry {
    fn from_row(row: BotTokenRow) -> (String, Arc<Entry>) {
        let used = row.last_used_at.unwrap_or(0);
        let entry = Entry {
            bot: Arc::new(Bot {
                name: row.name,
                skills: row.skills,
            }),
            created_at: row.created_at,
            expires_at: row.expires_at,
            last_used: AtomicI64::new(used),
            stored_used: AtomicI64::new(used),
        };
        (row.token_hash, Arc::new(entry))
    }

    fn info(&self) -> BotTokenInfo {
        let used = self.last_used.load(Ordering::Relaxed);
        BotTokenInfo {
            name: self.bot.name.clone(),
            skills: self.bot.skills.clone(),
            created_at: self.created_at,
            expires_at: self.expires_at,
            last_used_at: (used > 0).then_some(used),
        }
    }
}

/// The bot tokens of a workspace: share it behind an `Arc`.
#[derive(Debug)]
pub struct BotTokens {
    store: Store,
    by_hash: RwLock<HashMap<String, Arc<Entry>>>,
    refreshed: Mutex<Instant>,
}

/// The hex SHA-256 a token is stored and looked up by.
pub fn token_hash(token: &str) -> String {
    (digest(&SHA256, token.as_bytes()).as_ref().iter())
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether `name` can name a bot.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    name != OPERATOR
        && name.len() <= MAX_NAME_LEN
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

fn valid_skill(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

impl BotTokens {
    /// The tokens stored in `store`.
    pub fn load(store: Store) -> Result<Self, TokenError> {
        let tokens = BotTokens {
            store,
            by_hash: RwLock::new(HashMap::new()),
            refreshed: Mutex::new(Instant::now()),
        };
        tokens.reload()?;
        Ok(tokens)
    }

    /// Re-reads every token from the store.
    pub fn reload(&self) -> Result<(), TokenError> {
        let rows = self.store.bot_tokens()?;
        let map: HashMap<String, Arc<Entry>> = rows.into_iter().map(Entry::from_row).collect();
        *self.by_hash.write().unwrap_or_else(PoisonError::into_inner) = map;
        Ok(())
    }

    /// Makes a token for bot `name`, allowed `skills` (every skill when `None`), expiring
    /// after `expires_days` (never when `None`). Returns the token: it is shown once and
    /// stored only as its hash.
    pub fn create(
        &self,
        rng: &dyn RandomSource,
        name: &str,
        skills: Option<Vec<String>>,
        expires_days: Option<u64>,
    ) -> Result<(String, BotTokenInfo), TokenError> {
        let row = new_row(name, skills, expires_days)?;
        let token = format!("{TOKEN_PREFIX}{}", random::token(rng, "bot token")?);
        let row = BotTokenRow {
            token_hash: token_hash(&token),
            ..row
        };
        self.store.insert_bot_token(&row)?;
        let (hash, entry) = Entry::from_row(row);
        let info = entry.info();
        self.write().insert(hash, entry);
        tracing::info!(bot = %name, "bot token created");
        Ok((token, info))
    }

    /// Revokes bot `name`'s token: the next request with it is refused.
    pub fn revoke(&self, name: &str) -> Result<(), TokenError> {
        let deleted = self.store.delete_bot_token(name)?;
        let mut map = self.write();
        let before = map.len();
        map.retain(|_, e| e.bot.name != name);
        if !deleted && map.len() == before {
            return Err(TokenError::NoSuchBot(name.to_owned()));
        }
        tracing::info!(bot = %name, "bot token revoked");
        Ok(())
    }

    /// Every token, by name.
    pub fn list(&self) -> Vec<BotTokenInfo> {
        let mut out: Vec<BotTokenInfo> = (self.read().values()).map(|e| e.info()).collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// How many tokens there are (bounds the metrics' `bot` label).
    pub fn count(&self) -> usize {
        self.read().len()
    }

    /// The bot whose token `presented` is: `None` for no bot token, an error for an
    /// expired one.
    pub fn authenticate(&self, presented: &str) -> Option<Result<Arc<Bot>, TokenError>> {
        if !presented.starts_with(TOKEN_PREFIX) {
            return None;
        }
        let hash = token_hash(presented);
        let entry = match self.lookup(&hash) {
            Some(e) => e,
            None => {
                self.refresh_at_most_every(REFRESH_EVERY);
                self.lookup(&hash)?
            }
        };
        let now = unix_ms_now();
        if entry.expires_at.is_some_and(|at| now >= at) {
            return Some(Err(TokenError::Expired {
                name: entry.bot.name.clone(),
            }));
        }
        self.touch(&entry, now);
        Some(Ok(Arc::clone(&entry.bot)))
    }

    fn lookup(&self, hash: &str) -> Option<Arc<Entry>> {
        self.read().get(hash).map(Arc::clone)
    }

    fn refresh_at_most_every(&self, every: Duration) {
        {
            let mut last = self
                .refreshed
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if last.elapsed() < every {
                return;
            }
            *last = Instant::now();
        }
        if let Err(e) = self.reload() {
            tracing::warn!(error = %e, "cannot re-read the bot tokens");
        }
    }

    /// Notes the use in memory, and in the store when the stored time is over a minute old
    /// (off the request's thread).
    fn touch(&self, entry: &Arc<Entry>, now: i64) {
        entry.last_used.fetch_max(now, Ordering::Relaxed);
        let stored = entry.stored_used.load(Ordering::Relaxed);
        if now - stored < TOUCH_EVERY_MS
            || entry
                .stored_used
                .compare_exchange(stored, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let store = self.store.clone();
        let name = entry.bot.name.clone();
        let write = move || {
            if let Err(e) = store.touch_bot_token(&name, now) {
                tracing::warn!(bot = %name, error = %e, "cannot note when the bot token was used");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(write)),
            Err(_) => write(),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<Entry>>> {
        self.by_hash.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<Entry>>> {
        self.by_hash.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The stored row of a new token (its hash still empty), after checking the request.
fn new_row(
    name: &str,
    skills: Option<Vec<String>>,
    expires_days: Option<u64>,
) -> Result<BotTokenRow, TokenError> {
    if !valid_name(name) {
        return Err(TokenError::BadName(name.to_owned()));
    }
    if let Some(bad) = skills.iter().flatten().find(|s| !valid_skill(s)) {
        return Err(TokenError::BadSkill(bad.clone()));
    }
    let now = unix_ms_now();
    let expires_at = match expires_days {
        None => None,
        Some(d) if d == 0 || d > MAX_EXPIRES_DAYS => return Err(TokenError::BadExpiry(d)),
        Some(d) => Some(now + i64::try_from(d).unwrap_or(0) * 86_400_000),
    };
    Ok(BotTokenRow {
        name: name.to_owned(),
        token_hash: String::new(),
        skills: skills.map(|mut s| {
            s.sort();
            s.dedup();
            s
        }),
        created_at: now,
        expires_at,
        last_used_at: None,
    })
}

#[cfg(test)]
mod tests;
