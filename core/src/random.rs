//! Random ids and capability tokens from the operating system. A failed draw is an error,
//! never a buffer of zeros: a token of zeros would be the same, guessable token for every
//! call, and an id of zeros would collide. A call draws several (its id, a session's id,
//! its capability token, its secrets' placeholders): [`BufferedSource`] reads the
//! operating system's bytes a page at a time and hands each out once, so a call makes no
//! `getrandom(2)` of its own.

use std::sync::{Mutex, PoisonError};

use base64::Engine;
use ring::error::Unspecified;
use ring::rand::{SecureRandom, SystemRandom};

/// The operating system's random source could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the operating system's random source failed, so no {what} could be made and nothing \
     was started; check the host's /dev/urandom or getrandom(2) (a seccomp profile may block it)"
)]
pub struct RandomError {
    /// What was being drawn (`call id`, `capability token`, ...).
    pub what: &'static str,
}

/// Where random bytes come from: the operating system, or a fake in tests.
pub trait RandomSource: Send + Sync + std::fmt::Debug {
    /// Fills `dest` entirely, or fails without a partial answer being used.
    fn fill(&self, dest: &mut [u8]) -> Result<(), Unspecified>;
}

/// The operating system's source (`getrandom(2)`), through ring.
#[derive(Debug, Clone)]
pub struct SystemSource(SystemRandom);

impl Default for SystemSource {
    fn default() -> Self {
        Self(SystemRandom::new())
    }
}

impl RandomSource for SystemSource {
    fn fill(&self, dest: &mut [u8]) -> Result<(), Unspecified> {
        self.0.fill(dest)
    }
}

/// Bytes read from the operating system at once by [`BufferedSource`].
const POOL_BYTES: usize = 4096;

/// A draw this large or larger goes to the source underneath directly.
const DIRECT_BYTES: usize = POOL_BYTES / 4;

/// A source's bytes read [`POOL_BYTES`] at a time and handed out in order, each once (and
/// zeroed in the pool as it goes): the bytes are the operating system's, only the number
/// of system calls changes. A failed read hands out nothing of it.
pub struct BufferedSource<S: RandomSource = SystemSource> {
    source: S,
    pool: Mutex<Pool>,
}

struct Pool {
    bytes: Box<[u8; POOL_BYTES]>,
    /// Bytes of `bytes` handed out (or never filled): the next draw starts here.
    used: usize,
}

impl<S: RandomSource + Default> Default for BufferedSource<S> {
    fn default() -> Self {
        Self::over(S::default())
    }
}

impl<S: RandomSource> BufferedSource<S> {
    /// Bytes of `source`, read a pool at a time.
    pub fn over(source: S) -> Self {
        Self {
            source,
            pool: Mutex::new(Pool {
                bytes: Box::new([0; POOL_BYTES]),
                used: POOL_BYTES,
            }),
        }
    }
}

impl<S: RandomSource> std::fmt::Debug for BufferedSource<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the pool's bytes: they are the next ids and tokens.
        f.debug_struct("BufferedSource")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl<S: RandomSource> RandomSource for BufferedSource<S> {
    fn fill(&self, dest: &mut [u8]) -> Result<(), Unspecified> {
        if dest.len() >= DIRECT_BYTES {
            return self.source.fill(dest);
        }
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        if POOL_BYTES - pool.used < dest.len() {
            // Marked used until the read succeeds: a failed read leaves nothing to hand out.
            pool.used = POOL_BYTES;
            self.source.fill(&mut pool.bytes[..])?;
            pool.used = 0;
        }
        let start = pool.used;
        let taken = &mut pool.bytes[start..start + dest.len()];
        dest.copy_from_slice(taken);
        taken.fill(0);
        pool.used += dest.len();
        Ok(())
    }
}

/// `n` random bytes as lowercase hex, for ids; `what` names the id in the error.
pub fn hex(source: &dyn RandomSource, n: usize, what: &'static str) -> Result<String, RandomError> {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut bytes = vec![0u8; n];
    source
        .fill(&mut bytes)
        .map_err(|Unspecified| RandomError { what })?;
    let mut out = String::with_capacity(2 * n);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    Ok(out)
}

