//! Who may do what (docs/http-api.md, "Roles"): the two roles, the caller a request was
//! authenticated as, and the bot tokens ([`tokens`]).
//!
//! The **operator** (the token in `<state>/api-token`, console sessions) may do
//! everything. A **bot** (a token made with `skillbox tokens create`) may call tools of
//! its skills, route, use the contexts it created and read its own calls; the gateway's
//! route table names the role each route needs, and the call pipeline's admission checks
//! a bot's skills.

pub mod tokens;

use std::sync::Arc;

pub use self::tokens::{BotTokenInfo, BotTokens, TokenError};

/// The name calls, approvals and routes of the operator are attributed to. No bot can
/// take it.
pub use crate::state::store::OPERATOR;

/// A role a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Any authenticated caller: a bot or the operator.
    Bot,
    /// The operator only.
    Operator,
}

impl Role {
    /// The role's name in refusals and docs.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Bot => "bot",
            Role::Operator => "operator",
        }
    }
}

/// A bot, as its token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bot {
    /// Its name (unique, never `operator`).
    pub name: String,
    /// The skills it may use; `None` for every skill.
    pub skills: Option<Vec<String>>,
}

/// Who made a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// The operator.
    Operator,
    /// A bot.
    Bot(Arc<Bot>),
}

impl Caller {
    /// The name the caller's calls, approvals and routes are attributed to.
    pub fn name(&self) -> &str {
        match self {
            Caller::Operator => OPERATOR,
            Caller::Bot(bot) => &bot.name,
        }
    }

    /// Whether this is the operator.
    pub fn is_operator(&self) -> bool {
        matches!(self, Caller::Operator)
    }

    /// Whether the caller holds `role`.
    pub fn has(&self, role: Role) -> bool {
        match (self, role) {
            (Caller::Operator, _) | (Caller::Bot(_), Role::Bot) => true,
            (Caller::Bot(_), Role::Operator) => false,
        }
    }

    /// Whether the caller may use the skill `name` (its tools, instructions and files).
    pub fn may_use_skill(&self, name: &str) -> bool {
        match self {
            Caller::Operator => true,
            Caller::Bot(bot) => bot
                .skills
                .as_ref()
                .is_none_or(|skills| skills.iter().any(|s| s == name)),
        }
    }

    /// Why the caller may not use the skill `name`, if it may not.
    pub fn skill_refusal(&self, name: &str) -> Option<String> {
        match self {
            Caller::Bot(bot) if !self.may_use_skill(name) => Some(format!(
                "bot {:?} may not use skill {name:?}: its token allows only {}; the operator \
                 can make a token with more skills (`skillbox tokens create NAME --skills ...`)",
                bot.name,
                bot.skills.as_deref().unwrap_or_default().join(", ")
            )),
            _ => None,
        }
    }

    /// Whether the caller may see what `owner` (a caller's name) made: the operator sees
    /// everything, a bot its own.
    pub fn sees(&self, owner: &str) -> bool {
        self.is_operator() || self.name() == owner
    }
}

/// Who asked for a call, and in which context: carried with the call through the pipeline
/// into its record, its approvals and its callbacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOrigin {
    /// The caller.
    pub caller: Caller,
    /// The context the call was made in, if any.
    pub context_id: Option<String>,
}

impl CallOrigin {
    /// A call of the operator outside any context (the CLI, tests).
    pub fn operator() -> Self {
        Self {
            caller: Caller::Operator,
            context_id: None,
        }
    }

    /// A call of `caller` in `context_id`.
    pub fn new(caller: Caller, context_id: Option<String>) -> Self {
        Self { caller, context_id }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bot(skills: Option<&[&str]>) -> Caller {
        Caller::Bot(Arc::new(Bot {
            name: "tg".into(),
            skills: skills.map(|s| s.iter().map(|x| x.to_string()).collect()),
        }))
    }

    #[test]
    fn a_bot_holds_the_bot_role_only() {
        assert!(bot(None).has(Role::Bot));
        assert!(!bot(None).has(Role::Operator));
        assert!(Caller::Operator.has(Role::Operator));
        assert!(Caller::Operator.has(Role::Bot));
    }

    #[test]
    fn a_bot_with_skills_may_use_those_only_and_the_refusal_says_which() {
        let b = bot(Some(&["notes"]));
        assert!(b.may_use_skill("notes"));
        assert!(!b.may_use_skill("mail"));
        let why = b.skill_refusal("mail").unwrap();
        assert!(
            why.contains("\"tg\"") && why.contains("only notes"),
            "{why}"
        );
        assert!(bot(None).may_use_skill("mail"));
        assert!(Caller::Operator.skill_refusal("mail").is_none());
    }

    #[test]
    fn a_bot_sees_its_own_records_and_the_operator_all() {
        assert!(bot(None).sees("tg"));
        assert!(!bot(None).sees("other"));
        assert!(!bot(None).sees(OPERATOR));
        assert!(Caller::Operator.sees("tg"));
    }
}
