//! Contexts: skills pinned per context id (a chat, a session), persisted in SQLite, and
//! what a context makes of them (the context-management seed): the prompt — a catalogue of
//! the available skills plus the bodies of the pinned ones — and the active tools — the
//! union of the pinned skills' `allowed-tools` and the base tools, intersected with the
//! tools that exist. `POST /v1/tools/call` with a context id refuses a tool outside them.
//!
//! A pinned skill without `allowed-tools` contributes its own tools; a context restricts
//! tools only when at least one pinned skill declares `allowed-tools` (as in the seed,
//! where `activeTools` exists only when a skill declares `allowedTools`). Pins are read at
//! every request, so a pin made by the CLI on the same database takes effect at once; a pin
//! whose skill no longer exists is dropped from the store and reported.

pub mod builtins;
pub mod delegation;
pub mod disclosure;
mod entry;
pub mod files;

use skillbox_protocol::{Target, ToolRef};
use std::collections::BTreeSet;
use std::sync::Arc;

use serde::Serialize;
use skillbox_protocol::result::ErrorKind;
use skillbox_protocol::skill::{Catalog, Skill};

use crate::state::store::{unix_ms_now, Store, StoreError};

pub use self::entry::{enter, gate, gate_at_once, tools};

/// The built-in tools every context keeps ([`builtins::ALL`]): progressive disclosure
/// ([`disclosure`]) and the command sessions (seed 004's execution tools; `[exec] enabled
/// = false` refuses them).
pub fn base_tools() -> impl Iterator<Item = Target> {
    builtins::ALL.into_iter().map(|b| b.target.clone())
}

/// Longest context id.
pub const MAX_CONTEXT_ID: usize = 128;

/// Why a context operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// The id has characters or a length the API does not take.
    #[error(
        "context id {id:?} is not valid: use 1-{MAX_CONTEXT_ID} characters of A-Z a-z 0-9 . _ : -"
    )]
    InvalidId {
        /// The id given.
        id: String,
    },
    /// Pinning a skill the core does not know.
    #[error(
        "no skill named {name:?} to pin; list skills with `skillbox skill list` or GET /v1/skills"
    )]
    UnknownSkill {
        /// The name given.
        name: String,
    },
    /// The context belongs to another caller (a bot sees only the contexts it made).
    #[error("no context {id:?} for bot {bot:?}: the id is taken by another caller; contexts are per bot, pick another id")]
    NotYours {
        /// The context id.
        id: String,
        /// The bot that asked.
        bot: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ContextError {
    /// The contract kind of this error (the one mapping to the outside).
    pub fn error_kind(&self) -> ErrorKind {
        match self {
            ContextError::InvalidId { .. } => ErrorKind::InvalidArgs,
            ContextError::UnknownSkill { .. } | ContextError::NotYours { .. } => {
                ErrorKind::NotFound
            }
            ContextError::Store(_) => ErrorKind::Unavailable,
        }
    }
}

/// A pinned skill, as a context shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PinnedSkill {
    /// The skill.
    pub name: String,
    /// When it was pinned, Unix milliseconds.
    pub pinned_at: i64,
}

/// A context's pins and the tools they make callable: what the call pipeline's gate
/// reads (SQLite only, no skill body).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextTools {
    /// The context id.
    pub context_id: String,
    /// Pinned skills that exist, oldest first.
    pub pinned: Vec<PinnedSkill>,
    /// Pins dropped by this read because their skill is gone.
    pub dropped: Vec<String>,
    /// Whether tool calls in this context are limited to `active_tools`.
    pub restricted: bool,
    /// The tools callable in this context (every tool when not restricted: the set a
    /// load keeps, shared), sorted.
    pub active_tools: Arc<BTreeSet<Target>>,
}

/// What a context is now: the answer of `GET /v1/contexts/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextView {
    /// Its pins and active tools.
    #[serde(flatten)]
    pub tools: ContextTools,
    /// The skill catalogue and the bodies of the pinned skills.
    pub prompt: String,
}

impl ContextView {
    /// Whether `tool` may be called in this context.
    pub fn allows(&self, tool: &Target) -> bool {
        self.tools.allows(tool)
    }
}

impl ContextTools {
    /// Whether `tool` may be called in this context.
    pub fn allows(&self, tool: &Target) -> bool {
        !self.restricted || self.active_tools.contains(tool)
    }

    /// Whether `skill` is pinned here.
    pub fn pins(&self, skill: &str) -> bool {
        self.pinned.iter().any(|p| p.name == skill)
    }