/// A new route id (`rt_` and 16 hex digits): a routing plan's, or a delegation's record.
pub fn route_id(source: &dyn RandomSource) -> Result<String, RandomError> {
    hex(source, 8, "route id").map(|hex| format!("rt_{hex}"))
}

/// A 256-bit token, base64url without padding; `what` names it in the error.
pub fn token(source: &dyn RandomSource, what: &'static str) -> Result<String, RandomError> {
    let mut bytes = [0u8; 32];
    source
        .fill(&mut bytes)
        .map_err(|Unspecified| RandomError { what })?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// Test sources: one that always fails, one that fails after some draws.
#[cfg(test)]
pub(crate) mod fake {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use ring::error::Unspecified;

    use super::RandomSource;

    /// Succeeds `ok` times (with the system source), then fails every draw.
    #[derive(Debug)]
    pub(crate) struct FailingAfter {
        left: AtomicUsize,
    }

    impl FailingAfter {
        pub(crate) fn new(ok: usize) -> Self {
            Self {
                left: AtomicUsize::new(ok),
            }
        }
    }

    impl RandomSource for FailingAfter {
        fn fill(&self, dest: &mut [u8]) -> Result<(), Unspecified> {
            let took = self
                .left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            match took {
                Ok(_) => super::SystemSource::default().fill(dest),
                Err(_) => Err(Unspecified),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FailingAfter;
    use super::*;

    #[test]
    fn token_fails_instead_of_zeros_when_the_source_fails() {
        let err = token(&FailingAfter::new(0), "capability token").unwrap_err();
        assert_eq!(err.what, "capability token");
        let message = err.to_string();
        assert!(message.contains("random source failed"), "{message}");
        assert!(
            message.contains("no capability token could be made"),
            "{message}"
        );
    }

    #[test]
    fn hex_id_fails_instead_of_zeros_when_the_source_fails() {
        let err = hex(&FailingAfter::new(0), 12, "call id").unwrap_err();
        assert!(
            err.to_string().contains("no call id could be made"),
            "{err}"
        );
    }

    #[test]
    fn buffered_draws_are_each_handed_out_once_across_refills() {
        let source = BufferedSource::<SystemSource>::default();
        let mut seen = std::collections::HashSet::new();
        // Over three pools' worth, in draws that do not divide the pool evenly.
        for _ in 0..(3 * POOL_BYTES / 24) {
            let mut draw = [0u8; 24];
            source.fill(&mut draw).unwrap();
            assert!(seen.insert(draw), "a draw came out twice");
        }
        let mut large = vec![0u8; DIRECT_BYTES];
        source.fill(&mut large).unwrap();
        assert!(large.iter().any(|b| *b != 0));
    }

    #[test]
    fn a_buffered_source_fails_instead_of_handing_out_zeros_when_its_refill_fails() {
        // The first pool is read; every read after fails.
        let source = BufferedSource::over(FailingAfter::new(1));
        let mut handed = 0;
        let err = loop {
            match token(&source, "capability token") {
                Ok(t) => {
                    assert_ne!(t, token_of_zeros());
                    handed += 1;
                }
                Err(e) => break e,
            }
        };
        assert_eq!(handed, POOL_BYTES / 32, "the pool is used up, then refused");
        assert_eq!(err.what, "capability token");
        assert!(hex(&source, 6, "call id").is_err(), "and stays refused");
    }

    fn token_of_zeros() -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([0u8; 32])
    }

    #[test]
    fn hex_digits_are_the_bytes_in_order() {
        #[derive(Debug)]
        struct Counting;
        impl RandomSource for Counting {
            fn fill(&self, dest: &mut [u8]) -> Result<(), Unspecified> {
                for (i, b) in dest.iter_mut().enumerate() {
                    *b = [0x00, 0x0f, 0xa5, 0xff][i % 4];
                }
                Ok(())
            }
        }
        assert_eq!(hex(&Counting, 4, "id").unwrap(), "000fa5ff");
    }

    #[test]
    fn ids_and_tokens_are_random_when_the_source_works() {
        let source = SystemSource::default();
        let a = token(&source, "t").unwrap();
        let b = token(&source, "t").unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        let id = hex(&source, 12, "id").unwrap();
        assert_eq!(id.len(), 24);
        assert_ne!(id, "0".repeat(24));
    }
}
