//! Per-call user ids and scratch dirs made ahead of calls, off their critical path: a
//! thread keeps a few [`Slot`]s ready (user id locked, leftovers of a crashed holder
//! killed, empty scratch dir owned by it, and under the sandbox the Landlock ruleset of a
//! call without a network begun on that dir); `prepare` takes one when there is one and
//! makes its own otherwise. A slot goes to one call only and ends with it, like one made
//! in line: nothing is reused.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::landlock::{self, RuntimeRules};
use super::reaper::{CallUser, UserPool};
use super::scratch::Scratch;

/// How long the filler waits before trying again when every user id is taken.
const RETRY: Duration = Duration::from_millis(5);

/// A user id (when the executor switches users) and its fresh, empty scratch dir.
#[derive(Debug)]
pub struct Slot {
    /// The call's user.
    pub user: Option<CallUser>,
    /// The call's scratch dir, owned by `user`.
    pub scratch: Scratch,
    /// The Landlock ruleset of a call without a network, begun on `scratch`
    /// ([`landlock::begin`]); none without the sandbox, or when it could not be begun
    /// (the call builds its own then).
    pub landlock: Option<landlock::Begun>,
}

/// The slots made ahead, and the thread that makes them.
#[derive(Debug)]
pub struct ReadySlots {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Debug)]
struct State {
    ready: Vec<Slot>,
    want: usize,
    stopped: bool,
    /// Whether the filler waits for a slot to be taken: only then does a take wake it (a
    /// condition variable's signal is a system call even when nobody waits).
    filler_idle: bool,
}

impl ReadySlots {
    /// Keeps `want` slots ready from now on, taking ids from `users` and making scratch
    /// dirs under `root`, each with its ruleset begun from `rules` when given (under the
    /// sandbox).
    pub fn start(
        want: usize,
        users: Option<Arc<UserPool>>,
        root: PathBuf,
        rules: Option<Arc<RuntimeRules>>,
    ) -> Arc<Self> {
        let slots = Arc::new(Self {
            state: Mutex::new(State {
                ready: Vec::with_capacity(want),
                want,
                stopped: false,
                filler_idle: false,
            }),
            wake: Condvar::new(),
        });
        let filler = Arc::clone(&slots);
        let spawned = std::thread::Builder::new()
            .name("slot-filler".into())
            .spawn(move || filler.fill(users.as_ref(), &root, rules.as_deref()));
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the slot filler; calls make their own");
        }
        slots
    }

    fn fill(
        &self,
        users: Option<&Arc<UserPool>>,
        root: &std::path::Path,
        rules: Option<&RuntimeRules>,
    ) {
        loop {
            {
                let Ok(mut state) = self.state.lock() else {
                    return;
                };
                while !state.stopped && state.ready.len() >= state.want {
                    state.filler_idle = true;
                    state = match self.wake.wait(state) {
                        Ok(s) => s,
                        Err(_) => return,
                    };
                }
                state.filler_idle = false;
                if state.stopped {
                    return;
                }
            }
            let user = match users {
                Some(pool) => match pool.acquire() {
                    Some(user) => Some(user),
                    None => {
                        std::thread::sleep(RETRY);
                        continue;
                    }
                },
                None => None,
            };
            let uid = user.as_ref().map(|u| u.uid);
            let scratch = match super::room::when_room(|| Scratch::create(root, uid)) {
                Ok(scratch) => scratch,
                // Full still: a slot is made again once ended calls have freed room.
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                    std::thread::sleep(RETRY);
                    continue;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot make a scratch dir ahead; calls make their own");
                    return;
                }
            };
            let landlock = rules.and_then(|rules| begin(rules, &scratch));
            let slot = Slot {
                user,
                scratch,
                landlock,
            };
            match self.state.lock() {
                Ok(mut state) if !state.stopped => state.ready.push(slot),
                _ => return,
            }
        }
    }

    /// A ready slot, if there is one; the filler makes its replacement.
    pub fn take(&self) -> Option<Slot> {
        let (slot, idle) = {
            let mut state = self.state.lock().ok()?;
            (state.ready.pop(), state.filler_idle)
        };
        if idle {
            self.wake.notify_one();
        }
        slot
    }

    /// The ready slot of user `uid`, if one is; the filler makes its replacement.
    pub fn take_user(&self, uid: u32) -> Option<Slot> {
        let (slot, idle) = {
            let mut state = self.state.lock().ok()?;
            let at =
                (state.ready.iter()).position(|s| s.user.as_ref().is_some_and(|u| u.uid == uid))?;
            (state.ready.swap_remove(at), state.filler_idle)
        };
        if idle {
            self.wake.notify_one();
        }
        Some(slot)
    }

    /// Stops the filler and releases every ready slot (user id unlocked, scratch removed).
    pub fn stop(&self) {
        let drained = match self.state.lock() {
            Ok(mut state) => {
                state.stopped = true;
                std::mem::take(&mut state.ready)
            }
            Err(_) => Vec::new(),
        };
        self.wake.notify_all();
        drop(drained);
    }
}

/// The ruleset of a call without a network on `scratch`, or none (logged: the call then
/// builds its own, and fails if the kernel refuses it there too).
fn begin(rules: &RuntimeRules, scratch: &Scratch) -> Option<landlock::Begun> {
    match landlock::begin(scratch.path(), rules, landlock::NetAccess::None) {
        Ok(begun) => begun,
        Err(e) => {
            tracing::warn!(error = %e, "cannot begin a Landlock ruleset ahead; the call builds its own");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A context's next call asks for the slot of its kept folder's user: it gets that
    /// slot (its scratch owned by that user), and nothing for a user no slot holds.
    #[test]
    fn a_ready_slot_is_taken_by_its_user() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED: needs root (scratch dirs of other users)");
            return;
        }
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let pool = UserPool::new(4_190_000_300, 4, dir.path().join("locks")).unwrap();
        let slots = ReadySlots::start(2, Some(pool), dir.path().join("scratch"), None);
        let ready = |slots: &ReadySlots| {
            let state = slots.state.lock().unwrap();
            (state.ready.iter())
                .filter_map(|s| s.user.as_ref().map(|u| u.uid))
                .collect::<Vec<_>>()
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while ready(&slots).len() < 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let uids = ready(&slots);
        assert_eq!(uids.len(), 2, "the filler made two slots");
        let slot = slots.take_user(uids[0]).expect("a slot of that user");
        assert_eq!(slot.user.as_ref().map(|u| u.uid), Some(uids[0]));
        let owner = std::fs::metadata(slot.scratch.path()).unwrap().uid();
        assert_eq!(owner, uids[0], "its scratch is that user's");
        assert!(slots.take_user(4_190_000_399).is_none(), "no slot holds it");
        // The filler, idle with every slot made, is woken by the take and makes another.
        drop(slot);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while ready(&slots).len() < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the taken slot was not replaced"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        slots.stop();
    }
}