    /// Whether a built-in may run under skill `skill`'s envelope here (or, `load_skill`,
    /// read it): any skill in a context that does not restrict its tools, else a skill
    /// pinned here or one with a tool among the active tools. A restricted context never
    /// lends the network, secrets or folder of a skill it does not use.
    pub fn lends(&self, skill: &str) -> bool {
        !self.restricted
            || self.pins(skill)
            || (self.active_tools.iter()).any(|t| matches!(t, Target::Tool(r) if r.skill == skill))
    }

    /// The refusal of a built-in (`builtin`) under skill `skill`, which this context does
    /// not lend ([`ContextTools::lends`]).
    pub fn envelope_refusal(&self, builtin: &Target, skill: &str) -> String {
        let id = &self.context_id;
        let pinned: Vec<&str> = self.pinned.iter().map(|p| p.name.as_str()).collect();
        format!(
            "{builtin} may not use skill {skill:?} in context {id:?}: the allowed-tools of the \
             skills pinned there ({}) restrict the context, and {skill:?} is neither pinned \
             there nor has a tool active there. Pin it in the context (`skillbox context pin \
             {id} {skill}`, or PUT /v1/contexts/{id}/skills/{skill}) to use it, or call \
             without the context",
            pinned.join(", ")
        )
    }

    /// The refusal of a tool outside the context, naming the active tools.
    pub fn refusal(&self, tool: &Target) -> String {
        let active: Vec<String> = self.active_tools.iter().map(Target::to_string).collect();
        format!(
            "tool \"{tool}\" is not active in context {:?}; its pinned skills allow only: {}. \
             Pin a skill that allows it (`skillbox context pin`) or call without the context",
            self.context_id,
            active.join(", ")
        )
    }
}

/// Checks a context id: 1-128 characters of `A-Z a-z 0-9 . _ : -`.
pub fn validate_id(id: &str) -> Result<(), ContextError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_CONTEXT_ID
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
    if ok {
        Ok(())
    } else {
        Err(ContextError::InvalidId { id: id.to_string() })
    }
}

/// Every tool that exists: `skill:tool` of each skill, and the base tools.
pub fn all_tools(catalog: &Catalog) -> BTreeSet<Target> {
    let mut out: BTreeSet<Target> = catalog
        .skills
        .iter()
        .flat_map(|s| {
            s.tools
                .iter()
                .map(move |t| Target::Tool(ToolRef::new(&s.name, &t.name)))
        })
        .collect();
    out.extend(base_tools());
    out
}

/// The active tools of pinned skills, or `None` when none of them declares
/// `allowed-tools` (no restriction). An entry names a tool as `skill:tool`, or bare as a
/// tool of the skill declaring it or a base tool; entries naming no existing tool (e.g.
/// another agent's `Bash(git:*)`) are left out.
pub fn active_tools(catalog: &Catalog, pinned: &[&Skill]) -> Option<BTreeSet<Target>> {
    if pinned.iter().all(|s| s.allowed_tools.is_empty()) {
        return None;
    }
    let exists = |t: &Target| match t {
        Target::Tool(r) => catalog
            .get(&r.skill)
            .is_some_and(|s| s.tool(&r.tool).is_some()),
        other => base_tools().any(|b| b == *other),
    };
    let mut active: BTreeSet<Target> = base_tools().collect();
    for skill in pinned {
        if skill.allowed_tools.is_empty() {
            active.extend(
                (skill.tools.iter()).map(|t| Target::Tool(ToolRef::new(&skill.name, &t.name))),
            );
            continue;
        }
        for entry in &skill.allowed_tools {
            let entry = entry.trim();
            let named = if entry.contains(':') || skill.tool(entry).is_none() {
                Target::parse(entry).ok()
            } else {
                Some(Target::Tool(ToolRef::new(&skill.name, entry)))
            };
            if let Some(t) = named.filter(exists) {
                active.insert(t);
            }
        }
    }
    Some(active)
}

/// How a context's skills catalogue is cut to size: its budget in characters, and how
/// often each skill was used (its successful calls), the order after the `always` ones.
#[derive(Debug, Clone, Default)]
pub struct CatalogueBudget {
    /// `[routing] catalogue_budget_chars`.
    pub chars: usize,
    /// Successful calls by skill.
    pub uses: std::collections::HashMap<String, u64>,
}

/// A description's first sentence, at most this many characters, when the whole one does
/// not fit the budget.
const SHORT_DESCRIPTION: usize = 120;

