//! Why a tool call failed ([`CallError`]), with the data to say so, and its one mapping
//! to the contract's `error_kind` ([`CallError::kind`]). Its own module so that what
//! reports a failure (`exit_cause`, `script`) needs nothing of the call's run.

use skillbox_protocol::result::ErrorKind;

use crate::launch::LaunchError;
use crate::sandbox::SandboxError;
use crate::workdir::WorkDirError;

/// Why a call failed; mapped to `error_kind` in [`CallError::kind`] only.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No such skill or tool.
    #[error("{0}")]
    NotFound(String),
    /// The skill is installed but its files no longer match the digest it was installed
    /// with: refused, as the core refuses a skill its trust policy disabled.
    #[error("skill refused: {0}")]
    Changed(String),
    /// The install lock cannot be read, so no skill loads.
    #[error("skill refused: {0}")]
    LockUnreadable(String),
    /// Arguments do not match the schema.
    #[error("arguments do not match the tool's schema: {0}")]
    InvalidArgs(String),
    /// The sandbox could not be prepared or applied.
    #[error("sandbox: {0}")]
    Sandbox(String),
    /// The executor is at its concurrency limit.
    #[error("{0}")]
    Busy(String),
    /// The executor cannot run this call at all (a network call without network
    /// namespaces): another executor may.
    #[error("{0}")]
    Unavailable(String),
    /// Wall-clock limit.
    #[error("timed out after {0} ms (the tool's timeout_ms)")]
    Timeout(u64),
    /// Output limit.
    #[error("output exceeded max_output_bytes ({0} bytes); the call was stopped")]
    Output(u64),
    /// Memory limit (MiB, and what the tool or the kernel said).
    #[error("memory limit of {0} MiB reached (memory_mb: raise execution.memory_mb in the skill's manifest){1}")]
    Memory(u64, String),
    /// CPU-time limit (SIGXCPU).
    #[error("CPU time limit reached (killed by SIGXCPU)")]
    Cpu,
    /// File-size limit (SIGXFSZ or EFBIG), in MiB.
    #[error("file size limit of {0} MiB reached (RLIMIT_FSIZE: raise execution.max_file_mb in the skill's manifest, or the operator's [grants.<skill>] max_file_mb)")]
    FileSize(u64),
    /// The seccomp filter killed the process (SIGSYS).
    #[error("a forbidden system call was made (killed by SIGSYS){0}")]
    Forbidden(String),
    /// The tool failed.
    #[error("{0}")]
    Tool(String),
    /// The tool broke the stdio protocol.
    #[error("{0}")]
    Protocol(String),
    /// The context's files could not be laid out before the call.
    #[error("{0}")]
    Layout(#[from] WorkDirError),
    /// What the call left in its context's folder was not all kept.
    #[error("{1}")]
    Files(ErrorKind, String),
}

impl CallError {
    /// The contract's `error_kind` of this failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            CallError::NotFound(_) => ErrorKind::NotFound,
            // Not `not_found` (the skill is there) nor `sandbox` (nothing is wrong with the
            // sandbox): running it is refused by the install's integrity check, the same
            // kind the core gives a skill its trust policy disabled.
            CallError::Changed(_) => ErrorKind::PermissionDenied,
            CallError::LockUnreadable(_) => ErrorKind::Unavailable,
            CallError::InvalidArgs(_) => ErrorKind::InvalidArgs,
            CallError::Sandbox(_) | CallError::Forbidden(_) => ErrorKind::Sandbox,
            CallError::Busy(_) | CallError::Unavailable(_) => ErrorKind::Unavailable,
            CallError::Timeout(_) => ErrorKind::Timeout,
            CallError::Output(_)
            | CallError::Memory(..)
            | CallError::Cpu
            | CallError::FileSize(_) => ErrorKind::ResourceLimit,
            CallError::Tool(_) => ErrorKind::ToolError,
            CallError::Protocol(_) => ErrorKind::Protocol,
            CallError::Layout(e) => e.kind(),
            CallError::Files(kind, _) => *kind,
        }
    }
}

impl From<LaunchError> for CallError {
    fn from(e: LaunchError) -> Self {
        match e {
            LaunchError::Sandbox(e) => e.into(),
            LaunchError::Layout(e) => CallError::Layout(e),
            LaunchError::NoNamespace(_) => CallError::Unavailable(e.to_string()),
            LaunchError::Spawn(e) => {
                CallError::Sandbox(format!("the tool could not start in the sandbox: {e}"))
            }
            other => CallError::Sandbox(other.to_string()),
        }
    }
}

impl From<SandboxError> for CallError {
    fn from(e: SandboxError) -> Self {
        match e {
            SandboxError::Busy(_) => CallError::Busy(e.to_string()),
            SandboxError::NoNetworkNamespaces
            | SandboxError::UnixSocketsWithoutNamespace
            | SandboxError::MountNamespace(_) => CallError::Unavailable(e.to_string()),
            SandboxError::ProgramNotFound { .. } => CallError::NotFound(e.to_string()),
            _ => CallError::Sandbox(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_namespaces_says_what_to_change_and_what_programs_then_get() {
        let e = CallError::from(SandboxError::NoNetworkNamespaces);
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        let m = e.to_string();
        assert!(m.contains("cannot create network namespaces"), "{m}");
        assert!(m.contains("CAP_SYS_ADMIN"), "{m}");
        assert!(m.contains("get no network of their own"), "{m}");
    }
}
