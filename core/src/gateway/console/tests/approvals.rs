//! Deciding approvals from the console: the guard on each post, allowances and their
//! bounds, and what the pages show (escaped, with a signature's payload and hash).

use http::{Method, StatusCode};
use serde_json::json;
use skillbox_protocol::skill::Security;

use super::{pending, send, session, setup, status_of, Headers, ORIGIN};
use crate::approvals::{ApprovalRequest, Decision};
use crate::state::store::{unix_ms_now, ApprovalStatus};

#[tokio::test]
async fn decide_refuses_missing_or_wrong_csrf_and_cross_origin_then_approves() {
    let (_dir, gw) = setup();
    pending(&gw, "ap_1", Security::Write, json!({}));
    let (cookie, csrf) = session(&gw);
    let (_, other_csrf) = session(&gw);
    let cases: [(Headers<'_>, String, &str); 4] = [
        (
            &[("origin", ORIGIN)],
            "decision=approve".into(),
            "CSRF token",
        ),
        (
            &[("origin", ORIGIN)],
            format!("decision=approve&csrf={other_csrf}"),
            "CSRF token",
        ),
        (
            &[("origin", "http://127.0.0.1:9999")],
            format!("decision=approve&csrf={csrf}"),
            "cross-site requests are refused",
        ),
        (
            &[],
            format!("decision=approve&csrf={csrf}"),
            "no Origin header",
        ),
    ];
    for (headers, form, why) in cases {
        let mut headers = headers.to_vec();
        headers.push(("cookie", cookie.as_str()));
        let a = send(
            &gw,
            Method::POST,
            "/console/approvals/ap_1",
            &headers,
            &form,
        )
        .await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{form}");
        assert!(a.body.contains(why), "{why}: {}", a.body);
        assert_eq!(status_of(&gw, "ap_1"), ApprovalStatus::Pending);
    }
    let form = format!("decision=approve&csrf={csrf}&reason=");
    let a = send(
        &gw,
        Method::POST,
        "/console/approvals/ap_1",
        &[("origin", ORIGIN), ("cookie", cookie.as_str())],
        &form,
    )
    .await;
    assert_eq!(a.status, StatusCode::SEE_OTHER, "{}", a.body);
    assert_eq!(status_of(&gw, "ap_1"), ApprovalStatus::Approved);
    // Decided once: a second decision is refused with the API's reason.
    let a = send(
        &gw,
        Method::POST,
        "/console/approvals/ap_1",
        &[("origin", ORIGIN), ("cookie", cookie.as_str())],
        &form,
    )
    .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(
        a.body.contains("only a pending approval can be decided"),
        "{}",
        a.body
    );
}

#[tokio::test]
async fn deny_with_a_reason_records_it() {
    let (_dir, gw) = setup();
    pending(&gw, "ap_1", Security::Write, json!({}));
    let (cookie, csrf) = session(&gw);
    let form = format!("decision=deny&csrf={csrf}&reason=not+today");
    let a = send(
        &gw,
        Method::POST,
        "/console/approvals/ap_1",
        &[("origin", ORIGIN), ("cookie", cookie.as_str())],
        &form,
    )
    .await;
    assert_eq!(a.status, StatusCode::SEE_OTHER, "{}", a.body);
    let r = gw.approvals.approvals.get("ap_1").unwrap();
    assert_eq!(r.status, ApprovalStatus::Denied);
    assert_eq!(r.reason.as_deref(), Some("not today"));
}

#[tokio::test]
async fn allowance_over_the_limit_approves_nothing_and_one_within_it_is_listed() {
    let (_dir, gw) = setup();
    pending(&gw, "ap_1", Security::Write, json!({}));
    let (cookie, csrf) = session(&gw);
    let headers = [("origin", ORIGIN), ("cookie", cookie.as_str())];
    let form = format!("decision=approve&csrf={csrf}&allow_minutes=61");
    let a = send(
        &gw,
        Method::POST,
        "/console/approvals/ap_1",
        &headers,
        &form,
    )
    .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.body.contains("allow_max_minutes"), "{}", a.body);
    assert_eq!(status_of(&gw, "ap_1"), ApprovalStatus::Pending);
    let form = format!("decision=approve&csrf={csrf}&allow_minutes=5");
    let a = send(
        &gw,
        Method::POST,
        "/console/approvals/ap_1",
        &headers,
        &form,
    )
    .await;
    assert_eq!(a.status, StatusCode::SEE_OTHER, "{}", a.body);
    assert_eq!(status_of(&gw, "ap_1"), ApprovalStatus::Approved);
    let grants = gw.approvals.approvals.grants().list(unix_ms_now());
    assert_eq!(grants.len(), 1);
    let page = send(
        &gw,
        Method::GET,
        "/console/approvals",
        &[("cookie", cookie.as_str())],
        "",
    )
    .await;
    assert!(
        page.body
            .contains(&format!("data-allowance=\"{}\"", grants[0].id)),
        "{}",
        page.body
    );
    // Revoking needs the guard too.
    let path = format!("/console/allowances/{}/revoke", grants[0].id);
    let a = send(
        &gw,
        Method::POST,
        &path,
        &[("origin", ORIGIN), ("cookie", cookie.as_str())],
        "csrf=wrong",
    )
    .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    let a = send(&gw, Method::POST, &path, &headers, &format!("csrf={csrf}")).await;
    assert_eq!(a.status, StatusCode::SEE_OTHER);
    assert!(gw
        .approvals
        .approvals
        .grants()
        .list(unix_ms_now())
        .is_empty());
}

