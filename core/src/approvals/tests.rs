use std::sync::Arc;

use serde_json::{json, Value};
use skillbox_protocol::result::ErrorKind;

use super::*;

fn open(dir: &tempfile::TempDir) -> Store {
    Store::open(&Store::db_path(dir.path())).unwrap()
}

fn with_timeout(timeout_ms: u64) -> ApprovalPolicy {
    ApprovalPolicy {
        auto_approve: Vec::new(),
        timeout_ms,
        ..ApprovalPolicy::default()
    }
}

fn send_mail(args: Value) -> ApprovalRequest {
    ApprovalRequest {
        skill: "mail".to_owned(),
        tool: "send".to_owned(),
        args,
        security: Security::Write,
        requested_by: "operator".to_owned(),
        context_id: None,
    }
}

/// The id of the one pending approval, once the request has written it.
async fn pending_id(approvals: &Approvals) -> String {
    for _ in 0..500 {
        let pending = approvals.list(Some(ApprovalStatus::Pending)).unwrap();
        if let [one] = pending.as_slice() {
            return one.id.clone();
        }
        assert!(pending.len() < 2, "more than one pending: {pending:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no pending approval appeared");
}

#[test]
fn policy_matches_skill_tool_and_skill_star() {
    let policy = ApprovalPolicy {
        auto_approve: vec!["mail:send".into(), "notes:*".into(), "bare".into()],
        ..ApprovalPolicy::default()
    };
    assert!(policy.auto_approves("mail", "send"));
    assert!(!policy.auto_approves("mail", "delete"));
    assert!(policy.auto_approves("notes", "write"));
    assert!(!policy.auto_approves("notesx", "write"));
    assert!(!policy.auto_approves("bare", "x"));
    assert!(!policy.auto_approves("other", "*"));
    assert_eq!(ApprovalPolicy::default().timeout_ms, 120_000);
}

#[test]
fn policy_deserializes_with_defaults() {
    let policy: ApprovalPolicy = serde_json::from_value(json!({"auto_approve": ["a:*"]})).unwrap();
    assert_eq!(policy.timeout_ms, DEFAULT_TIMEOUT_MS);
    assert!(serde_json::from_value::<ApprovalPolicy>(json!({"timeout": 1})).is_err());
}

#[test]
fn args_hash_ignores_key_order_and_sees_values() {
    let a: Value =
        serde_json::from_str(r#"{"b":1,"a":{"y":"é\n","x":[{"d":1,"c":2.5}]}}"#).unwrap();
    let b: Value =
        serde_json::from_str(r#"{"a":{"x":[{"c":2.5,"d":1}],"y":"é\n"},"b":1}"#).unwrap();
    assert_eq!(
        canonical_json(&a),
        r#"{"a":{"x":[{"c":2.5,"d":1}],"y":"é\n"},"b":1}"#
    );
    assert_eq!(args_hash(&a), args_hash(&b));
    assert_eq!(args_hash(&a).len(), 64);
    assert_ne!(args_hash(&a), args_hash(&json!({"a": 1, "b": 1})));
    // Array order is meaningful.
    assert_ne!(args_hash(&json!([1, 2])), args_hash(&json!([2, 1])));
}

#[tokio::test]
async fn request_read_tool_needs_no_approval() {
    let dir = tempfile::tempdir().unwrap();
    let approvals = Approvals::new(open(&dir), with_timeout(60_000));
    let mut req = send_mail(json!({}));
    req.security = Security::Read;
    assert_eq!(
        approvals.request(req).await.unwrap(),
        ApprovalGrant::NotRequired
    );
    assert!(approvals.list(None).unwrap().is_empty());
}

#[tokio::test]
async fn request_auto_approved_by_policy_skips_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let policy = ApprovalPolicy {
        auto_approve: vec!["mail:*".into()],
        timeout_ms: 60_000,
        ..ApprovalPolicy::default()
    };
    let approvals = Approvals::new(open(&dir), policy);
    let grant = tokio::time::timeout(
        Duration::from_secs(1),
        approvals.request(send_mail(json!({"to": "x"}))),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(grant, ApprovalGrant::Auto);
    assert_eq!(grant.approval_id(), None);
    assert!(approvals.list(None).unwrap().is_empty());
}

#[tokio::test]
async fn request_waits_then_approved_from_another_task() {
    let dir = tempfile::tempdir().unwrap();
    let approvals = Arc::new(Approvals::new(open(&dir), with_timeout(10_000)));
    let waiting = tokio::spawn({
        let approvals = approvals.clone();
        async move { approvals.request(send_mail(json!({"to": "x"}))).await }
    });
    let id = pending_id(&approvals).await;
    assert!(!waiting.is_finished());
    let decided = approvals.decide(&id, Decision::Approve, None).unwrap();
    assert_eq!(decided.status, ApprovalStatus::Approved);

    let grant = tokio::time::timeout(Duration::from_millis(500), waiting)
        .await
        .expect("the decision wakes the waiting call at once")
        .unwrap()
        .unwrap();
    assert_eq!(grant, ApprovalGrant::Decided { id: id.clone() });
    assert_eq!(approvals.get(&id).unwrap().status, ApprovalStatus::Used);
    assert!(approvals.lock_waiters().is_empty());
}

#[tokio::test]
async fn request_denied_returns_denied_with_reason() {
    let dir = tempfile::tempdir().unwrap();
    let approvals = Arc::new(Approvals::new(open(&dir), with_timeout(10_000)));
    let waiting = tokio::spawn({
        let approvals = approvals.clone();
        async move { approvals.request(send_mail(json!({"to": "x"}))).await }
    });
    let id = pending_id(&approvals).await;
    approvals
        .decide(&id, Decision::Deny, Some("not this recipient".into()))
        .unwrap();
    let err = waiting.await.unwrap().unwrap_err();
    match &err {
        ApprovalError::Denied { id: got, reason } => {
            assert_eq!(got, &id);
            assert_eq!(reason.as_deref(), Some("not this recipient"));
        }
        other => panic!("expected Denied, got {other:?}"),
    }
    assert_eq!(err.error_kind(), ErrorKind::ApprovalDenied);
    assert!(err.to_string().contains("not this recipient"), "{err}");
    assert_eq!(approvals.get(&id).unwrap().status, ApprovalStatus::Denied);
}

#[tokio::test]
async fn request_times_out_and_expires_record() {
    let dir = tempfile::tempdir().unwrap();
    let approvals = Approvals::new(open(&dir), with_timeout(100));
    let started = std::time::Instant::now();
    let err = approvals
        .request(send_mail(json!({"to": "x"})))
        .await
        .unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(100));
    let ApprovalError::TimedOut { id, timeout_ms } = &err else {
        panic!("expected TimedOut, got {err:?}");
    };
    assert_eq!(*timeout_ms, 100);
    assert_eq!(approvals.get(id).unwrap().status, ApprovalStatus::Expired);
    assert!(
        err.to_string().contains("skillbox approvals approve"),
        "{err}"
    );
    // Too late to decide it.
    let late = approvals.decide(id, Decision::Approve, None).unwrap_err();
    assert!(
        matches!(
            late,
            ApprovalError::NotPending {
                status: ApprovalStatus::Expired,
                ..
            }
        ),
        "{late}"
    );
}

#[tokio::test]
async fn decide_unknown_id_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let approvals = Approvals::new(open(&dir), with_timeout(100));
    let err = approvals
        .decide("0123456789abcdef", Decision::Approve, None)
        .unwrap_err();
    assert!(matches!(err, ApprovalError::NotFound { .. }), "{err}");
    assert!(err.to_string().contains("skillbox approvals list"), "{err}");
    assert!(matches!(
        approvals.get("nope"),
        Err(ApprovalError::NotFound { .. })
    ));
}

#[tokio::test]
async fn decide_twice_is_refused_with_current_status() {
    let dir = tempfile::tempdir().unwrap();
    let approvals = Arc::new(Approvals::new(open(&dir), with_timeout(10_000)));
    let waiting = tokio::spawn({
        let approvals = approvals.clone();
        async move { approvals.request(send_mail(json!({}))).await }
    });
    let id = pending_id(&approvals).await;
    approvals.decide(&id, Decision::Approve, None).unwrap();
    waiting.await.unwrap().unwrap();
    let err = approvals.decide(&id, Decision::Deny, None).unwrap_err();
    assert!(err.to_string().contains("already used"), "{err}");
}

#[tokio::test]
async fn request_sees_decision_written_by_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let approvals = Arc::new(Approvals::new(open(&dir), with_timeout(10_000)));
    let waiting = tokio::spawn({
        let approvals = approvals.clone();
        async move { approvals.request(send_mail(json!({"n": 1}))).await }
    });
    let id = pending_id(&approvals).await;
    // The CLI on the same database: another connection, no in-process wake-up.
    let other = open(&dir);
    other.decide_approval(&id, Decision::Approve, None).unwrap();
    let grant = tokio::time::timeout(POLL_INTERVAL * 3, waiting)
        .await
        .expect("the poll sees the decision")
        .unwrap()
        .unwrap();
    assert_eq!(grant, ApprovalGrant::Decided { id });
}