/// The catalogue lines of the available skills within `budget` (see [`CatalogueBudget`]).
pub fn catalogue(
    catalog: &Catalog,
    available: &dyn Fn(&Skill) -> bool,
    budget: &CatalogueBudget,
) -> String {
    let mut skills: Vec<&Skill> = catalog.skills.iter().filter(|s| available(s)).collect();
    let uses = |s: &Skill| budget.uses.get(&s.name).copied().unwrap_or(0);
    skills.sort_by(|a, b| {
        (b.routing.always.cmp(&a.routing.always))
            .then(uses(b).cmp(&uses(a)))
            .then(a.name.cmp(&b.name))
    });
    let mut out = String::new();
    let mut omitted = 0usize;
    for s in skills {
        // One line each: a description's own line breaks are spaces here.
        let description = s
            .description
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let full = format!("- {}: {description}\n", s.name);
        if s.routing.always || out.len() + full.len() <= budget.chars {
            out.push_str(&full);
            continue;
        }
        let short = format!("- {}: {}\n", s.name, first_sentence(&description));
        if out.len() + short.len() <= budget.chars {
            out.push_str(&short);
        } else {
            omitted += 1;
        }
    }
    if omitted > 0 {
        out.push_str(&format!(
            "- ({omitted} more skills are not listed: route the task to find one, or call \
             `load_skill` with a name you know)\n"
        ));
    }
    out
}

/// The first sentence of `text`, cut to [`SHORT_DESCRIPTION`] characters.
fn first_sentence(text: &str) -> String {
    let end = text
        .char_indices()
        .find(|&(i, c)| {
            matches!(c, '.' | '。' | '!' | '?') && text[i + c.len_utf8()..].starts_with([' ', '\n'])
                || c == '。'
        })
        .map_or(text.len(), |(i, c)| i + c.len_utf8());
    let sentence = &text[..end];
    if sentence.chars().count() <= SHORT_DESCRIPTION {
        return sentence.to_string();
    }
    let cut: String = sentence.chars().take(SHORT_DESCRIPTION - 1).collect();
    format!("{}…", cut.trim_end())
}

/// The prompt of a context: the catalogue (name and description of each available skill,
/// so the agent can `load_skill` one, within `budget`) and the bodies of the pinned skills.
pub fn prompt(
    catalog: &Catalog,
    available: &dyn Fn(&Skill) -> bool,
    pinned: &[(&Skill, String)],
    budget: &CatalogueBudget,
) -> String {
    let mut out = String::from(
        "You have access to the following skills. If a task needs one, call `load_skill` \
         with its name to read its instructions.\n\n",
    );
    out.push_str(&catalogue(catalog, available, budget));
    if !pinned.is_empty() {
        out.push_str("\n# Active skills\n\nFollow these skills' instructions where they apply.\n");
        for (skill, body) in pinned {
            out.push_str(&format!("\n## Skill: {}\n\n{}\n", skill.name, body.trim()));
        }
    }
    out
}

/// Reads a context: its pins (dropping and reporting those whose skill is gone), prompt
/// and active tools. Blocking (SQLite and the skill bodies on disk).
pub fn view(
    store: &Store,
    catalog: &Catalog,
    available: &dyn Fn(&Skill) -> bool,
    context_id: &str,
    budget_chars: usize,
) -> Result<ContextView, ContextError> {
    let tools = tools(store, catalog, &Arc::new(all_tools(catalog)), context_id)?;
    let bodies: Vec<(&Skill, String)> = (tools.pinned.iter())
        .filter_map(|p| catalog.get(&p.name))
        .map(|s| (s, s.read_body().unwrap_or_default()))
        .collect();
    let uses = (store.all_skill_stats().unwrap_or_default().into_iter())
        .map(|s| (s.skill, s.successes))
        .collect();
    let budget = CatalogueBudget {
        chars: budget_chars,
        uses,
    };
    let prompt = prompt(catalog, available, &bodies, &budget);
    Ok(ContextView { tools, prompt })
}

/// Pins `skill` in `context_id`; the skill must exist. Returns whether it was new.
pub fn pin(
    store: &Store,
    catalog: &Catalog,
    context_id: &str,
    skill: &str,
) -> Result<bool, ContextError> {
    validate_id(context_id)?;
    if catalog.get(skill).is_none() {
        return Err(ContextError::UnknownSkill {
            name: skill.to_string(),
        });
    }
    Ok(store.pin_skill(context_id, skill, unix_ms_now())?)
}

/// Unpins `skill` from `context_id` (a skill that no longer exists can be unpinned).
/// Returns whether it was pinned.
pub fn unpin(store: &Store, context_id: &str, skill: &str) -> Result<bool, ContextError> {
    validate_id(context_id)?;
    Ok(store.unpin_skill(context_id, skill)?)
}

#[cfg(test)]
mod tests;
