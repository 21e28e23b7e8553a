//! The approvals table's life: insert, decide, expire, use, and the races between them.

use super::*;
use serde_json::json;

fn pending(id: &str, args: Value) -> ApprovalRecord {
    ApprovalRecord {
        id: id.to_owned(),
        skill: "mail".to_owned(),
        tool: "send".to_owned(),
        args_hash: format!("hash-of-{args}"),
        args,
        security: Security::Write,
        status: ApprovalStatus::Pending,
        created_at: unix_ms_now(),
        decided_at: None,
        reason: None,
        requested_by: "operator".to_owned(),
        context_id: None,
        decided_by: None,
    }
}

fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Store::db_path(dir.path())).unwrap();
    (dir, store)
}

#[test]
fn insert_then_get_round_trips() {
    let (_dir, store) = open();
    let record = pending("a1", json!({"to": "x@example.org", "n": [1, 2.5, null]}));
    store.insert_approval(&record).unwrap();
    assert_eq!(store.get_approval("a1").unwrap(), Some(record));
    assert_eq!(store.get_approval("nope").unwrap(), None);
}

#[test]
fn list_filters_by_status() {
    let (_dir, store) = open();
    store.insert_approval(&pending("a1", json!({}))).unwrap();
    store.insert_approval(&pending("a2", json!({}))).unwrap();
    store
        .decide_approval("a2", Decision::Deny, Some("no"))
        .unwrap();
    let ids = |s| -> Vec<String> {
        store
            .list_approvals(s)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect()
    };
    assert_eq!(ids(None), ["a1", "a2"]);
    assert_eq!(ids(Some(ApprovalStatus::Pending)), ["a1"]);
    assert_eq!(ids(Some(ApprovalStatus::Denied)), ["a2"]);
    assert!(ids(Some(ApprovalStatus::Used)).is_empty());
}

#[test]
fn decide_sets_status_time_and_reason() {
    let (_dir, store) = open();
    store.insert_approval(&pending("a1", json!({}))).unwrap();
    let decided = store
        .decide_approval("a1", Decision::Approve, Some("looks fine"))
        .unwrap();
    assert_eq!(decided.status, ApprovalStatus::Approved);
    assert!(decided.decided_at.is_some());
    assert_eq!(decided.reason.as_deref(), Some("looks fine"));
    assert_eq!(store.get_approval("a1").unwrap(), Some(decided));
}

#[test]
fn decide_twice_is_refused_with_current_status() {
    let (_dir, store) = open();
    store.insert_approval(&pending("a1", json!({}))).unwrap();
    store.decide_approval("a1", Decision::Deny, None).unwrap();
    let err = store
        .decide_approval("a1", Decision::Approve, None)
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::NotPending {
                status: ApprovalStatus::Denied,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("already denied"), "{err}");
    // The refused decision changed nothing.
    let record = store.get_approval("a1").unwrap().unwrap();
    assert_eq!(record.status, ApprovalStatus::Denied);
}

#[test]
fn decide_unknown_id_is_not_found() {
    let (_dir, store) = open();
    let err = store
        .decide_approval("ghost", Decision::Approve, None)
        .unwrap_err();
    assert!(matches!(err, StoreError::ApprovalNotFound { .. }), "{err}");
}

#[test]
fn expire_only_pending() {
    let (_dir, store) = open();
    store.insert_approval(&pending("a1", json!({}))).unwrap();
    let expired = store.expire_approval("a1").unwrap();
    assert_eq!(expired.status, ApprovalStatus::Expired);
    let err = store.expire_approval("a1").unwrap_err();
    assert!(matches!(err, StoreError::NotPending { .. }), "{err}");
    let err = store
        .decide_approval("a1", Decision::Approve, None)
        .unwrap_err();
    assert!(err.to_string().contains("already expired"), "{err}");
}

