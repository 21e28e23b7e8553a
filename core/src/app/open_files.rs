//! The core's open-file limit: raised at start to what the system allows, so the gateway
//! can hold thousands of idle connections; the default `[gateway] max_connections` is a
//! share of it ([`crate::state::config::GatewayConfig::max_connections_for`]).

use nix::sys::resource::{getrlimit, setrlimit, Resource};

use crate::state::config::gateway::FALLBACK_FD_LIMIT;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; the soft limit in force after.
/// A limit that cannot be read or raised is logged and the one in force is kept (the
/// gateway then holds fewer connections, it still starts). Children (the executor of
/// `up`) inherit it; the executor sets each tool call's own limit.
pub fn raise_open_files_limit() -> u64 {
    let (soft, hard) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(limits) => limits,
        Err(e) => {
            tracing::warn!(error = %e, assumed = FALLBACK_FD_LIMIT, "cannot read the open-file limit");
            return FALLBACK_FD_LIMIT;
        }
    };
    if soft >= hard {
        return soft;
    }
    match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        Ok(()) => {
            tracing::debug!(from = soft, to = hard, "open-file limit raised");
            hard
        }
        Err(e) => {
            tracing::warn!(error = %e, soft, hard, "cannot raise the open-file limit; the gateway's default connection cap stays a share of the soft limit");
            soft
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_files_limit_is_raised_to_the_hard_limit() {
        let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        assert_eq!(raise_open_files_limit(), hard);
        assert_eq!(getrlimit(Resource::RLIMIT_NOFILE).unwrap(), (hard, hard));
    }
}