#[tokio::test]
async fn pending_approval_survives_core_restart_and_is_single_use() {
    let dir = tempfile::tempdir().unwrap();
    let args = json!({"to": "x@example.org", "body": "hi"});

    // Before the restart: the call waits, then the core goes away mid-wait.
    let id = {
        let approvals = Arc::new(Approvals::new(open(&dir), with_timeout(60_000)));
        let waiting = tokio::spawn({
            let approvals = approvals.clone();
            let args = args.clone();
            async move { approvals.request(send_mail(args)).await }
        });
        let id = pending_id(&approvals).await;
        waiting.abort();
        assert!(waiting.await.unwrap_err().is_cancelled());
        assert!(approvals.lock_waiters().is_empty());
        id
    };

    // After the restart: a new Approvals over the same database file.
    let approvals = Approvals::new(open(&dir), with_timeout(200));
    assert_eq!(approvals.get(&id).unwrap().status, ApprovalStatus::Pending);
    approvals.decide(&id, Decision::Approve, None).unwrap();

    // The bot retries the same call (keys in another order): it runs at once.
    let retry = send_mail(json!({"body": "hi", "to": "x@example.org"}));
    let grant = tokio::time::timeout(Duration::from_millis(150), approvals.request(retry))
        .await
        .expect("an earlier approval needs no wait")
        .unwrap();
    assert_eq!(grant, ApprovalGrant::Earlier { id: id.clone() });
    assert_eq!(approvals.get(&id).unwrap().status, ApprovalStatus::Used);

    // The approval was single use: a third identical call waits again (and times out).
    let err = approvals.request(send_mail(args)).await.unwrap_err();
    let ApprovalError::TimedOut { id: third, .. } = err else {
        panic!("expected TimedOut, got {err:?}");
    };
    assert_ne!(third, id);
}

