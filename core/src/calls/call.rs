//! [`ToolCall`]: one call as every edge hands it to the pipeline (REST, MCP, the router's
//! `route/execute`): what it names, parsed at the edge, its arguments, who asked and in
//! which context, and the caller's trace context.

use serde_json::Value;
use skillbox_protocol::Target;

use crate::auth::CallOrigin;
use crate::observe::TraceParent;

/// One call, as the pipeline takes it ([`super::Dispatcher::call`]).
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// What it names.
    pub target: Target,
    /// Its arguments (`{}` when the caller gave none).
    pub args: Value,
    /// Who asked, and in which context.
    pub origin: CallOrigin,
    /// The caller's W3C trace context, carried to the executor.
    pub trace: Option<TraceParent>,
    /// For a call one skill's program made of another's tool (`runSkill`): the skills
    /// above it, the time left and the calls left of the top call's budget.
    pub delegation: Option<super::delegate::Delegation>,
}

impl ToolCall {
    /// A call of `target` with `args` for `origin`, without a trace context. `null`
    /// arguments become `{}`.
    pub fn new(target: impl Into<Target>, args: Value, origin: CallOrigin) -> Self {
        Self {
            target: target.into(),
            args: if args.is_null() {
                Value::Object(serde_json::Map::new())
            } else {
                args
            },
            origin,
            trace: None,
            delegation: None,
        }
    }

    /// The same call with the caller's trace context.
    pub fn traced(mut self, trace: Option<TraceParent>) -> Self {
        self.trace = trace;
        self
    }
}
