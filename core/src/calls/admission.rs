//! The pipeline's admit and approve steps (see [`super::pipeline`]): the caller may use
//! the skill, the tool exists, its skill is neither disabled nor changed since it was
//! verified and can run where tools run (`admit`); a `write` or `sign` tool waits for its
//! approval (`approve`).

use std::sync::Arc;

use serde_json::Value;
use skillbox_protocol::skill::{Security, Skill};
use skillbox_protocol::ToolRef;

use super::inflight::ApprovalTrail;
use super::pipeline::Admitted;
use super::{CallError, Dispatcher, Loaded};
use crate::approvals::ApprovalRequest;
use crate::auth::{CallOrigin, Caller};
use crate::executors::readiness::Availability;

impl Dispatcher {
    /// The caller may use the skill, the tool exists, its skill is not disabled, and it
    /// can run where tools run. A bot's skills are judged first, so a bot learns nothing
    /// of skills it may not use.
    pub(super) fn admit(
        &self,
        loaded: &Loaded,
        caller: &Caller,
        tool: &ToolRef,
    ) -> Result<Admitted, CallError> {
        let (skill_name, tool_name) = (tool.skill.as_str(), tool.tool.as_str());
        if let Some(why) = caller.skill_refusal(skill_name) {
            return Err(CallError::NotPermitted(why));
        }
        let catalog = &loaded.catalog;
        let skill = match loaded.skill(skill_name) {
            Some(skill) => skill,
            None => {
                return Err(
                    match crate::skills::install::disabled::reason(catalog, skill_name) {
                        Some(why) => CallError::Disabled {
                            skill: skill_name.to_string(),
                            why,
                        },
                        None => CallError::NoSuchSkill(skill_name.to_string()),
                    },
                )
            }
        };
        // Only what the call needs of its tool is taken, not a copy of the whole tool (its
        // schemas and command) on every call.
        let (timeout_ms, security) = match skill.tool(tool_name) {
            Some(tool) => (skill.timeout_ms(tool), tool.security),
            None => {
                return Err(CallError::NoSuchTool {
                    skill: skill_name.to_string(),
                    tool: tool_name.to_string(),
                })
            }
        };
        self.admit_skill(loaded, &skill)?;
        Ok(Admitted {
            timeout_ms,
            skill,
            tool: tool_name.to_string(),
            security,
        })
    }

    /// [`Dispatcher::admit`] of a built-in (`builtin`) run under the envelope of skill
    /// `skill_name`: its limits, and the security of its tools
    /// ([`super::envelope::envelope_security`]).
    pub(super) fn admit_envelope(
        &self,
        loaded: &Loaded,
        caller: &Caller,
        skill_name: &str,
        builtin: &str,
    ) -> Result<Admitted, CallError> {
        if let Some(why) = caller.skill_refusal(skill_name) {
            return Err(CallError::NotPermitted(why));
        }
        let skill = match loaded.skill(skill_name) {
            Some(skill) => skill,
            None => {
                return Err(
                    match crate::skills::install::disabled::reason(&loaded.catalog, skill_name) {
                        Some(why) => CallError::Disabled {
                            skill: skill_name.to_string(),
                            why,
                        },
                        None => CallError::NoSuchSkill(skill_name.to_string()),
                    },
                )
            }
        };
        self.admit_skill(loaded, &skill)?;
        Ok(Admitted {
            timeout_ms: skill.execution.timeout_ms,
            security: super::envelope::envelope_security(&skill),
            tool: builtin.to_string(),
            skill,
        })
    }

    /// The skill's files are still the ones verified, and it can run where tools run.
    fn admit_skill(&self, loaded: &Loaded, skill: &Arc<Skill>) -> Result<(), CallError> {
        // An installed skill whose files changed since they were verified is refused now,
        // not at the next reload (skills/stamp.rs).
        loaded
            .stamps
            .check(skill)
            .map_err(|why| CallError::Disabled {
                skill: skill.name.clone(),
                why,
            })?;
        if let Availability::Unavailable(reason) = self.availability.of(skill) {
            return Err(CallError::Unavailable {
                skill: skill.name.clone(),
                reason,
            });
        }
        Ok(())
    }

    /// A `write` tool waits for an approval of the call. A `sign` tool waits at each
    /// signature instead, where the operator sees what is being signed (callbacks.rs):
    /// asking twice for one signature would only train operators to click through.
    pub(super) async fn approve(
        &self,
        origin: &CallOrigin,
        admitted: &Admitted,
        args: &Value,
        trail: &ApprovalTrail,
    ) -> Result<(), CallError> {
        if admitted.security != Security::Write {
            return Ok(());
        }
        let asked = self
            .approvals
            .request(ApprovalRequest {
                skill: admitted.skill.name.clone(),
                tool: admitted.tool.clone(),
                args: args.clone(),
                security: admitted.security,
                requested_by: origin.caller.name().to_owned(),
                context_id: origin.context_id.clone(),
            })
            .await;
        if let Some(id) = match &asked {
            Ok(grant) => grant.approval_id(),
            Err(e) => e.approval_id(),
        } {
            trail.note(id);
        }
        asked?;
        Ok(())
    }
}
