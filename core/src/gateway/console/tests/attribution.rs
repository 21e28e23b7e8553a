//! The console says which bot asked: the calls page names each call's caller.

use http::{Method, StatusCode};

use super::{send, session, setup};
use crate::state::store::CallRecord;

#[tokio::test]
async fn calls_page_names_the_bot_that_made_each_call() {
    let (_dir, gw) = setup();
    for (id, caller) in [("c-bot", "telegram"), ("c-op", "operator")] {
        gw.records
            .store
            .record_call(&CallRecord {
                call_id: id.into(),
                skill: "notes".into(),
                tool: "append".into(),
                started_at: 1,
                duration_ms: 2,
                success: true,
                error_kind: None,
                caller: caller.into(),
                egress: Vec::new(),
                egress_unlisted: 0,
            })
            .unwrap();
    }
    let (cookie, _) = session(&gw);
    let page = send(
        &gw,
        Method::GET,
        "/console/calls",
        &[("cookie", &cookie)],
        "",
    )
    .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("Asked by"), "{}", page.body);
    for caller in ["telegram", "operator"] {
        assert!(
            page.body
                .contains(&format!("<td class=\"caller\">{caller}</td>")),
            "{caller} missing: {}",
            page.body
        );
    }
}
