//! Why a tool process ended the way it did: which limit stopped it (memory, CPU time,
//! file size, the seccomp filter) or that the tool itself failed, from its exit status and
//! the tail of its stderr.
//!
//! The memory limit (`execution.memory_mb`) stops a tool in one of two ways. Under the
//! call's memory cgroup (sandbox/memcg.rs) the kernel's OOM killer kills a process past
//! it (SIGKILL), and the cgroup counts the kill: the call asks its guard
//! ([`crate::sandbox::CallGuard::oom_killed`]). Under rlimits (sandbox/limits.rs) an
//! allocation past it fails with ENOMEM instead, so the tool does not die by a signal: it
//! exits with its runtime's own words for that on stderr (Python's `MemoryError`, glibc's
//! "Cannot allocate memory", Rust's "memory allocation of N bytes failed", Go's "runtime:
//! out of memory", Node's "JavaScript heap out of memory" or V8's "Fatal process OOM",
//! the JVM's "insufficient memory", C++'s `std::bad_alloc`), or catches it and reports it
//! as its error. [`memory_exhausted`] recognises those words wherever the tool says them.
//! A runtime can also crash outright where an allocation failed (V8's `CHECK`s end in a
//! trap, SIGTRAP), saying nothing [`memory_exhausted`] knows: a crash by signal whose
//! peak resident set reached [`CRASH_AT_LIMIT`] of the limit is the limit too.

use std::process::ExitStatus;
use std::sync::Mutex;

use crate::call_error::CallError;
use crate::stdio::output::StderrLog;

/// What runtimes say when an allocation fails (ENOMEM under the rlimits).
const OUT_OF_MEMORY: [&str; 13] = [
    "MemoryError",
    "Cannot allocate memory",
    "out of memory",
    "Out of memory",
    "bad_alloc",
    "memory allocation of",
    "ENOMEM",
    "Fatal process out of memory",
    // V8: "Fatal process OOM in Failed to reserve virtual memory for CodeRange".
    "Fatal process OOM",
    // Node: a `Buffer` or `ArrayBuffer` whose memory `malloc` refused.
    "Array buffer allocation failed",
    // The JVM: "There is insufficient memory for the Java Runtime Environment to
    // continue", "Could not reserve enough space for ... object heap".
    "insufficient memory for the Java Runtime",
    "Could not reserve enough space",
    "java.lang.OutOfMemoryError",
];

/// What a program says when a write failed with EFBIG (past `RLIMIT_FSIZE`, for a
/// runtime that ignores SIGXFSZ).
pub(crate) const FILE_TOO_LARGE: &str = "File too large";

/// Whether `text` (a tool's stderr or its reported error) says an allocation failed.
pub(crate) fn memory_exhausted(text: &str) -> bool {
    OUT_OF_MEMORY.iter().any(|m| text.contains(m))
}

/// The line of `text` that says an allocation failed (V8 ends its report with a bare
/// `#`, the last line says nothing), else its last line.
pub(crate) fn memory_line(text: &str) -> String {
    let line = text.lines().find(|l| memory_exhausted(l));
    match line {
        Some(l) => l.trim_start_matches(['#', ' ']).chars().take(300).collect(),
        None => last_line(text),
    }
}

/// The share of the memory limit (numerator, denominator) a process that crashed by a
/// signal must have had resident at its peak for its crash to be blamed on the limit:
/// Node 20 allocating past 256 MiB under the rlimits dies with 248 MiB resident (97 %);
/// a program crashing for another reason with that much in use is rarely that close.
pub(crate) const CRASH_AT_LIMIT: (u64, u64) = (3, 4);

/// Signals a runtime raises on itself when it gives up (abort, a failed check's trap) or
/// that a failed allocation's null pointer brings.
const CRASH_SIGNALS: [i32; 5] = [
    libc::SIGTRAP,
    libc::SIGABRT,
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
];

/// The limits a call's end is judged against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallLimits {
    /// `execution.memory_mb` (or the session's).
    pub memory_mb: u64,
    /// The largest file, in MiB.
    pub max_file_mb: u64,
}

