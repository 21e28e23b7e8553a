//! Process lifetime: every process a call starts dies when the call ends.
//!
//! When the executor is root, each call in flight runs under its own user id from a pool
//! ([`UserPool`]); at the end, when any process of that id is left, a short-lived helper
//! switches to that id and sends SIGKILL to every process it may signal (`kill(-1)`),
//! which reaches double-forked, `setsid` grandchildren too. Without root, the process group and
//! every descendant still linked to the tool by parent ids are killed; a process that
//! double-forked out of the tree is not found then (documented limit of that mode).
//!
//! One file per job:
//! - `uid_pool.rs`: the per-call user ids ([`UserPool`], [`CallUser`]), locked host-wide.
//! - `kill.rs`: killing every process of a user id (and the check that any is left), the
//!   startup sweep, and the process-group kill.
//! - `kill_helper.rs`: the `clone`d helper that becomes a user and sends `kill(-1)`.
//! - `releaser.rs`: the thread that ends calls off their critical path ([`Releaser`]).
//! - `tree_walk.rs`: the kill without root, over the tool's descendants in `/proc`.

mod kill;
mod kill_helper;
mod releaser;
mod tree_walk;
mod uid_pool;

pub use kill::{has_live_process, kill_group, kill_user, kill_user_until_gone, user_has_process};
pub use kill_helper::kill_helpers_started;
pub use releaser::Releaser;
pub use tree_walk::kill_tree;
pub use uid_pool::{
    default_uid_base, in_initial_pid_namespace, CallUser, UserPool, CONTAINED_UID_BASE,
    DEFAULT_UID_BASE, MAX_IDLE_IDS,
};

#[cfg(test)]
mod tests;
