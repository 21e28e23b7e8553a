//! The command-session built-ins and `run_skill_script` on the pipeline: their refusals
//! before anything reaches an executor, and what a script call carries to it.

use std::path::Path;
use std::sync::Mutex;

use serde_json::{json, Value};
use skillbox_protocol::methods::{ScriptRun, ToolExecuteParams};
use skillbox_protocol::result::{ErrorKind, ToolResult};
use skillbox_protocol::skill::{discover, DiscoveryOptions};
use skillbox_protocol::Target;

use super::*;
use crate::auth::{CallOrigin, Caller};

/// A published-shaped skill `pdf` (SKILL.md and a script, no tools) and a skill `mail`
/// with a `write` tool and a script, in `ws`.
fn dispatcher(ws: &Path) -> Dispatcher {
    let skills = ws.join("skills");
    std::fs::create_dir_all(skills.join("pdf/scripts")).unwrap();
    std::fs::write(
        skills.join("pdf/SKILL.md"),
        "---\nname: pdf\ndescription: fill PDF forms\n---\nRun `python3 {baseDir}/scripts/fill.py in.pdf out.pdf`.\n",
    )
    .unwrap();
    std::fs::write(skills.join("pdf/scripts/fill.py"), "print('ok')\n").unwrap();
    std::fs::create_dir_all(skills.join("mail/scripts")).unwrap();
    std::fs::write(
        skills.join("mail/skill.yaml"),
        "name: mail\nversion: 0.1.0\ndescription: send mail\ntools:\n  - name: send\n    \
         description: send\n    security: write\n    command: [\"python3\", \"scripts/send.py\"]\n",
    )
    .unwrap();
    std::fs::write(skills.join("mail/scripts/send.py"), "print('sent')\n").unwrap();
    let catalog = discover(&[skills], DiscoveryOptions::default());
    assert!(catalog.get("pdf").is_some(), "{:?}", catalog.skipped);
    assert!(catalog.get("mail").is_some(), "{:?}", catalog.skipped);
    test_dispatcher(ws, catalog)
}

async fn call_in(d: &Dispatcher, context: Option<&str>, name: &str, args: Value) -> ToolResult {
    let origin = CallOrigin::new(Caller::Operator, context.map(str::to_string));
    d.call(ToolCall::new(Target::parse(name).unwrap(), args, origin))
        .await
}

#[tokio::test]
async fn the_session_tools_need_a_context() {
    let ws = tempfile::tempdir().unwrap();
    let d = dispatcher(ws.path());
    for (name, args) in [
        ("exec_command", json!({"cmd": "true"})),
        ("write_stdin", json!({"session_id": "sess_x"})),
        ("close_context", json!({})),
    ] {
        let r = call_in(&d, None, name, args).await;
        assert_eq!(r.error_kind, Some(ErrorKind::InvalidArgs), "{name}: {r:?}");
        let error = r.error.unwrap_or_default();
        assert!(error.contains("needs a context"), "{name}: {error}");
    }
}

#[tokio::test]
async fn a_session_id_this_context_does_not_hold_is_not_found() {
    let ws = tempfile::tempdir().unwrap();
    let d = dispatcher(ws.path());
    let r = call_in(
        &d,
        Some("c1"),
        "write_stdin",
        json!({"session_id": "sess_made_up", "chars": "x"}),
    )
    .await;
    assert_eq!(r.error_kind, Some(ErrorKind::NotFound), "{r:?}");
    assert!(r
        .error
        .unwrap_or_default()
        .contains("no session \"sess_made_up\" in context \"c1\""));
    let r = call_in(
        &d,
        Some("c1"),
        "close_context",
        json!({"session_id": "sess_made_up"}),
    )
    .await;
    assert_eq!(r.error_kind, Some(ErrorKind::NotFound), "{r:?}");
    // Closing every session of a context that has none closes none.
    let r = call_in(&d, Some("c1"), "close_context", json!({})).await;
    assert!(r.success, "{r:?}");
    assert_eq!(r.data, Some(json!({"closed": 0})));
}

