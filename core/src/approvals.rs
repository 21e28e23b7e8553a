//! Approvals of `write` and `sign` tool calls (docs/http-api.md): a call waits until an operator
//! approves it (API, CLI or the approvals page), unless the operator's policy approves it.
//!
//! Every approval lives in the [`Store`], so it outlives the core: a call that was waiting
//! when the core stopped leaves a `pending` record; an operator approves it after the
//! restart, and the bot's retry of the same call (same skill, tool and arguments) finds the
//! approved record and runs. An approval lets exactly one call run.
//!
//! A waiting call wakes at once when [`Approvals::decide`] runs in this process, and
//! otherwise notices a decision written by another process (the CLI on the same database)
//! within [`POLL_INTERVAL`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ring::rand::{SecureRandom, SystemRandom};
use skillbox_protocol::skill::Security;
use tokio::sync::watch;
use tokio::time::Instant;

use self::grants::{GrantLimits, Grants};
use crate::auth::Caller;
use crate::observe::Metrics;
use crate::state::store::{unix_ms_now, Store, StoreError};

mod canonical;
mod error;
pub mod grants;
pub mod inspect;
pub mod payload;
mod request;
mod revoked;

pub use crate::state::config::approvals::{ApprovalPolicy, DEFAULT_TIMEOUT_MS};

pub(crate) use self::canonical::hex;
pub use self::canonical::{args_hash, canonical_json};
pub use self::error::ApprovalError;
pub use self::request::{ApprovalGrant, ApprovalRequest};

pub use crate::state::store::{ApprovalRecord, ApprovalStatus, Decision};

/// How often a waiting call re-reads its approval, to see decisions made by another
/// process on the same database.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// What a timeout too large for the clock becomes: about thirty years.
const FOREVER: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// How many newly asked approvals [`Approvals::watch_asked`] keeps for a slow receiver.
pub const ASKED_BACKLOG: usize = 256;

/// The approvals of this core: share it behind an `Arc`.
#[derive(Debug)]
pub struct Approvals {
    store: Store,
    policy: ApprovalPolicy,
    /// Per pending approval with a call waiting in this process, the bell that
    /// [`Approvals::decide`] rings.
    waiters: Mutex<HashMap<String, watch::Sender<()>>>,
    /// Every approval asked for, as it is recorded (the MCP server links its clients to it).
    asked: tokio::sync::broadcast::Sender<ApprovalRecord>,
    random: SystemRandom,
    grants: Grants,
    metrics: Arc<Metrics>,
}

impl Approvals {
    /// Approvals over `store` under `policy`.
    pub fn new(store: Store, policy: ApprovalPolicy) -> Approvals {
        let grants = Grants::new(GrantLimits {
            max_minutes: policy.allow_max_minutes,
            max_entries: policy.allow_max_entries,
        });
        Approvals {
            store,
            policy,
            waiters: Mutex::new(HashMap::new()),
            asked: tokio::sync::broadcast::channel(ASKED_BACKLOG).0,
            random: SystemRandom::new(),
            grants,
            metrics: Arc::new(Metrics::default()),
        }
    }

    /// Records decision times into `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The operator's time-boxed allowances (set and revoked in the console only).
    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    /// The approvals asked for from now on, each as it is recorded `pending` (a receiver
    /// that falls more than [`ASKED_BACKLOG`] behind skips the oldest).
    pub fn watch_asked(&self) -> tokio::sync::broadcast::Receiver<ApprovalRecord> {
        self.asked.subscribe()
    }

    /// The policy in force.
    pub fn policy(&self) -> &ApprovalPolicy {
        &self.policy
    }

    /// Decides whether a call may run, waiting for an operator when it must. If the
    /// returned future is dropped while waiting, the approval stays `pending` in the store,
    /// so an operator can still approve it for a retry of the same call.
    pub async fn request(&self, req: ApprovalRequest) -> Result<ApprovalGrant, ApprovalError> {
        let (skill, tool) = (&req.skill, &req.tool);
        if req.security == Security::Read {
            return Ok(ApprovalGrant::NotRequired);
        }
        if self.policy.auto_approves(skill, tool) {
            tracing::info!(%skill, %tool, "call approved by the auto-approve policy");
            return Ok(ApprovalGrant::Auto);
        }
        if req.security == Security::Write {
            if let Some(g) = self.grants.covering(skill, tool, unix_ms_now()) {
                tracing::info!(%skill, %tool, allowance = %g.id, until = g.until, "call approved by an operator's allowance");
                return Ok(ApprovalGrant::Allowance { id: g.id });
            }
        }
        self.ask_operator(req).await
    }

