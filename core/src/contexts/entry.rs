//! Who enters a context and what it may call there: a bot's first use claims the context
//! ([`enter`]), and the context's pins make its active tools ([`tools`]); [`gate`] is both,
//! on a blocking thread. [`gate_at_once`] is the same judgement from reads alone, for the
//! call pipeline's async thread when the store's connection is free: it answers only when
//! nothing has to be written (the context already has its owner, every pin's skill exists).

use std::collections::BTreeSet;
use std::sync::Arc;

use skillbox_protocol::skill::{Catalog, Skill};
use skillbox_protocol::Target;

use super::{active_tools, validate_id, ContextError, ContextTools, PinnedSkill};
use crate::auth::Caller;
use crate::state::store::{unix_ms_now, FreeConn, Pin, Store};

/// Lets `caller` into context `id`: a bot's first use makes the context its own, and a
/// context that another bot made is refused as not found. The operator enters every
/// context without taking it (its pins stay for the bot that uses the context).
pub fn enter(store: &Store, caller: &Caller, id: &str) -> Result<(), ContextError> {
    validate_id(id)?;
    let Caller::Bot(bot) = caller else {
        return Ok(());
    };
    let owner = store.claim_context(id, &bot.name, unix_ms_now())?;
    owned_by(&owner, caller, id)
}

/// `Ok` when `owner` is `caller` (or the caller is the operator), else the refusal.
fn owned_by(owner: &str, caller: &Caller, id: &str) -> Result<(), ContextError> {
    match caller {
        Caller::Bot(bot) if owner != bot.name => Err(ContextError::NotYours {
            id: id.to_owned(),
            bot: bot.name.clone(),
        }),
        _ => Ok(()),
    }
}

/// The pins and active tools of context `id` for `caller`, once it is let in
/// ([`enter`]): what the call pipeline's gate judges a call by. Blocking (SQLite).
pub fn gate(
    store: &Store,
    catalog: &Catalog,
    every_tool: &Arc<BTreeSet<Target>>,
    caller: &Caller,
    id: &str,
) -> Result<ContextTools, ContextError> {
    enter(store, caller, id)?;
    tools(store, catalog, every_tool, id)
}

/// [`gate`] from reads alone on `conn`: `None` when it cannot judge without writing (a
/// bot's first use of the context claims it; a pin whose skill is gone is dropped) or a
/// read failed (the blocking [`gate`] then reports it), so the caller goes to [`gate`].
/// A few indexed reads, no wait: fit for an async thread.
pub fn gate_at_once(
    conn: &FreeConn<'_>,
    catalog: &Catalog,
    every_tool: &Arc<BTreeSet<Target>>,
    caller: &Caller,
    id: &str,
) -> Option<Result<ContextTools, ContextError>> {
    if let Err(e) = validate_id(id) {
        return Some(Err(e));
    }
    if matches!(caller, Caller::Bot(_)) {
        let owner = conn.context_owner(id).ok()??;
        if let Err(refused) = owned_by(&owner, caller, id) {
            return Some(Err(refused));
        }
    }
    let pins = conn.pinned_skills(id).ok()?;
    let (context, gone) = of_pins(catalog, every_tool, id, pins);
    gone.is_empty().then_some(Ok(context))
}

/// Reads a context's pins (dropping and reporting those whose skill is gone) and active
/// tools; `every_tool` is [`super::all_tools`] of `catalog`, made once per load and shared by
/// every context that does not restrict its tools. Blocking (SQLite).
pub fn tools(
    store: &Store,
    catalog: &Catalog,
    every_tool: &Arc<BTreeSet<Target>>,
    context_id: &str,
) -> Result<ContextTools, ContextError> {
    validate_id(context_id)?;
    let pins = store.pinned_skills(context_id)?;
    let (mut context, gone) = of_pins(catalog, every_tool, context_id, pins);
    for skill in gone {
        store.unpin_skill(context_id, &skill)?;
        tracing::warn!(context_id, skill = %skill, "dropped the pin of a skill that no longer exists");
        context.dropped.push(skill);
    }
    Ok(context)
}

/// The context its `pins` make, and the pinned skills that no longer exist (left out).
fn of_pins(
    catalog: &Catalog,
    every_tool: &Arc<BTreeSet<Target>>,
    context_id: &str,
    pins: Vec<Pin>,
) -> (ContextTools, Vec<String>) {
    let mut pinned = Vec::new();
    let mut skills: Vec<&Skill> = Vec::new();
    let mut gone = Vec::new();
    for pin in pins {
        match catalog.get(&pin.skill) {
            Some(s) => {
                skills.push(s);
                pinned.push(PinnedSkill {
                    name: pin.skill,
                    pinned_at: pin.pinned_at,
                });
            }
            None => gone.push(pin.skill),
        }
    }
    let (restricted, active_tools) = match active_tools(catalog, &skills) {
        Some(set) => (true, Arc::new(set)),
        None => (false, Arc::clone(every_tool)),
    };
    let context = ContextTools {
        context_id: context_id.to_string(),
        pinned,
        dropped: Vec::new(),
        restricted,
        active_tools,
    };
    (context, gone)
}
