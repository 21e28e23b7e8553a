//! Why a tool process ended the way it did: which limit stopped it (memory, CPU time,
//! file size, the seccomp filter) or that the tool itself failed, from its exit status and
//! the tail of its stderr.
//!
//! The memory limit is RLIMIT_AS (`execution.memory_mb`, sandbox/limits.rs): an allocation
//! past it fails with ENOMEM instead of killing the process, so a tool that runs out of
//! memory does not die by a signal. It exits with its runtime's own words for that on
//! stderr (Python's `MemoryError`, glibc's "Cannot allocate memory", Rust's "memory
//! allocation of N bytes failed", Go's "runtime: out of memory", Node's "JavaScript heap
//! out of memory", C++'s `std::bad_alloc`), or catches it and reports it as its error.
//! [`memory_exhausted`] recognises those words wherever the tool says them.

use std::process::ExitStatus;
use std::sync::Mutex;

use crate::call_error::CallError;
use crate::sandbox::Sandbox;
use crate::stdio::output::StderrLog;

/// What runtimes say when an allocation fails (ENOMEM under the address-space limit).
const OUT_OF_MEMORY: [&str; 8] = [
    "MemoryError",
    "Cannot allocate memory",
    "out of memory",
    "Out of memory",
    "bad_alloc",
    "memory allocation of",
    "ENOMEM",
    "Fatal process out of memory",
];

/// Whether `text` (a tool's stderr or its reported error) says an allocation failed.
pub(crate) fn memory_exhausted(text: &str) -> bool {
    OUT_OF_MEMORY.iter().any(|m| text.contains(m))
}

/// Says why a process ended without a final answer.
pub(crate) fn exit_failure(
    status: Option<ExitStatus>,
    log: &Mutex<StderrLog>,
    memory_mb: u64,
    sandbox: &Sandbox,
    protocol: bool,
) -> CallError {
    use std::os::unix::process::ExitStatusExt;
    let stderr = log.lock().map(|l| l.tail()).unwrap_or_default();
    let tail = if stderr.trim().is_empty() {
        String::new()
    } else {
        format!("; stderr: {}", last_line(&stderr))
    };
    if stderr.contains("File too large") {
        return CallError::FileSize(sandbox.config().max_file_bytes);
    }
    if memory_exhausted(&stderr) {
        return CallError::Memory(memory_mb, tail);
    }
    match status.and_then(|s| s.signal()) {
        Some(libc::SIGXCPU) => CallError::Cpu,
        Some(libc::SIGXFSZ) => CallError::FileSize(sandbox.config().max_file_bytes),
        Some(libc::SIGSYS) => CallError::Forbidden(tail),
        Some(sig) => CallError::Tool(format!("killed by signal {sig}{tail}")),
        None => {
            let code = status.and_then(|s| s.code()).unwrap_or(-1);
            if protocol {
                CallError::Protocol(format!(
                    "exited with code {code} before its final answer{tail}"
                ))
            } else {
                CallError::Tool(format!("exited with code {code}{tail}"))
            }
        }
    }
}

pub(crate) fn last_line(s: &str) -> String {
    let line = s
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    line.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_exhaustion_is_recognised_in_each_runtime_s_words() {
        for said in [
            "Traceback (most recent call last):\n  File \"t.py\", line 1\nMemoryError",
            "head: cannot read: Cannot allocate memory",
            "memory allocation of 2147483648 bytes failed",
            "fatal error: runtime: out of memory",
            "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
            "terminate called after throwing an instance of 'std::bad_alloc'",
            "mmap failed: ENOMEM",
        ] {
            assert!(memory_exhausted(said), "{said}");
        }
        for said in [
            "ValueError: bad input",
            "permission denied",
            "memory is fine",
        ] {
            assert!(!memory_exhausted(said), "{said}");
        }
    }
}