#[tokio::test]
async fn bad_exec_arguments_are_refused_by_name() {
    let ws = tempfile::tempdir().unwrap();
    let d = dispatcher(ws.path());
    for (args, says) in [
        (json!({"cmd": ""}), "\"cmd\" is empty"),
        (json!({"cmd": []}), "empty list"),
        (json!({"cmd": 3}), "exec_command"),
        (json!({"cmd": "ls", "shell": "bash"}), "unknown field"),
    ] {
        let r = call_in(&d, Some("c1"), "exec_command", args.clone()).await;
        assert_eq!(r.error_kind, Some(ErrorKind::InvalidArgs), "{args}: {r:?}");
        let error = r.error.unwrap_or_default();
        assert!(error.contains(says), "{args}: {error}");
    }
    let r = call_in(
        &d,
        Some("c1"),
        "exec_command",
        json!({"cmd": "ls", "skill": "nope"}),
    )
    .await;
    assert_eq!(r.error_kind, Some(ErrorKind::NotFound), "{r:?}");
}

#[tokio::test]
async fn exec_turned_off_refuses_the_session_tools() {
    let ws = tempfile::tempdir().unwrap();
    let d = dispatcher(ws.path());
    let mut config = (*d.load().config()).clone();
    config.exec.enabled = false;
    let catalog = discover(&[ws.path().join("skills")], DiscoveryOptions::default());
    d.load().set_catalog(catalog, Some(config));
    let r = call_in(&d, Some("c1"), "exec_command", json!({"cmd": "true"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::PermissionDenied), "{r:?}");
    assert!(r
        .error
        .unwrap_or_default()
        .contains("[exec] enabled = false"));
}

#[tokio::test]
async fn a_script_call_carries_the_script_its_args_and_in_a_context_the_files() {
    let ws = tempfile::tempdir().unwrap();
    let seen: std::sync::Arc<Mutex<Vec<ToolExecuteParams>>> = Default::default();
    let log = std::sync::Arc::clone(&seen);
    let d = dispatcher(ws.path()).with_fake_transport(move |p| {
        log.lock().unwrap().push(p.clone());
        Ok(ToolResult::ok(
            p.call_id.clone(),
            json!({"stdout": "ok"}),
            1,
        ))
    });
    let args = json!({"name": "pdf", "script": "fill.py", "args": ["in.pdf", "out.pdf"]});
    let r = call_in(&d, None, "run_skill_script", args.clone()).await;
    assert!(r.success, "{r:?}");
    assert_eq!(r.files, None, "no context, no files");
    let r = call_in(&d, Some("c1"), "run_skill_script", args).await;
    assert!(r.success, "{r:?}");
    assert_eq!(r.files, Some(Vec::new()));
    let seen = seen.lock().unwrap();
    let want = ScriptRun {
        path: "scripts/fill.py".into(),
        args: vec!["in.pdf".into(), "out.pdf".into()],
    };
    assert_eq!(seen[0].script.as_ref(), Some(&want));
    assert_eq!(seen[0].tool, "run_skill_script");
    assert!(seen[0].workdir.is_none());
    let work = seen[1].workdir.as_ref().expect("the context's files");
    assert!(work.files.is_empty());
    assert_eq!(work.max_files, 1000);
    // Recorded as the skill's run_skill_script.
    let calls = d
        .store()
        .recent_calls(&crate::state::store::CallFilter::default(), 10)
        .unwrap();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(
        calls
            .iter()
            .all(|c| c.skill == "pdf" && c.tool == "run_skill_script"),
        "{calls:?}"
    );
}

#[tokio::test]
async fn a_script_of_a_skill_with_a_write_tool_waits_for_an_approval() {
    let ws = tempfile::tempdir().unwrap();
    let d = dispatcher(ws.path())
        .with_fake_transport(|p| Ok(ToolResult::ok(p.call_id.clone(), json!({}), 1)));
    let r = call_in(
        &d,
        None,
        "run_skill_script",
        json!({"name": "mail", "script": "send.py"}),
    )
    .await;
    assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied), "{r:?}");
    assert!(r.approval_id.is_some(), "{r:?}");
}

