//! Running an activation plan with the fallback state machine of the routing spec (§10):
//!
//! ```text
//! selected -> running -> success
//!             running -> retryable_failure -> running   (one retry)
//!                                          -> fallback
//!             running -> fatal_failure     -> fallback
//! fallback -> running (the next skill of the fallback chain) | exit (no-skill path, ask the user)
//! ```
//!
//! [`run`] is generic over the function that calls a tool, so the machine is tested
//! without an executor; [`classify`] is the one mapping from a failed call to retryable
//! or fatal. A path (skill + tool) that failed is never entered again in the same run, and
//! fails at most twice (the first try and its one retry). Every transition is returned,
//! logged as a tracing event, and stored by the gateway in `route_events`.

use std::collections::HashSet;
use std::future::Future;

use serde::Serialize;
use serde_json::{json, Value};
use skillbox_protocol::result::{ErrorKind, ToolResult};

/// A state of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// The plan chose a skill.
    Selected,
    /// A tool of the skill is being called.
    Running,
    /// The call succeeded; the run ends.
    Success,
    /// The call failed in a way that may pass on a second try.
    RetryableFailure,
    /// The call failed in a way a retry cannot fix.
    FatalFailure,
    /// Looking for the next step of the fallback chain.
    Fallback,
    /// No skill succeeded; the run ends on the no-skill path or by asking the user.
    Exit,
    /// The running tool called another skill's tool (`runSkill`); noted beside the run,
    /// which stays `running`.
    Delegated,
}

impl State {
    /// The snake-case name, as stored and logged.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Selected => "selected",
            State::Running => "running",
            State::Delegated => "delegated",
            State::Success => "success",
            State::RetryableFailure => "retryable_failure",
            State::FatalFailure => "fatal_failure",
            State::Fallback => "fallback",
            State::Exit => "exit",
        }
    }
}

/// How a failed call is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// Worth one more try (timeout, resource limit, the executor away, a tool error).
    Retryable,
    /// Go to the fallback at once.
    Fatal,
}

/// The one mapping from a failed call to its class. `timeout`, `resource_limit`,
/// `unavailable` (the executor away) and `tool_error` (the tool's own failure, often a
/// flaky upstream) are retryable; `invalid_args`, `not_found`, `permission_denied`,
/// `approval_denied`, `sandbox` and `protocol` are fatal. A [`Target::Refused`] (a missing
/// prerequisite, no tool to run) never reaches a call and is always fatal.
pub fn classify(result: &ToolResult) -> FailureClass {
    match result.error_kind {
        Some(
            ErrorKind::Timeout
            | ErrorKind::ResourceLimit
            | ErrorKind::Unavailable
            | ErrorKind::ToolError,
        ) => FailureClass::Retryable,
        Some(
            ErrorKind::InvalidArgs
            | ErrorKind::NotFound
            | ErrorKind::PermissionDenied
            | ErrorKind::ApprovalDenied
            | ErrorKind::Sandbox
            | ErrorKind::Protocol,
        )
        | None => FailureClass::Fatal,
    }
}

/// What running a skill means.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// Call this tool of the skill.
    Tool(String),
    /// An instruction-only skill: it "succeeds" by handing back its body (progressive
    /// disclosure); the agent follows the instructions.
    Instructions(String),
    /// The skill cannot be run for this request (e.g. several tools and none named).
    Refused {
        /// The failure kind.
        kind: ErrorKind,
        /// Why, and what to do.
        reason: String,
    },
}

/// One step of the chain to walk, primary first.
#[derive(Debug, Clone, PartialEq)]
pub enum Stage {
    /// Run a skill.
    Skill {
        /// The skill.
        skill: String,
        /// What to run.
        target: Target,
    },
    /// Answer without a skill (the general tool chain).
    NoSkill,
    /// Ask the user for what is missing.
    AskUser,
}

/// How a run that found no skill to succeed ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitPath {
    /// The caller answers with its general tool chain.
    NoSkill,
    /// The caller asks the user.
    AskUser,
}

/// One change of state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transition {
    /// Position in the run, from 0.
    pub seq: u32,
    /// State left.
    pub from: State,
    /// State entered.
    pub to: State,
    /// The skill concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    /// The tool concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Why, in words.
    pub reason: String,
}

/// One call made (or an instruction body handed back).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// The skill.
    pub skill: String,
    /// The tool, none for an instruction-only skill.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// 1 for the first try, 2 for the retry.
    pub attempt: u32,
    /// The class of the failure, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureClass>,
    /// The result.
    pub result: ToolResult,
}

/// How the run ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Outcome {
    /// A skill succeeded.
    Success {
        /// The skill.
        skill: String,
        /// The tool, none for an instruction-only skill.
        tool: Option<String>,
        /// Its result data.
        data: Value,
    },
    /// No skill succeeded.
    Exit {
        /// What the caller should do now.
        via: ExitPath,
        /// Why, in words.
        reason: String,
    },
}

