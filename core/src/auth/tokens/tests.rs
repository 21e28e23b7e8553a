//! Bot tokens: made, shown once, stored hashed, accepted, expired, revoked at once.

use super::*;
use crate::random::SystemSource;

fn open() -> (tempfile::TempDir, Store, BotTokens) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Store::db_path(dir.path())).unwrap();
    let tokens = BotTokens::load(store.clone()).unwrap();
    (dir, store, tokens)
}

#[test]
fn a_token_is_accepted_and_only_its_hash_is_stored() {
    let (_dir, store, tokens) = open();
    let (token, info) = tokens
        .create(
            &SystemSource::default(),
            "tg",
            Some(vec!["notes".into()]),
            None,
        )
        .unwrap();
    assert!(token.starts_with(TOKEN_PREFIX), "{token}");
    assert_eq!(info.skills.as_deref(), Some(&["notes".to_string()][..]));
    let rows = store.bot_tokens().unwrap();
    assert_eq!(rows[0].token_hash, token_hash(&token));
    assert_ne!(rows[0].token_hash, token);
    let raw = std::fs::read(store.path()).unwrap();
    assert!(
        !raw.windows(token.len()).any(|w| w == token.as_bytes()),
        "the token itself is in the database file"
    );
    let bot = tokens.authenticate(&token).unwrap().unwrap();
    assert_eq!(bot.name, "tg");
    assert!(tokens.list()[0].last_used_at.is_some());
}

#[test]
fn an_unknown_or_foreign_token_is_no_bot() {
    let (_dir, _store, tokens) = open();
    assert!(tokens.authenticate("sbx_bot_made-up").is_none());
    assert!(tokens.authenticate("the-operator-token").is_none());
}

#[test]
fn a_revoked_token_is_refused_at_once() {
    let (_dir, _store, tokens) = open();
    let (token, _) = tokens
        .create(&SystemSource::default(), "tg", None, None)
        .unwrap();
    tokens.revoke("tg").unwrap();
    assert!(tokens.authenticate(&token).is_none());
    let err = tokens.revoke("tg").unwrap_err();
    assert!(matches!(err, TokenError::NoSuchBot(_)), "{err}");
}

#[test]
fn an_expired_token_is_refused_naming_its_bot() {
    let (_dir, store, tokens) = open();
    let (token, _) = tokens
        .create(&SystemSource::default(), "tg", None, Some(1))
        .unwrap();
    // Move the expiry into the past, as time would.
    let mut row = store.bot_tokens().unwrap().remove(0);
    store.delete_bot_token("tg").unwrap();
    row.expires_at = Some(unix_ms_now() - 1);
    store.insert_bot_token(&row).unwrap();
    tokens.reload().unwrap();
    let err = tokens.authenticate(&token).unwrap().unwrap_err();
    assert!(
        matches!(&err, TokenError::Expired { name } if name == "tg"),
        "{err}"
    );
}

#[test]
fn a_token_made_by_another_process_is_found_without_a_restart() {
    let (_dir, store, tokens) = open();
    let other = BotTokens::load(store.clone()).unwrap();
    let (token, _) = other
        .create(&SystemSource::default(), "cli-made", None, None)
        .unwrap();
    // The refresh is rate-limited: let the first window pass.
    std::thread::sleep(REFRESH_EVERY);
    let bot = tokens.authenticate(&token).unwrap().unwrap();
    assert_eq!(bot.name, "cli-made");
}

#[test]
fn bad_names_skills_and_expiries_are_refused() {
    let (_dir, _store, tokens) = open();
    let rng = SystemSource::default();
    for name in ["", "operator", "Upper", "-lead", "a b", &"x".repeat(65)] {
        let err = tokens.create(&rng, name, None, None).unwrap_err();
        assert!(matches!(err, TokenError::BadName(_)), "{name}: {err}");
    }
    let err = tokens
        .create(&rng, "tg", Some(vec!["../etc".into()]), None)
        .unwrap_err();
    assert!(matches!(err, TokenError::BadSkill(_)), "{err}");
    for days in [0, MAX_EXPIRES_DAYS + 1] {
        let err = tokens.create(&rng, "tg", None, Some(days)).unwrap_err();
        assert!(matches!(err, TokenError::BadExpiry(_)), "{err}");
    }
    tokens.create(&rng, "tg", None, None).unwrap();
    let err = tokens.create(&rng, "tg", None, None).unwrap_err();
    assert!(err.to_string().contains("revoke it first"), "{err}");
}