#[tokio::test]
async fn earlier_approval_is_not_used_by_a_different_call() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let approvals = Approvals::new(store.clone(), with_timeout(100));
    let first = approvals
        .request(send_mail(json!({"to": "a"})))
        .await
        .unwrap_err();
    let ApprovalError::TimedOut { id, .. } = first else {
        panic!("expected TimedOut, got {first:?}");
    };
    // Force an approved, unused record for {"to": "a"} and ask for {"to": "b"}.
    rusqlite::Connection::open(store.path())
        .unwrap()
        .execute(
            "UPDATE approvals SET status = 'approved' WHERE id = ?1",
            [&id],
        )
        .unwrap();
    let other = approvals
        .request(send_mail(json!({"to": "b"})))
        .await
        .unwrap_err();
    assert!(matches!(other, ApprovalError::TimedOut { .. }), "{other}");
    let mut other_tool = send_mail(json!({"to": "a"}));
    other_tool.tool = "delete".into();
    assert!(approvals.request(other_tool).await.is_err());
    assert_eq!(approvals.get(&id).unwrap().status, ApprovalStatus::Approved);
}

#[tokio::test]
async fn request_with_huge_timeout_still_waits_and_wakes() {
    let dir = tempfile::tempdir().unwrap();
    let approvals = Arc::new(Approvals::new(open(&dir), with_timeout(u64::MAX)));
    let waiting = tokio::spawn({
        let approvals = approvals.clone();
        async move { approvals.request(send_mail(json!({}))).await }
    });
    let id = pending_id(&approvals).await;
    approvals.decide(&id, Decision::Approve, None).unwrap();
    assert_eq!(
        waiting.await.unwrap().unwrap(),
        ApprovalGrant::Decided { id }
    );
}