    /// Asks an operator, with no auto-approve policy or allowance standing in: what the
    /// operator must see every time (a skill update that widens its permissions). Waits
    /// like [`Approvals::request`]; an approval given earlier for the identical request is
    /// used once.
    pub async fn request_confirmation(
        &self,
        req: ApprovalRequest,
    ) -> Result<ApprovalGrant, ApprovalError> {
        self.ask_operator(req).await
    }

    /// Records a pending approval (or claims an earlier one) and waits for the decision.
    async fn ask_operator(&self, req: ApprovalRequest) -> Result<ApprovalGrant, ApprovalError> {
        let ApprovalRequest {
            skill,
            tool,
            args,
            security,
            requested_by,
            context_id,
        } = req;
        let args_hash = args_hash(&args);
        let claimed = {
            let (skill, tool, hash) = (skill.clone(), tool.clone(), args_hash.clone());
            let by = requested_by.clone();
            self.blocking(move |s| s.claim_usable_approval(&skill, &tool, &hash, &by))
                .await?
        };
        if let Some(record) = claimed {
            tracing::info!(approval_id = %record.id, %skill, %tool, "call runs on an earlier approval");
            return Ok(ApprovalGrant::Earlier { id: record.id });
        }

        let id = self.new_id()?;
        let record = ApprovalRecord {
            id: id.clone(),
            skill,
            tool,
            args_hash,
            args,
            security,
            status: ApprovalStatus::Pending,
            created_at: unix_ms_now(),
            decided_at: None,
            reason: None,
            requested_by,
            context_id,
            decided_by: None,
        };
        let waiter = self.register(&id);
        tracing::info!(
            approval_id = %id,
            skill = %record.skill,
            tool = %record.tool,
            security = ?security,
            requested_by = %record.requested_by,
            timeout_ms = self.policy.timeout_ms,
            "call waits for approval: approve it with `skillbox approvals approve {id}` or POST /v1/approvals/{id}"
        );
        tracing::debug!(approval_id = %id, args_hash = %record.args_hash, "approval arguments hash");
        let announced = record.clone();
        self.blocking(move |s| s.insert_approval(&record)).await?;
        // Nobody listening is fine: the approval is in the store either way.
        let _ = self.asked.send(announced);
        self.wait(&id, waiter).await
    }

    /// Approvals, oldest first, all or those with one status.
    pub fn list(
        &self,
        status: Option<ApprovalStatus>,
    ) -> Result<Vec<ApprovalRecord>, ApprovalError> {
        Ok(self.store.list_approvals(status)?)
    }

    /// One approval.
    pub fn get(&self, id: &str) -> Result<ApprovalRecord, ApprovalError> {
        self.store
            .get_approval(id)?
            .ok_or_else(|| ApprovalError::NotFound { id: id.to_owned() })
    }

    /// Decides a pending approval and wakes the call waiting on it in this process, if
    /// any. An approved approval lets one identical call run: the waiting one, or (if it
    /// is gone) the next retry.
    pub fn decide(
        &self,
        id: &str,
        decision: Decision,
        reason: Option<String>,
    ) -> Result<ApprovalRecord, ApprovalError> {
        self.decide_as(&Caller::Operator, id, decision, reason)
    }

    /// [`Approvals::decide`] by `caller`. The operator decides any approval. A bot decides
    /// none, unless `[approvals] bots_confirm_write` lets it relay its own user's
    /// confirmation of a `write` call that the same bot made; a `sign` approval is never
    /// a bot's to decide.
    pub fn decide_as(
        &self,
        caller: &Caller,
        id: &str,
        decision: Decision,
        reason: Option<String>,
    ) -> Result<ApprovalRecord, ApprovalError> {
        if let Caller::Bot(bot) = caller {
            let asked = self.get(id)?;
            if let Some(why) = self.bot_may_not_decide(&bot.name, &asked) {
                tracing::warn!(approval_id = %id, bot = %bot.name, "a bot's decision refused");
                return Err(ApprovalError::NotYours(why));
            }
        }
        let record =
            self.store
                .decide_approval_by(id, decision, reason.as_deref(), caller.name())?;
        tracing::info!(approval_id = %id, skill = %record.skill, tool = %record.tool, decision = %record.status, decided_by = %caller.name(), "approval decided");
        self.observe_decision(&record);
        if let Some(bell) = self.lock_waiters().get(id) {
            bell.send_replace(());
        }
        Ok(record)
    }