#[tokio::test]
async fn a_grant_widens_a_published_skill_and_its_env_names_travel_to_the_executor() {
    let ws = tempfile::tempdir().unwrap();
    let seen: std::sync::Arc<Mutex<Vec<ToolExecuteParams>>> = Default::default();
    let log = std::sync::Arc::clone(&seen);
    let d = dispatcher(ws.path()).with_fake_transport(move |p| {
        log.lock().unwrap().push(p.clone());
        Ok(ToolResult::ok(p.call_id.clone(), json!({}), 1))
    });
    let mut config = (*d.load().config()).clone();
    config.grants.insert(
        "pdf".into(),
        toml::from_str("network = [\"api.example.com\"]\nenv = [\"PDF_KEY\"]\n").unwrap(),
    );
    let catalog = discover(&[ws.path().join("skills")], DiscoveryOptions::default());
    d.load().set_catalog(catalog, Some(config));
    let loaded = d.load().current();
    let pdf = loaded.skill("pdf").unwrap();
    assert_eq!(pdf.permissions.network, ["api.example.com"]);
    assert_eq!(pdf.permissions.env, ["PDF_KEY"]);
    let (declared, grant) = loaded.grant_of("pdf").unwrap();
    assert!(declared.env.is_empty() && declared.network.is_empty());
    assert_eq!(grant.env, ["PDF_KEY"]);
    assert!(loaded.grant_of("mail").is_none());
    // The executor is told the granted name, so that it passes its value on.
    let r = call_in(
        &d,
        None,
        "run_skill_script",
        json!({"name": "pdf", "script": "fill.py"}),
    )
    .await;
    assert!(r.success, "{r:?}");
    assert_eq!(seen.lock().unwrap()[0].envelope.granted_env, ["PDF_KEY"]);
}

/// A restricted context (seed 004's `allowed-tools`) lends the envelope of the skills it
/// uses only: `exec_command {"skill": other}`, `run_skill_script` and `load_skill` of a
/// skill neither pinned nor active there are refused alike, by the one rule, before the
/// skill's network or secrets reach anything; a skill pinned or active there still runs.
#[tokio::test]
async fn restricted_context_cannot_lend_another_skills_envelope() {
    let ws = tempfile::tempdir().unwrap();
    let guard = ws.path().join("skills/guard");
    std::fs::create_dir_all(guard.join("scripts")).unwrap();
    std::fs::write(
        guard.join("SKILL.md"),
        "---\nname: guard\ndescription: only mail\nallowed-tools: [\"mail:send\"]\n---\n# guard\n",
    )
    .unwrap();
    std::fs::write(guard.join("scripts/ok.py"), "print('ok')\n").unwrap();
    let d = dispatcher(ws.path())
        .with_fake_transport(|p| Ok(ToolResult::ok(p.call_id.clone(), json!({}), 1)));
    let catalog = d.load().catalog();
    crate::contexts::pin(d.store(), &catalog, "c1", "guard").unwrap();

    for (name, args) in [
        ("exec_command", json!({"cmd": "env", "skill": "pdf"})),
        (
            "run_skill_script",
            json!({"name": "pdf", "script": "fill.py"}),
        ),
        ("load_skill", json!({"name": "pdf"})),
    ] {
        let r = call_in(&d, Some("c1"), name, args).await;
        assert_eq!(
            r.error_kind,
            Some(ErrorKind::PermissionDenied),
            "{name}: {r:?}"
        );
        let error = r.error.unwrap_or_default();
        assert!(
            error.starts_with(&format!(
                "{name} may not use skill \"pdf\" in context \"c1\""
            )),
            "{name}: {error}"
        );
        assert!(
            error.contains("skillbox context pin c1 pdf"),
            "{name}: {error}"
        );
        // Outside the context, the same call is not refused by it.
        let r = call_in(&d, None, name, json!({"name": "pdf", "script": "fill.py"})).await;
        assert_ne!(
            r.error_kind,
            Some(ErrorKind::PermissionDenied),
            "{name}: {r:?}"
        );
    }
    // The pinned skill, and a skill with a tool active in the context, are lent.
    let r = call_in(
        &d,
        Some("c1"),
        "run_skill_script",
        json!({"name": "guard", "script": "ok.py"}),
    )
    .await;
    assert!(r.success, "{r:?}");
    let r = call_in(&d, Some("c1"), "load_skill", json!({"name": "guard"})).await;
    assert!(r.success, "{r:?}");
    let r = call_in(
        &d,
        Some("c1"),
        "run_skill_script",
        json!({"name": "mail", "script": "send.py"}),
    )
    .await;
    assert_eq!(
        r.error_kind,
        Some(ErrorKind::ApprovalDenied),
        "reached approval: {r:?}"
    );
    // exec_command under a lent skill, or none, passes the rule (and then finds no
    // executor listening here).
    for args in [
        json!({"cmd": "true", "skill": "guard"}),
        json!({"cmd": "true", "skill": "mail"}),
    ] {
        let r = call_in(&d, Some("c1"), "exec_command", args.clone()).await;
        let error = r.error.unwrap_or_default();
        assert!(!error.contains("may not use skill"), "{args}: {error}");
    }
    // Unpinned, the context restricts nothing: every skill is lent again.
    crate::contexts::unpin(d.store(), "c1", "guard").unwrap();
    let r = call_in(
        &d,
        Some("c1"),
        "run_skill_script",
        json!({"name": "pdf", "script": "fill.py"}),
    )
    .await;
    assert!(r.success, "{r:?}");
}

