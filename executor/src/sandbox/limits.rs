//! Resource limits of a tool process (setrlimit), applied in the child before exec.
//!
//! Memory: where the call has a memory cgroup ([`super::memcg`]) the cgroup limits it and
//! no memory rlimit is set. Without one, `RLIMIT_DATA` is the limit (private writable
//! memory: what `malloc`, a heap or a stack can use; not an address range reserved with
//! no access) and `RLIMIT_AS` is that plus [`RUNTIME_RESERVE_MB`], room for the ranges V8,
//! the JVM and Go reserve at start and for shared mappings.

use nix::sys::resource::{setrlimit, Resource, RLIM_INFINITY};

/// Default cap on processes (and threads: RLIMIT_NPROC counts tasks) of one call's user.
/// Headless Chromium runs about 60 threads idle and more under load (it failed to load
/// pages, or hung, under 64 when three ran at once); the JVM's GC and compiler threads grow
/// with the machine's cores. A fork flood still stops here, and the memory limit below it.
pub const DEFAULT_MAX_PROCESSES: u64 = 256;
/// Default cap on the size of any file a skill's program writes (`execution.max_file_mb`).
pub const DEFAULT_MAX_FILE_MB: u64 = skillbox_protocol::skill::DEFAULT_MAX_FILE_MB;
/// Cap on the size of any file a dependency build writes: a wheel and what it unpacks
/// (the largest wheels, CUDA builds of ML frameworks, pass 2 GiB).
pub const DEPS_MAX_FILE_MB: u64 = 4096;
/// Default cap on open file descriptors.
pub const DEFAULT_MAX_OPEN_FILES: u64 = 256;
/// Address space beyond the memory limit when rlimits limit memory: V8 reserves its code
/// range and heap, the JVM its heap (sized from the address-space limit), class space and
/// code cache, Go its arenas' index, gigabytes they never touch (measured: the JVM 17
/// needs about 3.5 GiB on a 24 GiB machine, Node 20 and Go 1.19 less than 1 GiB), and V8
/// about 10 GiB for each WebAssembly memory (its guard region): Node's `fetch` parses HTTP
/// with one, and failed under 8 GiB ("fetch failed", measured with Node 18 and 20), and
/// headless Chromium its allocator's pools and V8's sandbox cage: it trapped at start
/// under 34 and 66 GiB and started every time from 130 GiB (Chromium 156). Not a bound on
/// memory in use: `RLIMIT_DATA` limits that, and shared mappings, which only this one
/// counts, were never bounded by it on a machine with less memory than the reserve.
pub const RUNTIME_RESERVE_MB: u64 = 256 * 1024;

const MIB: u64 = 1024 * 1024;

/// The rlimits of one call. Every field is both the soft and the hard limit, so the tool
/// cannot raise it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// RLIMIT_AS: `memory_mb` + [`RUNTIME_RESERVE_MB`], unlimited under a cgroup.
    pub address_space_bytes: u64,
    /// RLIMIT_DATA: `memory_mb`, unlimited under a cgroup.
    pub data_bytes: u64,
    /// RLIMIT_CPU, from the call's timeout.
    pub cpu_seconds: u64,
    /// RLIMIT_NPROC.
    pub max_processes: u64,
    /// RLIMIT_FSIZE.
    pub max_file_bytes: u64,
    /// RLIMIT_NOFILE.
    pub max_open_files: u64,
}

/// How a call's memory is limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryLimit {
    /// By the call's memory cgroup: no memory rlimit.
    Cgroup,
    /// By rlimits, at this many MiB.
    Rlimit(u64),
}

impl Limits {
    /// Limits for a call with this memory limit, wall-clock timeout and file-size cap.
    pub fn for_call(
        memory: MemoryLimit,
        timeout_ms: u64,
        max_processes: u64,
        max_file_mb: u64,
    ) -> Self {
        let (address_space_bytes, data_bytes) = match memory {
            MemoryLimit::Cgroup => (RLIM_INFINITY, RLIM_INFINITY),
            MemoryLimit::Rlimit(mb) => (
                mb.saturating_add(RUNTIME_RESERVE_MB).saturating_mul(MIB),
                mb.saturating_mul(MIB),
            ),
        };
        Self {
            address_space_bytes,
            data_bytes,
            cpu_seconds: timeout_ms.div_ceil(1000) + 1,
            max_processes,
            max_file_bytes: max_file_mb.saturating_mul(MIB),
            max_open_files: DEFAULT_MAX_OPEN_FILES,
        }
    }

    /// Applies the limits to the calling process. Async-signal-safe (setrlimit only).
    pub fn apply(&self) -> nix::Result<()> {
        let set = |r, v| setrlimit(r, v, v);
        set(Resource::RLIMIT_CORE, 0)?;
        set(Resource::RLIMIT_AS, self.address_space_bytes)?;
        set(Resource::RLIMIT_DATA, self.data_bytes)?;
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
        let l = Limits::for_call(MemoryLimit::Rlimit(256), 1500, 10, 1);
        assert_eq!(l.data_bytes, 256 * MIB);
        assert_eq!(l.address_space_bytes, (256 + RUNTIME_RESERVE_MB) * MIB);
        assert_eq!(l.cpu_seconds, 3);
        assert_eq!(l.max_file_bytes, MIB);
    }

    #[test]
    fn a_cgroup_leaves_no_memory_rlimit() {
        let l = Limits::for_call(MemoryLimit::Cgroup, 1000, 10, 1024);
        assert_eq!(
            (l.address_space_bytes, l.data_bytes),
            (RLIM_INFINITY, RLIM_INFINITY)
        );
    }
}