    /// Why bot `bot` may not decide `asked`, if it may not.
    fn bot_may_not_decide(&self, bot: &str, asked: &ApprovalRecord) -> Option<String> {
        let operator_only = "deciding approvals needs the operator role: approve it in the \
            console or with the operator token (`skillbox approvals approve ID`)";
        if asked.security == Security::Sign {
            return Some(format!(
                "approval {} is of a sign call: {operator_only}; a bot never decides a signature",
                asked.id
            ));
        }
        if !self.policy.bots_confirm_write {
            return Some(format!(
                "{operator_only}; [approvals] bots_confirm_write = true lets a bot relay its \
                 own user's confirmation of its write calls"
            ));
        }
        if asked.requested_by != bot {
            return Some(format!(
                "approval {} is of a call another caller made; a bot relays confirmations of \
                 its own write calls only ({operator_only})",
                asked.id
            ));
        }
        None
    }

    /// Waits until approval `id` is decided or the timeout runs out.
    async fn wait(&self, id: &str, mut waiter: Waiter<'_>) -> Result<ApprovalGrant, ApprovalError> {
        let timeout_ms = self.policy.timeout_ms;
        let now = Instant::now();
        // A timeout too large for the clock means "wait about forever".
        let deadline = now
            .checked_add(Duration::from_millis(timeout_ms))
            .unwrap_or_else(|| now + FOREVER);
        loop {
            let record = {
                let id = id.to_owned();
                self.blocking(move |s| s.get_approval(&id)).await?
            };
            let record = record.ok_or_else(|| ApprovalError::NotFound { id: id.to_owned() })?;
            match record.status {
                ApprovalStatus::Pending => {}
                ApprovalStatus::Approved => {
                    let id = id.to_owned();
                    let used = self.blocking(move |s| s.mark_used(&id)).await?;
                    tracing::info!(approval_id = %used.id, "call approved by an operator");
                    return Ok(ApprovalGrant::Decided { id: used.id });
                }
                ApprovalStatus::Denied => {
                    return Err(ApprovalError::Denied {
                        id: id.to_owned(),
                        reason: record.reason,
                    })
                }
                ApprovalStatus::Expired => {
                    return Err(ApprovalError::TimedOut {
                        id: id.to_owned(),
                        timeout_ms,
                    })
                }
                ApprovalStatus::Used => {
                    return Err(ApprovalError::AlreadyUsed { id: id.to_owned() })
                }
            }
            let now = Instant::now();
            if now >= deadline {
                let expiring = id.to_owned();
                match self.blocking(move |s| s.expire_approval(&expiring)).await {
                    Ok(expired) => {
                        self.observe_decision(&expired);
                        tracing::warn!(approval_id = %id, timeout_ms, "approval expired: nobody decided in time");
                        return Err(ApprovalError::TimedOut {
                            id: id.to_owned(),
                            timeout_ms,
                        });
                    }
                    // Decided at the last moment: read the decision.
                    Err(ApprovalError::NotPending { .. }) => continue,
                    Err(e) => return Err(e),
                }
            }
            let nap = POLL_INTERVAL.min(deadline - now);
            tokio::select! {
                rang = waiter.receiver.changed() => {
                    if rang.is_err() {
                        tokio::time::sleep(nap).await;
                    }
                }
                () = tokio::time::sleep(nap) => {}
            }
        }
    }

    fn observe_decision(&self, record: &ApprovalRecord) {
        let decided = record.decided_at.unwrap_or_else(unix_ms_now);
        let after = u64::try_from(decided.saturating_sub(record.created_at)).unwrap_or(0);
        self.metrics
            .observe_decision(record.status.as_str(), Duration::from_millis(after));
    }

    /// Runs one short store step on the blocking pool.
    async fn blocking<T, F>(&self, step: F) -> Result<T, ApprovalError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || step(&store))
            .await
            .map_err(|source| ApprovalError::StoreTask { source })?
            .map_err(ApprovalError::from)
    }

    fn new_id(&self) -> Result<String, ApprovalError> {
        let mut bytes = [0u8; 16];
        self.random
            .fill(&mut bytes)
            .map_err(|_| ApprovalError::RandomId)?;
        Ok(hex(&bytes))
    }

    fn lock_waiters(&self) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<()>>> {
        // The map stays consistent across a panic (each operation is one insert/remove).
        self.waiters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn register(&self, id: &str) -> Waiter<'_> {
        let (sender, receiver) = watch::channel(());
        self.lock_waiters().insert(id.to_owned(), sender);
        Waiter {
            approvals: self,
            id: id.to_owned(),
            receiver,
        }
    }
}

/// A call waiting in this process; unregisters itself when the wait ends or is dropped.
struct Waiter<'a> {
    approvals: &'a Approvals,
    id: String,
    receiver: watch::Receiver<()>,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.approvals.lock_waiters().remove(&self.id);
    }
}

#[cfg(test)]
mod tests;