#[tokio::test]
async fn allowance_with_an_already_denied_approval_is_refused_and_not_written() {
    let (_dir, gw) = setup();
    pending(&gw, "ap_1", Security::Write, json!({"text": "x"}));
    let approvals = std::sync::Arc::clone(&gw.approvals.approvals);
    approvals.decide("ap_1", Decision::Deny, None).unwrap();
    let (cookie, csrf) = session(&gw);
    let form = format!("decision=approve&csrf={csrf}&allow_minutes=30");
    let a = send(
        &gw,
        Method::POST,
        "/console/approvals/ap_1",
        &[("origin", ORIGIN), ("cookie", cookie.as_str())],
        &form,
    )
    .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.body);
    assert!(a.body.contains("Not done"), "{}", a.body);
    assert!(a.body.contains("already denied"), "{}", a.body);
    assert_eq!(status_of(&gw, "ap_1"), ApprovalStatus::Denied);
    assert!(approvals.grants().list(unix_ms_now()).is_empty());
    // The next call of the tool asks again instead of running on an allowance.
    let mut asked = approvals.watch_asked();
    let caller = std::sync::Arc::clone(&approvals);
    // Whatever else a request carries (who asks, from which context) stays at its default.
    #[allow(clippy::needless_update)]
    let next = ApprovalRequest {
        skill: "notes".into(),
        tool: "append".into(),
        args: json!({"text": "next"}),
        security: Security::Write,
        ..ApprovalRequest::default()
    };
    let mut call = tokio::spawn(async move { caller.request(next).await });
    tokio::select! {
        record = asked.recv() => {
            let record = record.unwrap();
            assert_eq!((record.skill.as_str(), record.tool.as_str()), ("notes", "append"));
            assert_eq!(record.status, ApprovalStatus::Pending);
        }
        ran = &mut call => panic!("the call did not wait for an approval: {ran:?}"),
    }
    call.abort();
}

#[tokio::test]
async fn sign_approval_cannot_carry_an_allowance() {
    let (_dir, gw) = setup();
    pending(
        &gw,
        "ap_1",
        Security::Sign,
        json!({"sign": {"type": "message", "data": "aGk="}}),
    );
    let (cookie, csrf) = session(&gw);
    let form = format!("decision=approve&csrf={csrf}&allow_minutes=5");
    let a = send(
        &gw,
        Method::POST,
        "/console/approvals/ap_1",
        &[("origin", ORIGIN), ("cookie", cookie.as_str())],
        &form,
    )
    .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.body.contains("only write tools"), "{}", a.body);
    assert_eq!(status_of(&gw, "ap_1"), ApprovalStatus::Pending);
}

#[tokio::test]
async fn approvals_page_escapes_what_bots_and_skills_send() {
    let (_dir, gw) = setup();
    pending(
        &gw,
        "ap_1",
        Security::Write,
        json!({"text": "<script>alert(1)</script><img src=x onerror=alert(2)>"}),
    );
    let (cookie, _) = session(&gw);
    let page = send(
        &gw,
        Method::GET,
        "/console/approvals",
        &[("cookie", cookie.as_str())],
        "",
    )
    .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(!page.body.contains("<script>alert"), "{}", page.body);
    assert!(!page.body.contains("<img src=x"), "{}", page.body);
    assert!(
        page.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{}",
        page.body
    );
}

#[tokio::test]
async fn sign_approval_page_shows_the_decoded_payload_and_its_hash() {
    let (_dir, gw) = setup();
    // "pay 1 coin to bob"
    pending(
        &gw,
        "ap_1",
        Security::Sign,
        json!({"sign": {"type": "message", "data": "cGF5IDEgY29pbiB0byBib2I="}}),
    );
    let (cookie, _) = session(&gw);
    let page = send(
        &gw,
        Method::GET,
        "/console/approvals/ap_1",
        &[("cookie", cookie.as_str())],
        "",
    )
    .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body
            .contains("<pre data-payload-text>pay 1 coin to bob</pre>"),
        "{}",
        page.body
    );
    let sha = crate::approvals::hex(
        ring::digest::digest(&ring::digest::SHA256, b"pay 1 coin to bob").as_ref(),
    );
    assert!(
        page.body
            .contains(&format!("<code data-payload-sha256>{sha}</code>")),
        "{}",
        page.body
    );
    let missing = send(
        &gw,
        Method::GET,
        "/console/approvals/ap_nope",
        &[("cookie", cookie.as_str())],
        "",
    )
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn approvals_page_echoes_no_text_from_its_url() {
    let (_dir, gw) = setup();
    let (cookie, _) = session(&gw);
    let headers = [("cookie", cookie.as_str())];
    let page = send(
        &gw,
        Method::GET,
        "/console/approvals?done=approved",
        &headers,
        "",
    )
    .await;
    assert!(page.body.contains("Approval approved."), "{}", page.body);
    let page = send(
        &gw,
        Method::GET,
        "/console/approvals?done=call+555-0100",
        &headers,
        "",
    )
    .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(!page.body.contains("555-0100"), "{}", page.body);
}
