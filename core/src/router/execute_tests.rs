//! Every transition of the fallback state machine, with a fake tool caller.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::json;
use skillbox_protocol::result::{ErrorKind, ToolResult};

use super::*;

/// A fake caller that answers from a script, in order, and records who was called.
#[derive(Clone, Default)]
struct Fake {
    answers: Arc<Mutex<VecDeque<ToolResult>>>,
    calls: Arc<Mutex<Vec<String>>>,
}

impl Fake {
    fn new(answers: Vec<ToolResult>) -> Self {
        Self {
            answers: Arc::new(Mutex::new(answers.into())),
            calls: Arc::default(),
        }
    }

    fn caller(
        &self,
    ) -> impl FnMut(String, String, serde_json::Value) -> std::future::Ready<ToolResult> {
        let me = self.clone();
        move |skill, tool, _args| {
            me.calls.lock().unwrap().push(format!("{skill}:{tool}"));
            let r = me
                .answers
                .lock()
                .unwrap()
                .pop_front()
                .expect("the fake ran out of answers");
            std::future::ready(r)
        }
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

fn ok() -> ToolResult {
    ToolResult::ok("c", json!({"price": 1}), 1)
}

fn fail(kind: ErrorKind) -> ToolResult {
    ToolResult::failed("c", kind, "boom", 1)
}

fn skill(name: &str) -> Stage {
    Stage::Skill {
        skill: name.into(),
        target: Target::Tool("run".into()),
    }
}

fn chain(skills: &[&str]) -> Vec<Stage> {
    let mut c: Vec<Stage> = skills.iter().map(|s| skill(s)).collect();
    c.push(Stage::NoSkill);
    c.push(Stage::AskUser);
    c
}

fn states(run: &Run) -> Vec<(&'static str, &'static str)> {
    run.transitions
        .iter()
        .map(|t| (t.from.as_str(), t.to.as_str()))
        .collect()
}

async fn go(chain: Vec<Stage>, fake: &Fake) -> Run {
    run("rt_test", chain, &json!({}), fake.caller()).await
}

#[tokio::test]
async fn run_selected_running_success() {
    let fake = Fake::new(vec![ok()]);
    let run = go(chain(&["a", "b"]), &fake).await;
    assert_eq!(
        states(&run),
        [("selected", "running"), ("running", "success")]
    );
    assert!(matches!(&run.outcome, Outcome::Success { skill, .. } if skill == "a"));
    assert_eq!(fake.calls(), ["a:run"]);
    assert_eq!(run.steps.len(), 1);
}

#[tokio::test]
async fn run_retries_a_retryable_failure_once_then_succeeds() {
    let fake = Fake::new(vec![fail(ErrorKind::Timeout), ok()]);
    let run = go(chain(&["a"]), &fake).await;
    assert_eq!(
        states(&run),
        [
            ("selected", "running"),
            ("running", "retryable_failure"),
            ("retryable_failure", "running"),
            ("running", "success"),
        ]
    );
    assert_eq!(fake.calls(), ["a:run", "a:run"]);
    assert_eq!(run.steps[1].attempt, 2);
    assert_eq!(run.steps[0].failure, Some(FailureClass::Retryable));
}

#[tokio::test]
async fn run_falls_back_after_the_retry_fails_and_never_runs_that_path_again() {
    // "a" appears twice in the chain: the second time is skipped, not a third failure.
    let fake = Fake::new(vec![
        fail(ErrorKind::ResourceLimit),
        fail(ErrorKind::Unavailable),
        ok(),
    ]);
    let run = go(chain(&["a", "a", "b"]), &fake).await;
    assert_eq!(
        states(&run),
        [
            ("selected", "running"),
            ("running", "retryable_failure"),
            ("retryable_failure", "running"),
            ("running", "retryable_failure"),
            ("retryable_failure", "fallback"),
            ("fallback", "running"),
            ("running", "success"),
        ]
    );
    assert_eq!(fake.calls(), ["a:run", "a:run", "b:run"]);
    assert!(matches!(&run.outcome, Outcome::Success { skill, .. } if skill == "b"));
}

#[tokio::test]
async fn run_fatal_failure_goes_to_fallback_without_retry() {
    let fake = Fake::new(vec![fail(ErrorKind::PermissionDenied), ok()]);
    let run = go(chain(&["a", "b"]), &fake).await;
    assert_eq!(
        states(&run),
        [
            ("selected", "running"),
            ("running", "fatal_failure"),
            ("fatal_failure", "fallback"),
            ("fallback", "running"),
            ("running", "success"),
        ]
    );
    assert_eq!(fake.calls(), ["a:run", "b:run"]);
}

#[tokio::test]
async fn run_exits_on_the_no_skill_path_when_every_skill_fails() {
    let fake = Fake::new(vec![fail(ErrorKind::Sandbox), fail(ErrorKind::NotFound)]);
    let run = go(chain(&["a", "b"]), &fake).await;
    assert_eq!(states(&run).last().copied(), Some(("fallback", "exit")));
    assert!(matches!(
        run.outcome,
        Outcome::Exit {
            via: ExitPath::NoSkill,
            ..
        }
    ));
    assert_eq!(run.steps.len(), 2);
}

#[tokio::test]
async fn run_exits_by_asking_the_user_when_arguments_are_invalid() {
    let fake = Fake::new(vec![fail(ErrorKind::InvalidArgs)]);
    let run = go(chain(&["a"]), &fake).await;
    assert!(matches!(
        run.outcome,
        Outcome::Exit {
            via: ExitPath::AskUser,
            ..
        }
    ));
}

#[tokio::test]
async fn run_without_a_selected_skill_exits_through_fallback() {
    let fake = Fake::new(vec![]);
    let run = go(vec![Stage::NoSkill, Stage::AskUser], &fake).await;
    assert_eq!(
        states(&run),
        [("selected", "fallback"), ("fallback", "exit")]
    );
    assert!(fake.calls().is_empty());
    assert!(matches!(
        run.outcome,
        Outcome::Exit {
            via: ExitPath::NoSkill,
            ..
        }
    ));
}

#[tokio::test]
async fn run_instruction_only_skill_succeeds_with_its_body() {
    let fake = Fake::new(vec![]);
    let stages = vec![
        Stage::Skill {
            skill: "guide".into(),
            target: Target::Instructions("# Do this".into()),
        },
        Stage::NoSkill,
    ];
    let run = go(stages, &fake).await;
    match &run.outcome {
        Outcome::Success { data, tool, .. } => {
            assert_eq!(data["instructions"], "# Do this");
            assert!(tool.is_none());
        }
        other => panic!("{other:?}"),
    }
    assert!(fake.calls().is_empty());
}

#[tokio::test]
async fn run_refused_target_is_fatal_and_falls_back() {
    let fake = Fake::new(vec![ok()]);
    let stages = vec![
        Stage::Skill {
            skill: "multi".into(),
            target: Target::Refused {
                kind: ErrorKind::InvalidArgs,
                reason: "name a tool".into(),
            },
        },
        skill("b"),
        Stage::NoSkill,
    ];
    let run = go(stages, &fake).await;
    assert_eq!(run.transitions[1].to, State::FatalFailure);
    assert!(matches!(&run.outcome, Outcome::Success { skill, .. } if skill == "b"));
}

#[tokio::test]
async fn run_chain_without_exit_stages_still_ends_asking_the_user() {
    let fake = Fake::new(vec![fail(ErrorKind::Protocol)]);
    let run = go(vec![skill("a")], &fake).await;
    assert!(matches!(
        run.outcome,
        Outcome::Exit {
            via: ExitPath::AskUser,
            ..
        }
    ));
    assert_eq!(run.transitions.last().map(|t| t.to), Some(State::Exit));
}

#[test]
fn classify_maps_every_kind() {
    use FailureClass::{Fatal, Retryable};
    let cases = [
        (ErrorKind::Timeout, Retryable),
        (ErrorKind::ResourceLimit, Retryable),
        (ErrorKind::Unavailable, Retryable),
        (ErrorKind::ToolError, Retryable),
        (ErrorKind::InvalidArgs, Fatal),
        (ErrorKind::NotFound, Fatal),
        (ErrorKind::PermissionDenied, Fatal),
        (ErrorKind::ApprovalDenied, Fatal),
        (ErrorKind::Sandbox, Fatal),
        (ErrorKind::Protocol, Fatal),
    ];
    for (kind, class) in cases {
        assert_eq!(classify(&fail(kind)), class, "{kind:?}");
    }
}

#[tokio::test]
async fn run_refused_for_a_missing_prerequisite_is_fatal_without_a_retry() {
    // An `unavailable` call result is retryable; a refusal before the call (the skill's
    // program is missing) is not, whatever its kind: it is decided by the target, not by
    // the words of its message.
    let fake = Fake::new(vec![ok()]);
    let stages = vec![
        Stage::Skill {
            skill: "needs-python".into(),
            target: Target::Refused {
                kind: ErrorKind::Unavailable,
                reason: "program python3 is not on the sandbox PATH".into(),
            },
        },
        skill("b"),
        Stage::NoSkill,
    ];
    let run = go(stages, &fake).await;
    assert_eq!(run.transitions[1].to, State::FatalFailure);
    assert_eq!(
        run.steps
            .iter()
            .filter(|s| s.skill == "needs-python")
            .count(),
        1
    );
    assert!(matches!(&run.outcome, Outcome::Success { skill, .. } if skill == "b"));
    assert_eq!(
        classify(&fail(ErrorKind::Unavailable)),
        FailureClass::Retryable
    );
}