/// The record of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    /// The route the run belongs to.
    pub route_id: String,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Every call, in order.
    pub steps: Vec<Step>,
    /// Every transition, in order.
    pub transitions: Vec<Transition>,
}

/// Collects transitions and logs each one.
struct Trace<'a> {
    route_id: &'a str,
    state: State,
    transitions: Vec<Transition>,
}

impl Trace<'_> {
    fn go(&mut self, to: State, skill: Option<&str>, tool: Option<&str>, reason: String) {
        let seq = u32::try_from(self.transitions.len()).unwrap_or(u32::MAX);
        tracing::info!(
            route_id = %self.route_id,
            seq,
            from = self.state.as_str(),
            to = to.as_str(),
            skill = skill.unwrap_or("-"),
            tool = tool.unwrap_or("-"),
            reason = %reason,
            "route transition"
        );
        self.transitions.push(Transition {
            seq,
            from: self.state,
            to,
            skill: skill.map(str::to_string),
            tool: tool.map(str::to_string),
            reason,
        });
        self.state = to;
    }

    /// Notes, from the running state, each call the running tool delegated; the run's
    /// state does not change.
    fn delegations(&mut self, result: &ToolResult) {
        for d in &result.delegated {
            let (skill, tool) = d.tool.split_once(':').unwrap_or((d.tool.as_str(), ""));
            let outcome = match (d.success, d.error_kind) {
                (true, _) => "succeeded".to_string(),
                (false, Some(kind)) => format!("failed ({})", kind.as_str()),
                (false, None) => "failed".into(),
            };
            let call = if d.call_id.is_empty() {
                "refused before it ran".to_string()
            } else {
                format!("call {}", d.call_id)
            };
            let reason = format!("delegated at depth {}: {outcome}, {call}", d.depth);
            let at = self.state;
            self.go(State::Delegated, Some(skill), Some(tool), reason);
            self.state = at;
        }
    }
}

/// Walks `chain` (the primary skill first, then the fallback chain) with `args`, calling
/// tools through `call(skill, tool, args)`, and returns every step and transition.
pub async fn run<F, Fut>(route_id: &str, chain: Vec<Stage>, args: &Value, mut call: F) -> Run
where
    F: FnMut(String, String, Value) -> Fut,
    Fut: Future<Output = ToolResult>,
{
    let mut trace = Trace {
        route_id,
        state: State::Selected,
        transitions: Vec::new(),
    };
    let mut steps: Vec<Step> = Vec::new();
    let mut failed_paths: HashSet<(String, Option<String>)> = HashSet::new();
    let mut last_kind: Option<ErrorKind> = None;
    let mut chain = chain.into_iter().peekable();
    if !matches!(chain.peek(), Some(Stage::Skill { .. })) {
        trace.go(
            State::Fallback,
            None,
            None,
            "the plan selected no skill".into(),
        );
    }
    for stage in chain {
        let (skill, target) = match stage {
            Stage::Skill { skill, target } => (skill, target),
            Stage::NoSkill | Stage::AskUser => {
                let (via, reason) = exit_at(&stage, last_kind, steps.is_empty());
                trace.go(State::Exit, None, None, reason.clone());
                return finish(route_id, Outcome::Exit { via, reason }, steps, trace);
            }
        };
        let tool = match &target {
            Target::Tool(t) => Some(t.clone()),
            Target::Instructions(_) | Target::Refused { .. } => None,
        };
        let path = (skill.clone(), tool.clone());
        if failed_paths.contains(&path) {
            tracing::info!(route_id, skill = %skill, "fallback skips a path that already failed in this run");
            continue;
        }
        let mut attempts = Attempts {
            trace: &mut trace,
            steps: &mut steps,
            skill: &skill,
            tool: tool.as_deref(),
        };
        match attempts.walk(&target, args, &mut call).await {
            PathEnd::Success(data) => {
                let outcome = Outcome::Success { skill, tool, data };
                return finish(route_id, outcome, steps, trace);
            }
            PathEnd::Closed(kind) => {
                last_kind = kind;
                failed_paths.insert(path);
            }
        }
    }
    // The chain always ends with the no-skill path and asking the user; a chain that does
    // not still ends by asking.
    let reason = "the fallback chain is exhausted; ask the user".to_string();
    trace.go(State::Exit, None, None, reason.clone());
    let outcome = Outcome::Exit {
        via: ExitPath::AskUser,
        reason,
    };
    finish(route_id, outcome, steps, trace)
}

