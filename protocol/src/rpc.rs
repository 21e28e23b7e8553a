//! Each method of the core ↔ executor channel paired with its types: a sender calls
//! `M::NAME` with an `M::Params` and reads an `M::Result`; a receiver decodes `M::Params`
//! and answers an `M::Result`. Both sides name the method by its type, never by a string
//! and a loose JSON value.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::methods::{
    method, CoreFetchParams, CoreReadFileParams, CoreRunSkillParams, CoreSignParams,
    DepsBuildParams, DepsBuildResult, FetchResult, HealthParams, HealthResult, ReadFileResult,
    SignResult, SkillReloadParams, SkillReloadResult, ToolExecuteParams, ToolListParams,
    ToolListResult,
};
use crate::methods::{
    CoreContextFileDeleteParams, CoreContextFileReadParams, CoreContextFileWriteParams,
};
use crate::result::ToolResult;
use crate::session::{
    SessionAnswer, SessionCloseParams, SessionCloseResult, SessionExecParams, SessionWriteParams,
};
use crate::workdir::{ContextFileChunk, ContextFileDeleted, ContextFileWritten};

/// A method of the channel and its types.
pub trait RpcMethod {
    /// Its name on the wire.
    const NAME: &'static str;
    /// What the sender sends.
    type Params: Serialize + DeserializeOwned + Send + Sync + 'static;
    /// What the receiver answers.
    type Result: Serialize + DeserializeOwned + Send + 'static;
}

macro_rules! rpc_methods {
    ($($(#[$doc:meta])* $name:ident = $wire:path, $params:ty => $result:ty;)+) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name;

        impl RpcMethod for $name {
            const NAME: &'static str = $wire;
            type Params = $params;
            type Result = $result;
        }
    )+};
}

rpc_methods! {
    /// Core → executor: run one tool call.
    ToolExecute = method::TOOL_EXECUTE, ToolExecuteParams => ToolResult;
    /// Core → executor: the tools the executor can run.
    ToolList = method::TOOL_LIST, ToolListParams => ToolListResult;
    /// Core → executor: reload the skills roots.
    SkillReload = method::SKILL_RELOAD, SkillReloadParams => SkillReloadResult;
    /// Core → executor: liveness and sandbox status.
    Health = method::HEALTH, HealthParams => HealthResult;
    /// Executor → core: a tool's `fetch`, forwarded.
    CoreFetch = method::CORE_FETCH, CoreFetchParams => FetchResult;
    /// Executor → core: a tool's `sign`, forwarded.
    CoreSign = method::CORE_SIGN, CoreSignParams => SignResult;
    /// Executor → core: a tool's `readFile`, forwarded.
    CoreReadFile = method::CORE_READ_FILE, CoreReadFileParams => ReadFileResult;
    /// Executor → core: a tool's `runSkill`, forwarded; the answer is the child's result.
    CoreRunSkill = method::CORE_RUN_SKILL, CoreRunSkillParams => crate::result::ToolResult;
    /// Core → executor: start a command session.
    SessionExec = method::SESSION_EXEC, SessionExecParams => SessionAnswer;
    /// Core → executor: write to a session, or poll it.
    SessionWrite = method::SESSION_WRITE, SessionWriteParams => SessionAnswer;
    /// Core → executor: end sessions.
    SessionClose = method::SESSION_CLOSE, SessionCloseParams => SessionCloseResult;
    /// Core → executor: build a skill's dependencies.
    DepsBuild = method::DEPS_BUILD, DepsBuildParams => DepsBuildResult;
    /// Executor → core: a chunk of a file of the call's context.
    CoreContextFileRead = method::CORE_CONTEXT_FILE_READ, CoreContextFileReadParams => ContextFileChunk;
    /// Executor → core: a chunk of a file the call wrote.
    CoreContextFileWrite = method::CORE_CONTEXT_FILE_WRITE, CoreContextFileWriteParams => ContextFileWritten;
    /// Executor → core: a file the call removed.
    CoreContextFileDelete = method::CORE_CONTEXT_FILE_DELETE, CoreContextFileDeleteParams => ContextFileDeleted;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::{CoreMethod, ExecutorMethod};

    #[test]
    fn every_served_method_has_its_typed_pair_under_the_same_name() {
        let executor = [
            ToolExecute::NAME,
            ToolList::NAME,
            SkillReload::NAME,
            Health::NAME,
            SessionExec::NAME,
            SessionWrite::NAME,
            SessionClose::NAME,
            DepsBuild::NAME,
        ];
        let served: Vec<&str> = ExecutorMethod::ALL.iter().map(|m| m.as_str()).collect();
        assert_eq!(served, executor);
        let core = [
            CoreFetch::NAME,
            CoreSign::NAME,
            CoreReadFile::NAME,
            CoreRunSkill::NAME,
            CoreContextFileRead::NAME,
            CoreContextFileWrite::NAME,
            CoreContextFileDelete::NAME,
        ];
        let served: Vec<&str> = CoreMethod::ALL.iter().map(|m| m.as_str()).collect();
        assert_eq!(served, core);
    }

    #[test]
    fn empty_params_travel_as_an_empty_object() {
        let v = serde_json::to_value(HealthParams::default()).unwrap();
        assert_eq!(v, serde_json::json!({}));
        let _: <Health as RpcMethod>::Params = serde_json::from_value(v).unwrap();
    }
}