#[test]
fn usable_approval_is_single_use() {
    let (_dir, store) = open();
    let record = pending("a1", json!({"x": 1}));
    let hash = record.args_hash.clone();
    store.insert_approval(&record).unwrap();
    assert_eq!(
        store
            .find_usable_approval("mail", "send", &hash, "operator")
            .unwrap(),
        None
    );
    store
        .decide_approval("a1", Decision::Approve, None)
        .unwrap();
    assert_eq!(
        store
            .find_usable_approval("mail", "other", &hash, "operator")
            .unwrap(),
        None
    );
    let found = store
        .find_usable_approval("mail", "send", &hash, "operator")
        .unwrap()
        .unwrap();
    assert_eq!(found.id, "a1");
    assert_eq!(store.mark_used("a1").unwrap().status, ApprovalStatus::Used);
    assert_eq!(
        store
            .find_usable_approval("mail", "send", &hash, "operator")
            .unwrap(),
        None
    );
    let err = store.mark_used("a1").unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::NotApproved {
                status: ApprovalStatus::Used,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn claim_takes_an_approval_once() {
    let (_dir, store) = open();
    let record = pending("a1", json!({"x": 1}));
    let hash = record.args_hash.clone();
    store.insert_approval(&record).unwrap();
    assert_eq!(
        store
            .claim_usable_approval("mail", "send", &hash, "operator")
            .unwrap(),
        None
    );
    store
        .decide_approval("a1", Decision::Approve, None)
        .unwrap();
    let claimed = store
        .claim_usable_approval("mail", "send", &hash, "operator")
        .unwrap()
        .unwrap();
    assert_eq!(claimed.status, ApprovalStatus::Used);
    assert_eq!(store.get_approval("a1").unwrap(), Some(claimed));
    assert_eq!(
        store
            .claim_usable_approval("mail", "send", &hash, "operator")
            .unwrap(),
        None
    );
}

#[test]
fn status_check_constraint_rejects_unknown_status() {
    let (_dir, store) = open();
    store.insert_approval(&pending("a1", json!({}))).unwrap();
    let err = store
        .conn()
        .execute("UPDATE approvals SET status = 'maybe' WHERE id = 'a1'", [])
        .unwrap_err();
    assert!(err.to_string().contains("CHECK"), "{err}");
}

#[test]
fn reopening_keeps_approvals() {
    let dir = tempfile::tempdir().unwrap();
    let path = Store::db_path(dir.path());
    let record = pending("a1", json!({"k": "v"}));
    {
        let store = Store::open(&path).unwrap();
        store.insert_approval(&record).unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.get_approval("a1").unwrap(), Some(record));
}

#[test]
fn approval_of_one_bot_is_never_used_by_another_callers_identical_call() {
    let (_dir, store) = open();
    let mut record = pending("a1", json!({"x": 1}));
    record.requested_by = "bot-a".to_owned();
    let hash = record.args_hash.clone();
    store.insert_approval(&record).unwrap();
    let decided = store
        .decide_approval("a1", Decision::Approve, None)
        .unwrap();
    assert_eq!(decided.decided_by.as_deref(), Some("operator"));
    for other in ["bot-b", "operator"] {
        assert_eq!(
            store
                .claim_usable_approval("mail", "send", &hash, other)
                .unwrap(),
            None,
            "{other} took bot-a's approval"
        );
    }
    let claimed = store
        .claim_usable_approval("mail", "send", &hash, "bot-a")
        .unwrap()
        .unwrap();
    assert_eq!(claimed.id, "a1");
    assert_eq!(claimed.requested_by, "bot-a");
}

#[test]
fn decision_by_a_bot_is_recorded() {
    let (_dir, store) = open();
    store.insert_approval(&pending("a1", json!({}))).unwrap();
    let r = store
        .decide_approval_by("a1", Decision::Approve, None, "bot-a")
        .unwrap();
    assert_eq!(r.decided_by.as_deref(), Some("bot-a"));
    assert_eq!(store.get_approval("a1").unwrap().unwrap(), r);
}
