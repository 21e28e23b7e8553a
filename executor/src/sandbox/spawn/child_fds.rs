//! Low descriptor numbers a spawning thread keeps for what its child needs, so that the
//! child copies only the bottom of the executor's descriptor table.
//!
//! A child cloned without `CLONE_FILES` starts with a copy of the executor's whole table
//! (the connections, pipes and kept Landlock paths of every call in flight: hundreds under
//! load), and its `execve` then closes every copy again; a 16-client profile put that at
//! about 1.5 % of the machine (docs/hot-path.md). Instead the child is cloned sharing the
//! table and, before anything else, unshares it with
//! `close_range(end, ~0, CLOSE_RANGE_UNSHARE)`, for which the kernel copies only the
//! descriptors below `end`.
//!
//! The thread keeps up to [`SLOTS`] numbers below `end` (a spawner thread of tools
//! without network keeps [`SLOTS`]` - 1`: its children never have a namespace), each open on `/dev/null` while no child
//! is being started, so that no other thread gets them. Before a clone, [`ChildFds::place`]
//! puts the child's stdio ends, its Landlock ruleset and its network namespace on them (`dup3`, which swaps a
//! descriptor atomically); once the child has exec'd, dropping the [`Placed`] guard puts
//! the placeholders back, which drops the executor's extra references to the call's pipes.

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Descriptors a child may need: stdin, stdout, stderr, the Landlock ruleset, the
/// network namespace of a network call and the `cgroup.procs` of its memory cgroup.
pub const SLOTS: usize = 7;

/// This thread's kept numbers and the placeholder they return to.
#[derive(Debug)]
pub struct ChildFds {
    placeholder: OwnedFd,
    slots: Vec<OwnedFd>,
    /// One above the highest slot: the child keeps every descriptor below it.
    end: RawFd,
}

thread_local! {
    static CHILD_FDS: RefCell<Option<ChildFds>> = const { RefCell::new(None) };
}

/// Keeps `slots` (at most [`SLOTS`]) numbers for this thread now, while the table is
/// small (a spawner thread does at start); a thread that starts a child without them keeps
/// [`SLOTS`] on first use. A child needing more descriptors than its thread keeps copies
/// the whole table.
pub fn reserve(slots: usize) -> io::Result<()> {
    CHILD_FDS.with(|fds| {
        let mut fds = fds.borrow_mut();
        if fds.is_none() {
            *fds = Some(ChildFds::open(slots.min(SLOTS))?);
        }
        Ok(())
    })
}

/// Runs `f` with this thread's numbers, or with `None` when they cannot be kept (no
/// descriptor left): the child then copies the whole table, as a plain clone does.
pub fn with<R>(f: impl FnOnce(Option<&ChildFds>) -> R) -> R {
    if let Err(e) = reserve(SLOTS) {
        tracing::debug!(error = %e, "no descriptors kept for children; they copy the whole table");
    }
    CHILD_FDS.with(|fds| f(fds.borrow().as_ref()))
}

fn dev_null() -> io::Result<OwnedFd> {
    // SAFETY: a static NUL-terminated path; the new descriptor is owned below.
    let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just opened, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl ChildFds {
    fn open(count: usize) -> io::Result<Self> {
        let slots = (0..count)
            .map(|_| dev_null())
            .collect::<io::Result<Vec<_>>>()?;
        let end = slots.iter().map(AsRawFd::as_raw_fd).max().unwrap_or(2) + 1;
        Ok(Self {
            placeholder: dev_null()?,
            slots,
            end,
        })
    }

    /// The child unshares its table from this number up.
    pub fn end(&self) -> RawFd {
        self.end
    }

    /// Puts `fds` (at most [`SLOTS`]) on the kept numbers, in order; the guard gives their
    /// numbers and puts the placeholders back when dropped.
    pub fn place(&self, fds: &[RawFd]) -> io::Result<Placed<'_>> {
        if fds.len() > self.slots.len() {
            return Err(io::Error::other("more descriptors than kept slots"));
        }
        let mut placed = Placed {
            owner: self,
            numbers: [-1; SLOTS],
            count: 0,
        };
        for (fd, slot) in fds.iter().zip(&self.slots) {
            let number = slot.as_raw_fd();
            // SAFETY: dup3 onto a descriptor this thread owns: the kernel closes the
            // placeholder and installs a duplicate of `fd` in one step.
            if unsafe { libc::dup3(*fd, number, libc::O_CLOEXEC) } < 0 {
                return Err(io::Error::last_os_error());
            }
            placed.numbers[placed.count] = number;
            placed.count += 1;
        }
        Ok(placed)
    }
}

/// Descriptors put on a thread's kept numbers; dropping it puts the placeholders back.
#[derive(Debug)]
pub struct Placed<'a> {
    owner: &'a ChildFds,
    numbers: [RawFd; SLOTS],
    count: usize,
}

impl Placed<'_> {
    /// The number the `i`th placed descriptor has (in this table and the child's).
    pub fn number(&self, i: usize) -> RawFd {
        self.numbers[i]
    }
}

impl Drop for Placed<'_> {
    fn drop(&mut self) {
        for number in &self.numbers[..self.count] {
            // SAFETY: swaps the duplicate on a kept number back for the placeholder; the
            // number stays open, owned by the thread's ChildFds.
            unsafe { libc::dup3(self.owner.placeholder.as_raw_fd(), *number, libc::O_CLOEXEC) };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    /// Device and inode of what `fd` is open on.
    fn identity(fd: RawFd) -> (u64, u64) {
        let meta = std::fs::metadata(format!("/proc/self/fd/{fd}")).unwrap();
        (meta.dev(), meta.ino())
    }

    #[test]
    fn placed_descriptors_sit_below_the_end_and_the_placeholders_come_back() {
        let kept = ChildFds::open(SLOTS).unwrap();
        let (read, write) = nix::unistd::pipe().unwrap();
        let null = identity(kept.placeholder.as_raw_fd());
        {
            let placed = kept.place(&[read.as_raw_fd(), write.as_raw_fd()]).unwrap();
            for i in 0..2 {
                assert!(placed.number(i) < kept.end());
            }
            assert_eq!(identity(placed.number(0)), identity(read.as_raw_fd()));
            assert_eq!(identity(placed.number(1)), identity(write.as_raw_fd()));
        }
        for slot in &kept.slots {
            assert_eq!(
                identity(slot.as_raw_fd()),
                null,
                "a slot still holds a pipe"
            );
        }
        assert!(kept.place(&[0; SLOTS + 1]).is_err());
    }
}