/// One fake behind the one transport serves every kind of executor work: the pipeline
/// sends a session's start, input and close through it, placed on the executor it names.
#[derive(Debug, Default)]
struct OneDoor {
    seen: Mutex<Vec<String>>,
}

impl transport::ExecutorTransport for OneDoor {
    fn execute(
        &self,
        call: transport::Dispatched,
        _timeout: std::time::Duration,
    ) -> transport::TransportFuture<'_> {
        self.seen.lock().unwrap().push("tool.execute".into());
        let id = call.params.call_id;
        Box::pin(async move { Ok(ToolResult::ok(id, json!({"stdout": "ran"}), 1)) })
    }

    fn session_exec(
        &self,
        _skill: Arc<skillbox_protocol::skill::Skill>,
        params: skillbox_protocol::session::SessionExecParams,
        _timeout: std::time::Duration,
    ) -> transport::JobFuture<
        '_,
        (
            skillbox_protocol::session::SessionAnswer,
            transport::Placement,
        ),
    > {
        self.seen
            .lock()
            .unwrap()
            .push(format!("session.exec {:?}", params.cmd));
        let answer = skillbox_protocol::session::SessionAnswer {
            output: "started\n".into(),
            exit_code: None,
            running: true,
            elided_bytes: 0,
            stages: Some(skillbox_protocol::result::ExecutorStages {
                queue_us: 0,
                start_us: 700,
                tool_us: 2_000,
                end_us: 30,
            }),
        };
        Box::pin(async move {
            Ok((
                answer,
                transport::Placement::Executor("127.0.0.9:1".parse().unwrap()),
            ))
        })
    }

    fn session_write(
        &self,
        at: transport::Placement,
        params: skillbox_protocol::session::SessionWriteParams,
        _timeout: std::time::Duration,
    ) -> transport::JobFuture<'_, skillbox_protocol::session::SessionAnswer> {
        self.seen
            .lock()
            .unwrap()
            .push(format!("session.write {at} {}", params.chars));
        let answer = skillbox_protocol::session::SessionAnswer {
            output: format!("echo {}", params.chars),
            exit_code: Some(0),
            running: false,
            elided_bytes: 0,
            stages: Some(skillbox_protocol::result::ExecutorStages {
                queue_us: 0,
                start_us: 10,
                tool_us: 400,
                end_us: 20,
            }),
        };
        Box::pin(async move { Ok(answer) })
    }
}

#[tokio::test]
async fn one_transport_serves_a_sessions_start_and_input_at_its_executor() {
    let ws = tempfile::tempdir().unwrap();
    let door = Arc::new(OneDoor::default());
    let d = dispatcher(ws.path()).with_transport(Arc::clone(&door) as Arc<dyn ExecutorTransport>);
    let r = call_in(&d, Some("c1"), "exec_command", json!({"cmd": "cat"})).await;
    assert!(r.success, "{r:?}");
    let session = r.data.as_ref().unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = call_in(
        &d,
        Some("c1"),
        "write_stdin",
        json!({"session_id": session, "chars": "hi"}),
    )
    .await;
    assert!(r.success, "{r:?}");
    assert_eq!(r.data.as_ref().unwrap()["output"], "echo hi", "{r:?}");
    // The executor's stages of both went to the stage metrics, never into the answers.
    assert!(!format!("{r:?}").contains("stages: Some"), "{r:?}");
    let text = d.metrics().encode(&crate::observe::Scrape::default());
    for (stage, sum) in [
        ("executor_start", "0.00071"),
        ("tool", "0.0024"),
        ("executor_end", "0.00005"),
    ] {
        let line = format!("skillbox_call_stage_seconds_sum{{stage=\"{stage}\"}} {sum}");
        assert!(text.contains(&line), "{line} missing: {text}");
    }
    let line = "skillbox_call_stage_seconds_count{stage=\"channel\"} 2";
    assert!(text.contains(line), "{line} missing: {text}");
    let seen = door.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[0].starts_with("session.exec"), "{seen:?}");
    assert_eq!(seen[1], "session.write 127.0.0.9:1 hi", "{seen:?}");
}