/// Says why a process ended without a final answer. `peak_rss_bytes`: the largest
/// resident set it had ([`crate::sandbox::SandboxChild::peak_rss_bytes`]).
pub(crate) fn exit_failure(
    status: Option<ExitStatus>,
    peak_rss_bytes: Option<u64>,
    log: &Mutex<StderrLog>,
    limits: CallLimits,
    protocol: bool,
) -> CallError {
    use std::os::unix::process::ExitStatusExt;
    let (head, stderr) = log.lock().map(|l| (l.head(), l.tail())).unwrap_or_default();
    let tail = if stderr.trim().is_empty() {
        String::new()
    } else {
        format!("; stderr: {}", last_line(&stderr))
    };
    if stderr.contains(FILE_TOO_LARGE) {
        return CallError::FileSize(limits.max_file_mb);
    }
    // The head too: a runtime's words can come before a trace longer than the tail.
    for said in [&stderr, &head] {
        if memory_exhausted(said) {
            return CallError::Memory(limits.memory_mb, format!("; stderr: {}", memory_line(said)));
        }
    }
    let signal = status.and_then(|s| s.signal());
    if let (Some(sig), Some(peak)) = (signal, peak_rss_bytes) {
        let limit = limits.memory_mb.saturating_mul(1024 * 1024);
        let (num, den) = CRASH_AT_LIMIT;
        if CRASH_SIGNALS.contains(&sig) && peak.saturating_mul(den) >= limit.saturating_mul(num) {
            return CallError::Memory(
                limits.memory_mb,
                format!(
                    "; it crashed (signal {sig}) with {} MiB resident{tail}",
                    peak / (1024 * 1024)
                ),
            );
        }
    }
    match signal {
        Some(libc::SIGXCPU) => CallError::Cpu,
        Some(libc::SIGXFSZ) => CallError::FileSize(limits.max_file_mb),
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
    fn v8_out_of_memory_is_recognised_when_its_trace_pushed_it_out_of_the_tail() {
        use std::os::unix::process::ExitStatusExt;
        use std::sync::Arc;
        // What Node 18 printed in the container: the words first, then a native stack
        // trace longer than the kept tail, then SIGTRAP.
        let mut stderr = String::from(
            "\n<--- Last few GCs --->\n\n#\n# Fatal process out of memory: Zone\n#\n\
             ==== C stack trace ===============================\n\n",
        );
        for i in 0..400 {
            stderr.push_str(&format!(
                "  {i}: 0x7fd442f23a79  [/lib/x86_64-linux-gnu/libnode.so.108]\n"
            ));
        }
        let log = Arc::new(Mutex::new(StderrLog::default()));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(crate::stdio::output::drain_stderr(
            stderr.as_bytes(),
            crate::stdio::output::Budget::new(u64::MAX),
            Arc::clone(&log),
        ));
        assert!(!log.lock().unwrap().tail().contains("out of memory"));
        let limits = CallLimits {
            memory_mb: 256,
            max_file_mb: 1024,
        };
        let status = ExitStatus::from_raw(libc::SIGTRAP);
        match exit_failure(Some(status), None, &log, limits, false) {
            CallError::Memory(256, said) => assert!(said.contains("Fatal process out of memory")),
            other => panic!("not the memory limit: {other:?}"),
        }
    }

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
            "#\n# Fatal process OOM in Failed to reserve virtual memory for CodeRange\n#",
            "There is insufficient memory for the Java Runtime Environment to continue.",
            "Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space",
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

    #[test]
    fn the_memory_line_is_the_one_that_says_so_not_v8_s_closing_hash() {
        let v8 = "\n#\n# Fatal process OOM in Failed to reserve virtual memory for CodeRange\n#\n";
        assert_eq!(
            memory_line(v8),
            "Fatal process OOM in Failed to reserve virtual memory for CodeRange"
        );
        assert_eq!(memory_line("a\nlast"), "last");
    }
}
