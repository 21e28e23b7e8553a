//! What a call carries of its skill's envelope besides the skill itself: the values of
//! its env names, the placeholders of its bound secrets (the values stay in the core, for
//! the egress proxy), the names and hosts the operator granted (which the executor, which
//! reads the skill as published, must be told), the certificates its programs trust and
//! its built dependencies (the protocol's [`Envelope`], built here for a tool call and a
//! session alike), and the security of what runs without a declared tool; and the one rule
//! of which skill's envelope a built-in may use in a context ([`in_context`]).

use std::sync::Arc;

use skillbox_protocol::methods::Envelope;
use skillbox_protocol::skill::{Security, Skill, Tool};
use skillbox_protocol::Target;

use super::{CallError, Loaded};
use crate::contexts::ContextTools;
use crate::proxy::egress::EgressTrust;
use crate::proxy::secrets::CallSecrets;
use crate::random::{RandomError, RandomSource};
use crate::state::secrets::Secrets;

/// One call's share of its skill's envelope: what travels to the executor, and what stays
/// in the core.
pub(super) struct CallEnvelope {
    /// What the executor is sent ([`Envelope`]: values and placeholders of its env names,
    /// names, hosts and file size granted beyond what the skill declares, certificates its
    /// programs trust, its built dependencies), made here alone for every job.
    pub(super) wire: Envelope,
    /// The bound secrets' values, for the egress proxy.
    pub(super) secrets: Arc<CallSecrets>,
}

impl CallEnvelope {
    /// The envelope of a call of `skill` (its effective permissions): placeholders made
    /// for this call alone.
    pub(super) fn for_call(
        loaded: &Loaded,
        values: &Secrets,
        trust: Option<&EgressTrust>,
        rng: &dyn RandomSource,
        skill: &Skill,
    ) -> Result<Self, RandomError> {
        let perms = &skill.permissions;
        let mut env = values.for_names(&perms.env);
        let names: Vec<String> = perms.secret_names().map(str::to_string).collect();
        let (placeholders, secrets) =
            CallSecrets::bind(&perms.secrets, &values.for_names(&names), rng)?;
        env.extend(placeholders);
        let network = perms.is_network();
        Ok(Self {
            wire: Envelope {
                env,
                granted_env: granted_env(loaded, &skill.name),
                granted_network: granted_network(loaded, &skill.name),
                granted_max_file_mb: loaded
                    .grant_of(&skill.name)
                    .and_then(|(_, g)| g.max_file_mb),
                granted_unix_sockets: (loaded.grant_of(&skill.name))
                    .is_some_and(|(_, g)| g.unix_sockets),
                trust_pem: match (network, trust) {
                    (true, Some(trust)) => trust.sandbox_pem(!secrets.is_empty()),
                    _ => None,
                },
                deps: skill.dependencies.digest.clone(),
            },
            secrets: Arc::new(secrets),
        })
    }

    /// The envelope of a call under no skill: nothing.
    pub(super) fn none() -> Self {
        Self {
            wire: Envelope::default(),
            secrets: Arc::default(),
        }
    }
}

/// The env names `[grants.<skill>]` adds to what `skill` declares (plain, or bound as
/// secrets): the executor passes their values (or placeholders) too.
fn granted_env(loaded: &Loaded, skill: &str) -> Vec<String> {
    let Some((declared, grant)) = loaded.grant_of(skill) else {
        return Vec::new();
    };
    let is_declared =
        |n: &String| declared.env.contains(n) || declared.secret_names().any(|s| s == n);
    let names = grant
        .env
        .iter()
        .chain(grant.secrets.iter().map(|s| &s.name));
    let mut out: Vec<String> = Vec::new();
    for n in names.filter(|n| !is_declared(n)) {
        if !out.contains(n) {
            out.push(n.clone());
        }
    }
    out
}

/// The network hosts `[grants.<skill>]` adds to what `skill` declares (hosts of granted
/// secrets included): a non-empty list makes the executor run the call in a network
/// namespace behind the egress proxy.
fn granted_network(loaded: &Loaded, skill: &str) -> Vec<String> {
    let Some((declared, grant)) = loaded.grant_of(skill) else {
        return Vec::new();
    };
    let reachable = declared.reachable();
    let hosts = grant
        .network
        .iter()
        .chain(grant.secrets.iter().flat_map(|s| &s.hosts));
    let mut out: Vec<String> = Vec::new();
    for h in hosts.filter(|h| !reachable.contains(h)) {
        if !out.contains(h) {
            out.push(h.clone());
        }
    }
    out
}

/// What a call runs under a skill's envelope without a declared tool (a script, a
/// command) may do at most what the skill's tools may: `sign` when one of them signs,
/// `write` when one writes, `read` otherwise.
pub(super) fn envelope_security(skill: &Skill) -> Security {
    let has = |level| skill.tools.iter().any(|t: &Tool| t.security == level);
    if has(Security::Sign) {
        Security::Sign
    } else if has(Security::Write) {
        Security::Write
    } else {
        Security::Read
    }
}

/// The one rule of the skill a built-in runs under (or reads) in a context, which every
/// built-in's path calls once it has picked that skill: `exec_command`'s envelope,
/// `run_skill_script`'s skill, `load_skill`'s instructions, and a session's envelope again
/// at each `write_stdin`. The skill must be one the context lends (pinned there, or with a
/// tool active there, or any in a context that does not restrict its tools:
/// [`ContextTools::lends`]); no skill (a command without secrets or network) and no
/// context are always allowed. A refusal is the gate's: `permission_denied`.
pub(super) fn in_context(
    context: Option<&ContextTools>,
    builtin: &Target,
    skill: Option<&str>,
) -> Result<(), CallError> {
    match (context, skill) {
        (Some(c), Some(skill)) if !c.lends(skill) => {
            Err(CallError::NotInContext(c.envelope_refusal(builtin, skill)))
        }
        _ => Ok(()),
    }
}