/// How the run leaves at a no-skill or ask-the-user `stage`, and why in words, given the
/// kind of the last failure and whether any call was made.
fn exit_at(stage: &Stage, last_kind: Option<ErrorKind>, no_steps: bool) -> (ExitPath, String) {
    // Missing arguments are the user's to give; the general tool chain cannot guess them.
    let via = if matches!(stage, Stage::AskUser) || last_kind == Some(ErrorKind::InvalidArgs) {
        ExitPath::AskUser
    } else {
        ExitPath::NoSkill
    };
    let reason = match (via, no_steps) {
        (ExitPath::AskUser, _) => {
            "no skill succeeded; ask the user for what is missing".to_string()
        }
        (ExitPath::NoSkill, true) => "no skill to run; answer without a skill".into(),
        (ExitPath::NoSkill, false) => "no skill succeeded; answer without a skill".into(),
    };
    (via, reason)
}

/// How one path (skill + tool) of the chain ended.
enum PathEnd {
    /// It succeeded with this data; the run ends.
    Success(Value),
    /// It failed for good (with the kind of its last failure) and is closed for the run.
    Closed(Option<ErrorKind>),
}

/// The tries of one path: the first and, after a retryable failure, its one retry.
struct Attempts<'r, 'a> {
    trace: &'r mut Trace<'a>,
    steps: &'r mut Vec<Step>,
    skill: &'r str,
    tool: Option<&'r str>,
}

impl Attempts<'_, '_> {
    /// Runs `target` until it succeeds, fails fatally, or fails twice.
    async fn walk<F, Fut>(&mut self, target: &Target, args: &Value, call: &mut F) -> PathEnd
    where
        F: FnMut(String, String, Value) -> Fut,
        Fut: Future<Output = ToolResult>,
    {
        let skill = self.skill;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let why = match (self.trace.state, attempt) {
                (State::Selected, _) => format!("run the primary skill {skill}"),
                (State::RetryableFailure, _) => format!("retry {skill} once"),
                _ => format!("fall back to {skill}"),
            };
            self.trace.go(State::Running, Some(skill), self.tool, why);
            let result = match target {
                Target::Tool(t) => call(skill.to_string(), t.clone(), args.clone()).await,
                Target::Instructions(body) => ToolResult::ok("", json!({"instructions": body}), 0),
                Target::Refused { kind, reason } => {
                    ToolResult::failed("", *kind, reason.clone(), 0)
                }
            };
            self.trace.delegations(&result);
            if result.success {
                return PathEnd::Success(self.succeeded(result, attempt));
            }
            let class = match target {
                // Retrying cannot make a program, an env value or a tool name appear.
                Target::Refused { .. } => FailureClass::Fatal,
                Target::Tool(_) | Target::Instructions(_) => classify(&result),
            };
            let kind = result.error_kind;
            if !self.failed(result, attempt, class) {
                return PathEnd::Closed(kind);
            }
        }
    }

    /// Records the successful call of try `attempt` and returns its data.
    fn succeeded(&mut self, result: ToolResult, attempt: u32) -> Value {
        let data = result.data.clone().unwrap_or(Value::Null);
        self.steps.push(Step {
            skill: self.skill.to_string(),
            tool: self.tool.map(str::to_string),
            attempt,
            failure: None,
            result,
        });
        self.trace.go(
            State::Success,
            Some(self.skill),
            self.tool,
            "the call succeeded".into(),
        );
        data
    }

    /// Records the failed call of try `attempt` and its transitions; whether to try again.
    fn failed(&mut self, result: ToolResult, attempt: u32, class: FailureClass) -> bool {
        let (skill, tool) = (Some(self.skill), self.tool);
        let error = result.error.clone().unwrap_or_default();
        let kind = result.error_kind.map_or("unknown", ErrorKind::as_str);
        self.steps.push(Step {
            skill: self.skill.to_string(),
            tool: self.tool.map(str::to_string),
            attempt,
            failure: Some(class),
            result,
        });
        match class {
            FailureClass::Retryable => {
                let reason = format!("{kind}: {error}");
                self.trace.go(State::RetryableFailure, skill, tool, reason);
                if attempt < 2 {
                    return true;
                }
                let closed = "failed twice; this path is closed for the run".into();
                self.trace.go(State::Fallback, skill, tool, closed);
            }
            FailureClass::Fatal => {
                let reason = format!("{kind}: {error}");
                self.trace.go(State::FatalFailure, skill, tool, reason);
                let closed = "a retry cannot fix this".into();
                self.trace.go(State::Fallback, skill, tool, closed);
            }
        }
        false
    }
}

/// The record of the run that ended with `outcome`.
fn finish(route_id: &str, outcome: Outcome, steps: Vec<Step>, trace: Trace<'_>) -> Run {
    Run {
        route_id: route_id.to_string(),
        outcome,
        steps,
        transitions: trace.transitions,
    }
}

#[cfg(test)]
#[path = "execute_tests.rs"]
mod tests;
