//! Console sessions and one-time sign-in links, held in memory by the core (a restart
//! signs everyone out). A session is a random id in an HttpOnly, SameSite=Strict cookie
//! scoped to `/console`; the server keeps only its SHA-256, with the session's CSRF token
//! and expiry, in a table of at most `[console] max_sessions` entries (signing in beyond it
//! ends the oldest session). A sign-in link carries a random code that works once and
//! expires after `[console] link_seconds`; the API token itself never appears in a URL.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use ring::digest::{digest, SHA256};

use crate::random::{self, RandomError, SystemSource};

/// The session cookie's name.
pub const COOKIE: &str = "skillbox_console";

/// Sign-in links waiting to be used at once; issuing more drops the oldest.
pub const MAX_PENDING_LINKS: usize = 8;

/// Milliseconds since the Unix epoch (the clock is passed in, so tests set it).
pub type UnixMs = i64;

/// One signed-in browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The token every state-changing form of this session carries.
    pub csrf: String,
    /// When it was created.
    pub created_at: UnixMs,
    /// When it ends.
    pub expires_at: UnixMs,
}

/// The bounds of sessions and links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// How long a session lasts, milliseconds.
    pub session_ms: i64,
    /// Sessions at once.
    pub max_sessions: usize,
    /// How long a sign-in link works, milliseconds.
    pub link_ms: i64,
}

type Key = [u8; 32];

fn key(secret: &str) -> Key {
    let mut k = [0u8; 32];
    k.copy_from_slice(digest(&SHA256, secret.as_bytes()).as_ref());
    k
}

/// The sessions and pending sign-in links of this core.
#[derive(Debug)]
pub struct Sessions {
    limits: SessionLimits,
    sessions: Mutex<HashMap<Key, Session>>,
    links: Mutex<Vec<(Key, UnixMs)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every operation leaves the tables consistent; a panic elsewhere cannot tear them.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Sessions {
    /// Empty tables under `limits`.
    pub fn new(limits: SessionLimits) -> Self {
        Self {
            limits,
            sessions: Mutex::new(HashMap::new()),
            links: Mutex::new(Vec::new()),
        }
    }

    /// The bounds.
    pub fn limits(&self) -> SessionLimits {
        self.limits
    }

    /// A new session: its cookie value (shown once, kept only as a hash) and its record.
    /// Expired sessions are dropped; when the table is full, the oldest one ends.
    pub fn create(&self, now: UnixMs) -> Result<(String, Session), RandomError> {
        let source = SystemSource::default();
        let id = random::token(&source, "console session id")?;
        let session = Session {
            csrf: random::token(&source, "console CSRF token")?,
            created_at: now,
            expires_at: now.saturating_add(self.limits.session_ms),
        };
        let mut sessions = lock(&self.sessions);
        sessions.retain(|_, s| s.expires_at > now);
        while sessions.len() >= self.limits.max_sessions.max(1) {
            let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, s)| s.created_at)
                .map(|(k, _)| *k)
            else {
                break;
            };
            sessions.remove(&oldest);
        }
        sessions.insert(key(&id), session.clone());
        Ok((id, session))
    }

    /// The live session of cookie value `id`.
    pub fn get(&self, id: &str, now: UnixMs) -> Option<Session> {
        let mut sessions = lock(&self.sessions);
        let k = key(id);
        match sessions.get(&k) {
            Some(s) if s.expires_at > now => Some(s.clone()),
            Some(_) => {
                sessions.remove(&k);
                None
            }
            None => None,
        }
    }

    /// Ends the session of cookie value `id`.
    pub fn end(&self, id: &str) {
        lock(&self.sessions).remove(&key(id));
    }

    /// Sessions alive at `now`.
    pub fn count(&self, now: UnixMs) -> usize {
        lock(&self.sessions)
            .values()
            .filter(|s| s.expires_at > now)
            .count()
    }

    /// A new one-time sign-in code, valid for `[console] link_seconds`.
    pub fn issue_link(&self, now: UnixMs) -> Result<String, RandomError> {
        let code = random::token(&SystemSource::default(), "console sign-in link")?;
        let mut links = lock(&self.links);
        links.retain(|(_, until)| *until > now);
        if links.len() >= MAX_PENDING_LINKS {
            links.remove(0);
        }
        links.push((key(&code), now.saturating_add(self.limits.link_ms)));
        Ok(code)
    }

    /// Uses sign-in code `code`: true exactly once per issued code, before it expires.
    pub fn redeem_link(&self, code: &str, now: UnixMs) -> bool {
        let mut links = lock(&self.links);
        links.retain(|(_, until)| *until > now);
        let k = key(code);
        match links.iter().position(|(stored, _)| *stored == k) {
            Some(at) => {
                links.remove(at);
                true
            }
            None => false,
        }
    }
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

