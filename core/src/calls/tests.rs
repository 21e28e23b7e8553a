//! The pipeline's refusals before anything reaches an executor.

use std::path::Path;

use serde_json::Value;
use skillbox_protocol::methods::SecretValue;
use skillbox_protocol::result::{ErrorKind, ToolResult};
use skillbox_protocol::skill::{discover, DiscoveryOptions};

use super::*;
use crate::random::fake::FailingAfter;
use skillbox_protocol::Target;

/// A dispatcher over the skill `s` (tool `t`) in `ws`, no executor listening, whose
/// random source gives `ok_draws` draws and then fails.
fn dispatcher(ws: &Path, ok_draws: usize) -> Dispatcher {
    let skills = ws.join("skills");
    std::fs::create_dir_all(skills.join("s")).unwrap();
    std::fs::write(
        skills.join("s/skill.yaml"),
        "name: s\nversion: 0.1.0\ndescription: test skill\ntools:\n  - name: t\n    \
         description: test tool\n    command: [\"true\"]\n",
    )
    .unwrap();
    let catalog = discover(&[skills], DiscoveryOptions::default());
    assert!(catalog.get("s").is_some(), "{:?}", catalog.skipped);
    test_dispatcher(ws, catalog).with_random(Arc::new(FailingAfter::new(ok_draws)))
}

#[tokio::test]
async fn call_fails_unavailable_when_no_call_id_can_be_drawn() {
    let ws = tempfile::tempdir().unwrap();
    let r = dispatcher(ws.path(), 0)
        .call_named("s:t", Value::Null)
        .await;
    assert!(!r.success);
    assert_eq!(r.error_kind, Some(ErrorKind::Unavailable));
    let error = r.error.unwrap_or_default();
    assert!(error.contains("no call id could be made"), "{error}");
    assert!(r.call_id.is_empty(), "an id of zeros: {}", r.call_id);
}

#[tokio::test]
async fn call_fails_unavailable_when_no_capability_token_can_be_drawn() {
    let ws = tempfile::tempdir().unwrap();
    let d = dispatcher(ws.path(), 1);
    let r = d.call_named("s:t", serde_json::json!({})).await;
    assert!(!r.success);
    assert_eq!(r.error_kind, Some(ErrorKind::Unavailable));
    let error = r.error.unwrap_or_default();
    assert!(
        error.contains("no capability token could be made"),
        "{error}"
    );
    // Nothing was registered for callbacks: no call holds a token of zeros.
    assert!(d.in_flight().is_empty());
    let zeros = SecretValue(base64::Engine::encode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        [0u8; 32],
    ));
    assert_eq!(
        d.in_flight().authorize(&r.call_id, &zeros).unwrap_err(),
        CallbackAuthError::UnknownCall(r.call_id.clone())
    );
}

/// The dispatcher of [`dispatcher`] with calls of process-sandbox skills answered by `fake`.
fn with_fake<F>(ws: &Path, fake: F) -> Dispatcher
where
    F: Fn(&skillbox_protocol::methods::ToolExecuteParams) -> Result<ToolResult, CallError>
        + Send
        + Sync
        + 'static,
{
    let mut d = dispatcher(ws, usize::MAX);
    d.transports.process = Arc::new(transport::Fake(fake));
    d
}

#[tokio::test]
async fn pipeline_hands_an_admitted_call_to_the_transport_with_a_fresh_token() {
    let ws = tempfile::tempdir().unwrap();
    let d = with_fake(ws.path(), |params| {
        assert_eq!((params.skill.as_str(), params.tool.as_str()), ("s", "t"));
        assert!(!params.capability_token.0.is_empty());
        Ok(ToolResult::ok(
            params.call_id.clone(),
            serde_json::json!({"ran": true}),
            1,
        ))
    });
    let r = d.call_named("s:t", serde_json::json!({})).await;
    assert!(r.success, "{r:?}");
    assert_eq!(r.data, Some(serde_json::json!({"ran": true})));
    assert_eq!(r.call_id.len(), 24);
    assert!(
        d.in_flight().is_empty(),
        "the call left the in-flight table"
    );
}

#[tokio::test]
async fn pipeline_refuses_unknown_names_before_the_transport() {
    let ws = tempfile::tempdir().unwrap();
    let d = with_fake(ws.path(), |_| panic!("nothing may run"));
    for (name, kind, says) in [
        ("nope:t", ErrorKind::NotFound, "no skill named"),
        ("s:nope", ErrorKind::NotFound, "has no tool"),
    ] {
        let r = d.call_named(name, serde_json::json!({})).await;
        assert_eq!(r.error_kind, Some(kind), "{name}: {r:?}");
        assert!(r.error.unwrap_or_default().contains(says), "{name}");
    }
}

#[tokio::test]
async fn pipeline_maps_transport_failures_to_their_kind() {
    let ws = tempfile::tempdir().unwrap();
    let d = with_fake(ws.path(), |_| Err(CallError::BadAnswer("garbage".into())));
    let r = d.call_named("s:t", serde_json::json!({})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::Protocol), "{r:?}");
    assert!(r.error.unwrap_or_default().contains("not a tool result"));
}

