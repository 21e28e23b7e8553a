//! Skill vectors by the SHA-256 of the text they were embedded from, process-wide and
//! bounded, so that rebuilding the router after a reload embeds only the skills whose
//! text changed (a body costs the encoder tens of milliseconds).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

use ring::digest::{digest, SHA256};

use super::{SkillText, DIMS};

/// Skill vectors kept (512 bytes each): a catalogue of 16,384 skills reloads without
/// re-embedding; past that the oldest entries go first.
const CAPACITY: usize = 16_384;

/// A skill's quantised unit vector.
pub type Vector = Arc<[i8; DIMS]>;

#[derive(Default)]
struct Cache {
    vectors: HashMap<[u8; 32], Vector>,
    /// Keys, oldest first.
    order: VecDeque<[u8; 32]>,
}

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

/// The digest a skill text is cached under (head and body, length-prefixed).
pub fn key(text: SkillText<'_>) -> [u8; 32] {
    let mut bytes = Vec::with_capacity(text.head.len() + text.body.len() + 8);
    bytes.extend_from_slice(&(text.head.len() as u64).to_le_bytes());
    bytes.extend_from_slice(text.head.as_bytes());
    bytes.extend_from_slice(text.body.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(digest(&SHA256, &bytes).as_ref());
    out
}

pub fn get(key: &[u8; 32]) -> Option<Vector> {
    let c = cache()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    c.vectors.get(key).cloned()
}

pub fn put(key: [u8; 32], v: Vector) {
    let mut c = cache()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if c.vectors.insert(key, v).is_none() {
        c.order.push_back(key);
    }
    while c.order.len() > CAPACITY {
        if let Some(old) = c.order.pop_front() {
            c.vectors.remove(&old);
        }
    }
}
