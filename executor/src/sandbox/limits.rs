//! Resource limits of a tool process (setrlimit), applied in the child before exec.

use nix::sys::resource::{setrlimit, Resource};

/// Default cap on processes (and threads) of one call's user.
pub const DEFAULT_MAX_PROCESSES: u64 = 64;
/// Default cap on the size of any file a tool writes.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Default cap on open file descriptors.
pub const DEFAULT_MAX_OPEN_FILES: u64 = 256;

/// The rlimits of one call. Every field is both the soft and the hard limit, so the tool
/// cannot raise it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// RLIMIT_AS, from `memory_mb`.
    pub address_space_bytes: u64,
    /// RLIMIT_CPU, from the call's timeout.
    pub cpu_seconds: u64,
    /// RLIMIT_NPROC.
    pub max_processes: u64,
    /// RLIMIT_FSIZE.
    pub max_file_bytes: u64,
    /// RLIMIT_NOFILE.
    pub max_open_files: u64,
}

impl Limits {
    /// Limits for a call with this memory budget and wall-clock timeout.
    pub fn for_call(
        memory_mb: u64,
        timeout_ms: u64,
        max_processes: u64,
        max_file_bytes: u64,
    ) -> Self {
        Self {
            address_space_bytes: memory_mb.saturating_mul(1024 * 1024),
            cpu_seconds: timeout_ms.div_ceil(1000) + 1,
            max_processes,
            max_file_bytes,
            max_open_files: DEFAULT_MAX_OPEN_FILES,
        }
    }

    /// Applies the limits to the calling process. Async-signal-safe (setrlimit only).
    pub fn apply(&self) -> nix::Result<()> {
        let set = |r, v| setrlimit(r, v, v);
        set(Resource::RLIMIT_CORE, 0)?;
        set(Resource::RLIMIT_AS, self.address_space_bytes)?;
        set(Resource::RLIMIT_CPU, self.cpu_seconds)?;
        set(Resource::RLIMIT_NPROC, self.max_processes)?;
        set(Resource::RLIMIT_FSIZE, self.max_file_bytes)?;
        set(Resource::RLIMIT_NOFILE, self.max_open_files)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_call_rounds_cpu_up_and_converts_memory() {
        let l = Limits::for_call(256, 1500, 10, 1);
        assert_eq!(l.address_space_bytes, 256 * 1024 * 1024);
        assert_eq!(l.cpu_seconds, 3);
    }
}
