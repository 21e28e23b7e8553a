//! The gate of a call in a context and the files it is sent: the context's tools and its
//! list of files read on one blocking thread ([`Dispatcher::gate`]), the work folder's
//! list and the call's side of its files ([`Dispatcher::work_dir`]).

use std::sync::Arc;

use serde_json::Value;
use skillbox_protocol::skill::Security;
use skillbox_protocol::workdir::WorkDir;
use skillbox_protocol::Target;

use super::pipeline::Admitted;
use super::workfiles::CallFiles;
use super::{CallError, Dispatcher, Loaded};
use crate::auth::CallOrigin;
use crate::contexts::{self, builtins, ContextTools};

impl Dispatcher {
    /// The gate: the caller may use the skill the call names (before anything about it is
    /// looked up), may enter the call's context, and the context's active tools hold the
    /// target. Returns the context's tools when the call names a context, and its list of files
    /// read with them (`None` when it changed since the core last read it, or could not be
    /// read: [`Dispatcher::work_dir`] reads it, or reports why).
    pub(super) async fn gate(
        &self,
        loaded: &Loaded,
        origin: &CallOrigin,
        target: &Target,
        args: &Value,
    ) -> Result<(Option<ContextTools>, Option<WorkDir>), CallError> {
        let named = match (target, builtins::of(target)) {
            (Target::Tool(t), _) => Some(t.skill.as_str()),
            (_, Some(builtin)) => builtin.reach.named(args),
            (_, None) => None,
        };
        if let Some(why) = named.and_then(|s| origin.caller.skill_refusal(s)) {
            return Err(CallError::NotPermitted(why));
        }
        let Some(id) = origin.context_id.as_deref() else {
            return Ok((None, None));
        };
        // A call that may send the context's files (a tool, a script, a command) has their
        // list read with the context (one hop at most, not two: [`Dispatcher::work_dir`]);
        // a failure to list is left to that later read to report.
        let sends_files = matches!(
            target,
            Target::Tool(_) | Target::RunSkillScript | Target::ExecCommand
        );
        // On this thread when the connection is free and nothing must be written: a few
        // indexed reads, no hop to a blocking thread (the list only when the one kept is
        // current; else `work_dir` reads it).
        let every_tool = loaded.every_tool();
        let at_once = self.store.if_free().and_then(|conn| {
            let reads = conn.in_one_read(|conn| {
                let caller = &origin.caller;
                let gate = contexts::gate_at_once(conn, &loaded.catalog, &every_tool, caller, id)?;
                let listed = sends_files
                    .then(|| self.files.held_work_dir(conn, id))
                    .flatten();
                Some(gate.map(|context| (context, listed)))
            });
            reads.ok().flatten()
        });
        let judged = match at_once {
            Some(judged) => judged,
            None => self.gate_blocking(loaded, origin, id, sends_files).await?,
        };
        let (context, listed) = judged.map_err(CallError::from)?;
        if !context.allows(target) {
            return Err(CallError::NotInContext(context.refusal(target)));
        }
        Ok((Some(context), listed))
    }

    /// The gate's reads and writes on a blocking thread, for context `id`: the context
    /// claimed when a bot uses it first, a pin of a skill that is gone dropped, the list of
    /// files read when `sends_files`.
    async fn gate_blocking(
        &self,
        loaded: &Loaded,
        origin: &CallOrigin,
        id: &str,
        sends_files: bool,
    ) -> Result<Result<(ContextTools, Option<WorkDir>), contexts::ContextError>, CallError> {
        let id = id.to_owned();
        let (store, catalog, caller) = (
            self.store.clone(),
            Arc::clone(&loaded.catalog),
            origin.caller.clone(),
        );
        let (every_tool, files) = (loaded.every_tool(), self.files.clone());
        tokio::task::spawn_blocking(move || {
            let context = contexts::gate(&store, &catalog, &every_tool, &caller, &id)?;
            let listed = sends_files.then(|| files.work_dir(&id).ok()).flatten();
            Ok((context, listed))
        })
        .await
        .map_err(|e| CallError::Task(e.to_string()))
    }

    /// The files a call in `context_id` is sent, and their side in the core.
    /// `listed` is the list the gate read with the context ([`Dispatcher::gate`]): taken
    /// as it is when given, unless `admitted` waited for a person's approval (such a call
    /// lists its files as they are once approved, not as they were when it came); else
    /// the list is read now.
    pub(super) async fn work_dir(
        &self,
        context_id: &str,
        call_id: &str,
        listed: Option<WorkDir>,
        admitted: &Admitted,
    ) -> Result<(WorkDir, Arc<CallFiles>), CallError> {
        let work = match listed.filter(|_| admitted.security != Security::Write) {
            Some(work) => work,
            None => {
                let (files, ctx) = (self.files.clone(), context_id.to_string());
                tokio::task::spawn_blocking(move || files.work_dir(&ctx))
                    .await
                    .map_err(|e| CallError::Task(e.to_string()))?
                    .map_err(|e| {
                        CallError::Task(format!("the context's files could not be listed: {e}"))
                    })?
            }
        };
        let side = Arc::new(CallFiles::new(
            self.files.clone(),
            context_id,
            call_id,
            &work,
        ));
        Ok((work, side))
    }
}
