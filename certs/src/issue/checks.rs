//! Checks of what an operator asks to issue: validity days, names, publisher names.

use super::{IssueError, MAX_DAYS};

pub(super) fn check_days(days: u32) -> Result<(), IssueError> {
    if days == 0 || days > MAX_DAYS {
        return Err(IssueError::InvalidDays { days });
    }
    Ok(())
}

pub(super) fn check_name(what: &'static str, value: &str) -> Result<(), IssueError> {
    let reason = if value.trim().is_empty() {
        "empty"
    } else if value.len() > 64 {
        "longer than 64 bytes"
    } else if value.chars().any(char::is_control) {
        "holding a control character"
    } else {
        return Ok(());
    };
    Err(IssueError::InvalidName {
        what,
        value: value.to_string(),
        reason,
    })
}

/// Publisher names become file names: ASCII letters, digits, `.`, `_`, `-`, not starting
/// with `.` or `-`, at most 64 bytes.
pub(super) fn check_publisher(publisher: &str) -> Result<(), IssueError> {
    check_name("publisher", publisher)?;
    let ok_chars = publisher
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !ok_chars || publisher.starts_with('.') || publisher.starts_with('-') {
        return Err(IssueError::InvalidName {
            what: "publisher",
            value: publisher.to_string(),
            reason: "not made of ASCII letters, digits, '.', '_' and '-' (not leading '.' or '-')",
        });
    }
    Ok(())
}