/// The `Set-Cookie` value that stores session `id` for `max_age_s` seconds.
pub fn set_cookie(id: &str, max_age_s: i64) -> String {
    format!("{COOKIE}={id}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={max_age_s}")
}

/// The `Set-Cookie` value that removes the session cookie.
pub fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0")
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: UnixMs = 1_700_000_000_000;

    fn sessions(max_sessions: usize) -> Sessions {
        Sessions::new(SessionLimits {
            session_ms: 60_000,
            max_sessions,
            link_ms: 10_000,
        })
    }

    #[test]
    fn session_lives_until_its_expiry_then_is_gone() {
        let s = sessions(4);
        let (id, session) = s.create(NOW).unwrap();
        assert_eq!(session.expires_at, NOW + 60_000);
        assert_eq!(s.get(&id, NOW + 59_999), Some(session));
        assert_eq!(s.get(&id, NOW + 60_000), None);
        // Gone for good, even if the clock went back.
        assert_eq!(s.get(&id, NOW), None);
    }

    #[test]
    fn session_ids_and_csrf_tokens_are_distinct_and_unguessable() {
        let s = sessions(4);
        let (a, sa) = s.create(NOW).unwrap();
        let (b, sb) = s.create(NOW).unwrap();
        assert_ne!(a, b);
        assert_ne!(sa.csrf, sb.csrf);
        assert_ne!(a, sa.csrf);
        // 256 bits, base64url.
        assert_eq!(a.len(), 43);
        assert!(s.get("guess", NOW).is_none());
    }

    #[test]
    fn session_table_is_bounded_and_drops_the_oldest() {
        let s = sessions(2);
        let (first, _) = s.create(NOW).unwrap();
        let (second, _) = s.create(NOW + 1).unwrap();
        let (third, _) = s.create(NOW + 2).unwrap();
        assert_eq!(s.count(NOW + 2), 2);
        assert!(s.get(&first, NOW + 2).is_none());
        assert!(s.get(&second, NOW + 2).is_some());
        assert!(s.get(&third, NOW + 2).is_some());
    }

    #[test]
    fn ended_session_is_refused() {
        let s = sessions(2);
        let (id, _) = s.create(NOW).unwrap();
        s.end(&id);
        assert!(s.get(&id, NOW).is_none());
    }

    #[test]
    fn sign_in_link_works_once() {
        let s = sessions(2);
        let code = s.issue_link(NOW).unwrap();
        assert!(s.redeem_link(&code, NOW + 1));
        assert!(
            !s.redeem_link(&code, NOW + 2),
            "a used link must not work again"
        );
        assert!(!s.redeem_link("made-up", NOW));
    }

    #[test]
    fn sign_in_link_expires() {
        let s = sessions(2);
        let code = s.issue_link(NOW).unwrap();
        assert!(!s.redeem_link(&code, NOW + 10_000));
    }

    #[test]
    fn pending_links_are_bounded() {
        let s = sessions(2);
        let first = s.issue_link(NOW).unwrap();
        let mut last = String::new();
        for _ in 0..MAX_PENDING_LINKS {
            last = s.issue_link(NOW).unwrap();
        }
        assert!(
            !s.redeem_link(&first, NOW),
            "the oldest link is dropped past the bound"
        );
        assert!(s.redeem_link(&last, NOW));
    }

    #[test]
    fn cookie_header_is_parsed_and_set_cookie_is_strict_and_http_only() {
        assert_eq!(
            cookie_value("a=1; skillbox_console=abc ; b=2", COOKIE),
            Some("abc")
        );
        assert_eq!(cookie_value("skillbox_consolex=1", COOKIE), None);
        let c = set_cookie("abc", 60);
        for part in ["HttpOnly", "SameSite=Strict", "Path=/console", "Max-Age=60"] {
            assert!(c.contains(part), "{c}");
        }
        assert!(clear_cookie().contains("Max-Age=0"));
    }
}
