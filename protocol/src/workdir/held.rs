//! The last list of files of each context, as one side keeps it between calls: the core
//! by its store's version (a call whose context did not change reads no database), the
//! executor by the list's SHA-256 (a call may name the list by it alone). Bounded: at
//! most so many contexts and so many files in all, the longest unused going first.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::FileList;

/// Most contexts whose last list a side keeps (as many as an executor keeps folders).
pub const MAX_HELD_LISTS: usize = 64;

/// Most files in all the lists a side keeps; a longer list is kept by neither side, so it
/// always travels whole.
pub const MAX_HELD_FILES: usize = 1 << 20;

/// The last list of each context, at the version `V` it was kept at.
#[derive(Debug)]
pub struct HeldLists<V> {
    held: Mutex<HashMap<String, Held<V>>>,
    clock: AtomicU64,
    max_lists: usize,
    max_files: usize,
}

#[derive(Debug)]
struct Held<V> {
    version: V,
    files: Arc<FileList>,
    used: u64,
}

impl<V: PartialEq> Default for HeldLists<V> {
    /// At most [`MAX_HELD_LISTS`] lists of [`MAX_HELD_FILES`] files in all.
    fn default() -> Self {
        Self::new(MAX_HELD_LISTS, MAX_HELD_FILES)
    }
}

impl<V: PartialEq> HeldLists<V> {
    /// At most `max_lists` lists and `max_files` files in all of them.
    pub fn new(max_lists: usize, max_files: usize) -> Self {
        Self {
            held: Mutex::default(),
            clock: AtomicU64::new(0),
            max_lists,
            max_files,
        }
    }

    /// The list of `context` kept at `version`, if it is the one kept.
    pub fn get(&self, context: &str, version: &V) -> Option<Arc<FileList>> {
        let mut held = self.held.lock().ok()?;
        let listed = held.get_mut(context).filter(|l| l.version == *version)?;
        listed.used = self.clock.fetch_add(1, Ordering::Relaxed);
        Some(Arc::clone(&listed.files))
    }

    /// Keeps `files` as the list of `context` at `version` (in place of the one kept), and
    /// lets the longest unused go while over a bound. A list longer than the bound on
    /// files is not kept.
    pub fn put(&self, context: &str, version: V, files: Arc<FileList>) {
        let Ok(mut held) = self.held.lock() else {
            return;
        };
        if files.len() > self.max_files {
            held.remove(context);
            return;
        }
        let used = self.clock.fetch_add(1, Ordering::Relaxed);
        let listed = Held {
            version,
            files,
            used,
        };
        held.insert(context.to_string(), listed);
        loop {
            let in_all: usize = held.values().map(|l| l.files.len()).sum();
            if held.len() <= self.max_lists && in_all <= self.max_files {
                break;
            }
            let Some(oldest) = (held.iter())
                .min_by_key(|(_, l)| l.used)
                .map(|(c, _)| c.clone())
            else {
                break;
            };
            held.remove(&oldest);
        }
    }

    /// How many lists are kept.
    pub fn len(&self) -> usize {
        self.held.lock().map(|h| h.len()).unwrap_or(0)
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workdir::WorkFile;

    fn list(n: usize) -> Arc<FileList> {
        let file = |i: usize| WorkFile {
            path: format!("f{i}"),
            size: 1,
            sha256: "ab".repeat(32),
            executable: false,
        };
        Arc::new((0..n).map(file).collect())
    }

    /// A list is served at the version it was kept at and at no other; at most so many
    /// lists are kept, the longest unused going first.
    #[test]
    fn a_kept_list_is_served_only_at_its_version_and_within_the_bound() {
        let lists = HeldLists::new(4, 100);
        lists.put("c", 3, list(2));
        assert_eq!(lists.get("c", &3).map(|l| l.len()), Some(2));
        assert!(lists.get("c", &4).is_none(), "the list changed since");
        assert!(lists.get("other", &3).is_none());
        lists.put("c", 4, list(1));
        assert!(lists.get("c", &3).is_none(), "replaced");
        for i in 0..4 {
            lists.get("c", &4);
            lists.put(&format!("n{i}"), 1, list(1));
        }
        assert_eq!(lists.len(), 4);
        assert!(lists.get("c", &4).is_some(), "used most recently, kept");
        assert!(lists.get("n0", &1).is_none(), "the longest unused went");
    }

    /// The files of all lists together stay within their bound; a list over it alone is
    /// not kept, and the context's older list goes with it.
    #[test]
    fn the_files_of_all_lists_stay_within_their_bound() {
        let lists = HeldLists::new(64, 10);
        lists.put("a", 1, list(4));
        lists.put("b", 1, list(4));
        lists.get("a", &1);
        lists.put("c", 1, list(4));
        assert!(lists.get("b", &1).is_none(), "the longest unused went");
        assert!(lists.get("a", &1).is_some() && lists.get("c", &1).is_some());
        lists.put("a", 2, list(11));
        assert!(lists.get("a", &2).is_none() && lists.get("a", &1).is_none());
        assert_eq!(lists.len(), 1);
    }
}
