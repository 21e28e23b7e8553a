//! What an approval card shows before an operator decides: the exact payload with hidden
//! characters as badges and its warnings (acknowledged before approving), what the tool
//! does and what its skill may use, and recent decisions newest first.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use http::{Method, StatusCode};
use serde_json::json;
use skillbox_protocol::skill::{discover, DiscoveryOptions, Security};

use super::{gateway, pending, send, session, setup, status_of, ORIGIN};
use crate::gateway::console::ConsoleSection;
use crate::state::store::{ApprovalRecord, ApprovalStatus};

/// The payload of the attack: the bot shows "bob" and one amount, the signature covers a
/// right-to-left override, a zero-width space and a second amount.
const ATTACK: &str = "{\"to\":\"bob\u{202E}\u{200B}\",\"amount\":1,\"amount\":1000000,\"fee\":100000000000000000000}";

fn sign_args(text: &str) -> serde_json::Value {
    json!({"sign": {"type": "transaction", "data": STANDARD.encode(text)}})
}

async fn page(gw: &crate::gateway::Gateway, path: &str, cookie: &str) -> String {
    let a = send(gw, Method::GET, path, &[("cookie", cookie)], "").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    a.body
}

#[tokio::test]
async fn sign_card_shows_the_exact_bytes_with_hidden_characters_as_badges_and_warns() {
    let (_dir, gw) = setup();
    pending(&gw, "ap_1", Security::Sign, sign_args(ATTACK));
    let (cookie, _) = session(&gw);
    let body = page(&gw, "/console/approvals/ap_1", &cookie).await;
    // Both amounts and every digit, in the order they will be signed: no re-encoding.
    assert!(
        body.contains("&quot;amount&quot;:1,&quot;amount&quot;:1000000,&quot;fee&quot;:100000000000000000000}"),
        "{body}"
    );
    assert!(!body.contains("1e+20") && !body.contains("1e20"), "{body}");
    // The invisible characters are drawn as badges, never as themselves.
    assert!(
        !body.contains('\u{202E}') && !body.contains('\u{200B}'),
        "{body}"
    );
    assert!(
        body.contains("bob<span class=\"cp\" data-hidden-char"),
        "{body}"
    );
    assert!(body.contains("&lt;U+202E&gt;</span>"), "{body}");
    assert!(body.contains("&lt;U+200B&gt;</span>"), "{body}");
    for kind in ["duplicate_key", "inexact_number", "invisible_character"] {
        assert!(
            body.contains(&format!("data-warning=\"{kind}\"")),
            "{kind}: {body}"
        );
    }
    assert!(body.contains("name=\"acknowledge\""), "{body}");
}

#[tokio::test]
async fn approving_a_warned_payload_without_acknowledging_it_is_refused() {
    let (_dir, gw) = setup();
    pending(&gw, "ap_1", Security::Sign, sign_args(ATTACK));
    pending(
        &gw,
        "ap_2",
        Security::Write,
        json!({"path": "invoice\u{202E}fdp.exe"}),
    );
    let (cookie, csrf) = session(&gw);
    let headers = [("origin", ORIGIN), ("cookie", cookie.as_str())];
    for id in ["ap_1", "ap_2"] {
        let path = format!("/console/approvals/{id}");
        for form in [
            format!("decision=approve&csrf={csrf}"),
            format!("decision=approve&csrf={csrf}&acknowledge=no"),
        ] {
            let a = send(&gw, Method::POST, &path, &headers, &form).await;
            assert_eq!(a.status, StatusCode::BAD_REQUEST, "{id}: {}", a.body);
            assert!(a.body.contains("Not approved"), "{}", a.body);
            assert!(a.body.contains("I have read the warnings"), "{}", a.body);
            assert_eq!(status_of(&gw, id), ApprovalStatus::Pending);
        }
    }
    let form = format!("decision=approve&csrf={csrf}&acknowledge=yes");
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
    // Denying needs no acknowledgement.
    let form = format!("decision=deny&csrf={csrf}");
    let a = send(
        &gw,
        Method::POST,
        "/console/approvals/ap_2",
        &headers,
        &form,
    )
    .await;
    assert_eq!(a.status, StatusCode::SEE_OTHER, "{}", a.body);
    assert_eq!(status_of(&gw, "ap_2"), ApprovalStatus::Denied);
}

