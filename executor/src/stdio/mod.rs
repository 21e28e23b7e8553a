//! The stdio protocols between the executor and a tool process (docs/skill-format.md).

pub mod jsonrpc;
pub mod output;

/// How a conversation with a tool failed (the process's exit tells the rest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdioFailure {
    /// A line on stdout broke the protocol.
    Protocol(String),
    /// stdout closed before the final answer.
    Eof,
    /// stdout + stderr exceeded `max_output_bytes`.
    OutputLimit,
}
