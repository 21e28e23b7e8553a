//! The `[docker] max_containers` slots of per-call containers, each with a range of user
//! ids of its own.
//!
//! The executor in a per-call container runs its tool under a per-call user id, and lock
//! files in the container's own `/run` are all it coordinates that id through. User ids
//! are the kernel's, not the container's: an executor in the host's PID namespace (`skillbox
//! up` as root) kills every process of an id it takes, containers' included, and processes
//! of one id share its process limit wherever they run. So each container runs with
//! `--uid-base` at its slot's range: above the host's default (2,000,000) and the compose
//! executor's (3,000,000), and never the same for two containers at once.

use std::sync::{Arc, Mutex};

/// First user id of the per-call containers' ranges.
pub const CONTAINER_UID_BASE: u32 = 3_600_000;
/// User ids in each slot's range: the whole pool of `skillbox-executor exec` (its default
/// of 16 calls and 16 prestarted), of which a container's one call takes the first.
pub const IDS_PER_CONTAINER: u32 = 32;

// Clear of the compose executor's ids (3,000,000 and its pool of 32), and 1,024 slots, the
// most the config allows, stay far below the largest user id.
const _: () = assert!(CONTAINER_UID_BASE > 3_000_000 + IDS_PER_CONTAINER);
const _: () = assert!(CONTAINER_UID_BASE
    .checked_add(1_024 * IDS_PER_CONTAINER)
    .is_some());

/// The free slots (at most `[docker] max_containers`, 1,024 by the config check).
#[derive(Debug)]
pub struct Slots {
    free: Mutex<Vec<u32>>,
}

/// One slot, held while its container runs; given back on drop.
#[derive(Debug)]
pub struct Slot {
    index: u32,
    slots: Arc<Slots>,
}

impl Slots {
    /// `count` slots, numbered from 0.
    pub fn new(count: usize) -> Arc<Self> {
        let count = u32::try_from(count).unwrap_or(u32::MAX);
        Arc::new(Self {
            free: Mutex::new((0..count).collect()),
        })
    }

    /// The lowest free slot (a quiet core keeps using the same few ids), `None` when
    /// every slot is held.
    pub fn take(self: &Arc<Self>) -> Option<Slot> {
        let mut free = self.free.lock().ok()?;
        let lowest = (free.iter().enumerate())
            .min_by_key(|(_, index)| **index)
            .map(|(at, _)| at)?;
        let index = free.swap_remove(lowest);
        drop(free);
        Some(Slot {
            index,
            slots: Arc::clone(self),
        })
    }
}

impl Slot {
    /// The first user id of this slot's range: `--uid-base` of its container's executor.
    pub fn uid_base(&self) -> u32 {
        CONTAINER_UID_BASE + self.index * IDS_PER_CONTAINER
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut free) = self.slots.free.lock() {
            free.push(self.index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_held_at_once_have_ranges_apart_and_the_lowest_free_is_taken() {
        let slots = Slots::new(3);
        let mut held: Vec<Slot> = (0..3).map(|_| slots.take().unwrap()).collect();
        assert!(
            slots.take().is_none(),
            "a fourth slot beyond max_containers"
        );
        let bases: Vec<u32> = held.iter().map(Slot::uid_base).collect();
        assert_eq!(bases, [3_600_000, 3_600_032, 3_600_064]);
        // The middle one freed is the one taken next; then, all freed, the first.
        drop(held.remove(1));
        let again = slots.take().unwrap();
        assert_eq!(again.uid_base(), 3_600_032);
        drop((held, again));
        assert_eq!(slots.take().unwrap().uid_base(), 3_600_000);
    }
}