#[tokio::test]
async fn card_shows_what_the_tool_does_and_what_its_skill_may_use() {
    let dir = tempfile::tempdir().unwrap();
    let skills = dir.path().join("skills");
    std::fs::create_dir_all(skills.join("notes")).unwrap();
    std::fs::write(
        skills.join("notes/skill.yaml"),
        "name: notes\nversion: 0.1.0\ndescription: notes\npermissions:\n  network: [\"https://api.example.com\"]\n  \
         env: [NOTES_TOKEN]\n  workspace: { read: [\"notes/**\"] }\ntools:\n  - name: append\n    \
         description: Appends a line to the shared notes file\n    command: [\"true\"]\n    security: write\n",
    )
    .unwrap();
    let catalog = discover(std::slice::from_ref(&skills), DiscoveryOptions::default());
    assert!(catalog.get("notes").is_some(), "{:?}", catalog.skipped);
    let gw = gateway(dir.path(), &ConsoleSection::default(), catalog, skills);
    pending(&gw, "ap_1", Security::Write, json!({"text": "hi"}));
    let (cookie, _) = session(&gw);
    let body = page(&gw, "/console/approvals", &cookie).await;
    for want in [
        "<dd data-tool-description>Appends a line to the shared notes file</dd>",
        "<dd data-security>write</dd>",
        "<dd data-network><code>https://api.example.com</code></dd>",
        "<dd data-env><code>NOTES_TOKEN</code></dd>",
        "<dd data-workspace><code>notes/**</code></dd>",
    ] {
        assert!(body.contains(want), "{want}: {body}");
    }
}

#[tokio::test]
async fn decided_recently_lists_the_newest_decision_first() {
    let (_dir, gw) = setup();
    // Records made from one the store wrote, whatever fields a record carries.
    pending(&gw, "ap_base", Security::Write, json!({}));
    let base = gw.approvals.approvals.get("ap_base").unwrap();
    let decided = |id: &str, created_at: i64, decided_at: i64, status| ApprovalRecord {
        id: id.to_string(),
        status,
        created_at,
        decided_at: Some(decided_at),
        ..base.clone()
    };
    let store = &gw.records.store;
    // Asked first, decided last.
    store
        .insert_approval(&decided("ap_old", 1_000, 9_000, ApprovalStatus::Denied))
        .unwrap();
    store
        .insert_approval(&decided("ap_new", 5_000, 6_000, ApprovalStatus::Approved))
        .unwrap();
    let (cookie, _) = session(&gw);
    let body = page(&gw, "/console/approvals", &cookie).await;
    let table = &body[body.find("id=\"decided\"").expect("the decided table")..];
    let old = table.find("data-approval=\"ap_old\"").unwrap();
    let new = table.find("data-approval=\"ap_new\"").unwrap();
    assert!(old < new, "decided later, listed first: {table}");
    // Compact: one row each, no decision forms.
    assert!(!table.contains("<form"), "{table}");
}

#[tokio::test]
async fn card_names_the_bot_and_context_that_asked_and_who_decided() {
    let (_dir, gw) = setup();
    // The fixture's approvals are asked by bot "tg" in context "chat-1".
    pending(&gw, "ap_bot", Security::Sign, sign_args("{\"to\":\"bob\"}"));
    let (cookie, _) = session(&gw);
    let body = page(&gw, "/console/approvals/ap_bot", &cookie).await;
    assert!(body.contains("<dd data-requested-by>tg</dd>"), "{body}");
    assert!(body.contains("<dd data-context>chat-1</dd>"), "{body}");
    assert!(!body.contains("data-decided-by"), "{body}");
    gw.calls
        .pipeline
        .approvals()
        .decide("ap_bot", crate::approvals::Decision::Deny, None)
        .unwrap();
    let body = page(&gw, "/console/approvals/ap_bot", &cookie).await;
    assert!(body.contains("<dd data-decided-by>operator</dd>"), "{body}");
}

#[tokio::test]
async fn an_update_confirmation_shows_its_changes_and_offers_no_allowance() {
    let (_dir, gw) = setup();
    let changes = json!({"update": {"from": "a1", "to": "b2", "widens": true},
                         "changes": {"hosts_added": ["upload.example"]}});
    gw.calls
        .pipeline
        .store()
        .insert_approval(&ApprovalRecord {
            id: "ap_u".into(),
            skill: "notes".into(),
            tool: "skillbox.update".into(),
            args_hash: "0".repeat(64),
            args: changes,
            security: Security::Write,
            status: ApprovalStatus::Pending,
            created_at: crate::state::store::unix_ms_now(),
            decided_at: None,
            reason: None,
            requested_by: "operator".into(),
            context_id: None,
            decided_by: None,
        })
        .unwrap();
    let (cookie, csrf) = session(&gw);
    let body = page(&gw, "/console/approvals/ap_u", &cookie).await;
    assert!(body.contains("upload.example"), "{body}");
    assert!(!body.contains("allow_minutes"), "{body}");
    // Asked for anyway: refused, the approval stays pending.
    let headers = [("origin", ORIGIN), ("cookie", cookie.as_str())];
    let form = format!("decision=approve&csrf={csrf}&allow_minutes=15");
    let a = send(
        &gw,
        Method::POST,
        "/console/approvals/ap_u",
        &headers,
        &form,
    )
    .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.body);
    assert!(a.body.contains("asked every time"), "{}", a.body);
    assert_eq!(status_of(&gw, "ap_u"), ApprovalStatus::Pending);
}