#[tokio::test]
async fn metrics_label_made_up_tools_as_unknown_so_a_bot_cannot_grow_them() {
    let ws = tempfile::tempdir().unwrap();
    let d = dispatcher(ws.path(), usize::MAX);
    for i in 0..20 {
        d.call_named(&format!("made-up-{i}:x"), Value::Null).await;
        d.call_named(&format!("s:nope-{i}"), Value::Null).await;
    }
    let text = d.metrics().encode(&crate::observe::Scrape::default());
    assert!(!text.contains("made-up-"), "{text}");
    assert!(!text.contains("nope-"), "{text}");
    assert!(
        text.contains(
            "skillbox_tool_calls_total{skill=\"(unknown)\",tool=\"(unknown)\",outcome=\"not_found\",bot=\"operator\"} 20"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "skillbox_tool_calls_total{skill=\"s\",tool=\"(unknown)\",outcome=\"not_found\",bot=\"operator\"} 20"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn executor_stages_go_to_the_metrics_and_never_into_the_answer() {
    let ws = tempfile::tempdir().unwrap();
    let d = with_fake(ws.path(), |params| {
        let mut r = ToolResult::ok(params.call_id.clone(), serde_json::json!({}), 3);
        r.spawn_us = Some(200);
        r.stages = Some(skillbox_protocol::result::ExecutorStages {
            queue_us: 100,
            start_us: 200,
            tool_us: 3_000,
            end_us: 50,
        });
        Ok(r)
    });
    let r = d.call_named("s:t", serde_json::json!({})).await;
    assert!(r.success, "{r:?}");
    assert_eq!((r.stages, r.spawn_us), (None, None), "{r:?}");
    let answer = serde_json::to_string(&r).unwrap();
    assert!(
        !answer.contains("stages") && !answer.contains("_us"),
        "{answer}"
    );
    let text = d.metrics().encode(&crate::observe::Scrape::default());
    for (stage, sum) in [
        ("executor_queue", "0.0001"),
        ("executor_start", "0.0002"),
        ("tool", "0.003"),
        ("executor_end", "0.00005"),
    ] {
        let line = format!("skillbox_call_stage_seconds_sum{{stage=\"{stage}\"}} {sum}");
        assert!(text.contains(&line), "{line} missing: {text}");
    }
    for stage in ["pipeline", "channel"] {
        let line = format!("skillbox_call_stage_seconds_count{{stage=\"{stage}\"}} 1");
        assert!(text.contains(&line), "{line} missing: {text}");
    }
}

#[test]
fn call_ids_are_24_hex_digits_unique_and_in_the_order_they_were_made() {
    let ws = tempfile::tempdir().unwrap();
    let d = dispatcher(ws.path(), usize::MAX);
    let first = d.new_call_id().unwrap();
    let many: Vec<String> = (0..1000).map(|_| d.new_call_id().unwrap()).collect();
    std::thread::sleep(std::time::Duration::from_millis(2));
    let later = d.new_call_id().unwrap();
    for id in many.iter().chain([&first, &later]) {
        assert!(
            id.len() == 24 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
    }
    let distinct: std::collections::HashSet<&String> = many.iter().collect();
    assert_eq!(distinct.len(), many.len(), "a call id came twice");
    assert!(first < later, "{first} was made before {later}");
}

fn limited_bot(skills: &[&str]) -> crate::auth::CallOrigin {
    crate::auth::CallOrigin::new(
        crate::auth::Caller::Bot(std::sync::Arc::new(crate::auth::Bot {
            name: "tg".into(),
            skills: Some(skills.iter().map(|s| s.to_string()).collect()),
        })),
        Some("chat-1".into()),
    )
}

#[tokio::test]
async fn a_bot_limited_to_other_skills_is_refused_before_the_skill_is_looked_up() {
    let ws = tempfile::tempdir().unwrap();
    let d = dispatcher(ws.path(), usize::MAX);
    let bot = limited_bot(&["other"]);
    for tool in ["s:nope", "made-up:x"] {
        let call = ToolCall::new(Target::parse(tool).unwrap(), Value::Null, bot.clone());
        let r = d.call(call).await;
        assert_eq!(
            r.error_kind,
            Some(ErrorKind::PermissionDenied),
            "{tool}: {r:?}"
        );
        let why = r.error.unwrap_or_default();
        assert!(
            why.contains("may not use skill") && why.contains("only other"),
            "{why}"
        );
    }
}

#[tokio::test]
async fn a_call_is_recorded_with_the_bot_that_asked() {
    let ws = tempfile::tempdir().unwrap();
    let d = dispatcher(ws.path(), usize::MAX);
    let call = ToolCall::new(
        Target::parse("s:nope").unwrap(),
        Value::Null,
        limited_bot(&["s"]),
    );
    let r = d.call(call).await;
    assert_eq!(r.error_kind, Some(ErrorKind::NotFound), "{r:?}");
    let recorded = d.store().get_call(&r.call_id).unwrap().unwrap();
    assert_eq!(recorded.caller, "tg");
    let text = d.metrics().encode(&crate::observe::Scrape::default());
    assert!(text.contains("bot=\"tg\""), "{text}");
}
