//! Random ids and capability tokens from the operating system. A failed draw is an error,
//! never a buffer of zeros: a token of zeros would be the same, guessable token for every
//! call, and an id of zeros would collide.

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

/// `n` random bytes as lowercase hex, for ids; `what` names the id in the error.
pub fn hex(source: &dyn RandomSource, n: usize, what: &'static str) -> Result<String, RandomError> {
    let mut bytes = vec![0u8; n];
    source
        .fill(&mut bytes)
        .map_err(|Unspecified| RandomError { what })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
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
