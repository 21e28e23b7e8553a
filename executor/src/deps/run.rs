//! One installer of a build (pip or npm) run through the one launch: its output read
//! into a log whose tail is kept, its network carried to the core's egress proxy while it
//! runs, its wall-clock limit enforced; on success what it made is taken out of its
//! scratch folder before the folder is removed.

use std::path::Path;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::DepsError;
use crate::broker::CapabilityBroker;
use crate::launch::{self, Launched, Plan};
use crate::sandbox::Sandbox;

/// The installer's output kept for the answer.
pub(super) const LOG_TAIL_BYTES: usize = 8 * 1024;

/// Runs the installer `plan` (named `installer` in errors) for at most `timeout_ms`;
/// when it succeeds, `take` gets its scratch folder before the folder is removed. What
/// `take` made, and the last lines of the installer's output.
pub(super) async fn installer<B, T>(
    sandbox: &Sandbox,
    broker: &B,
    plan: Plan,
    installer: &'static str,
    take: impl FnOnce(&Path) -> Result<T, DepsError>,
) -> Result<(T, String), DepsError>
where
    B: CapabilityBroker,
{
    let call = plan.call.clone();
    let timeout_ms = plan.timeout_ms;
    let Launched {
        mut child,
        guard,
        listener,
        ..
    } = launch::launch(sandbox, broker, plan)
        .await
        .map_err(|e| DepsError::Sandbox(e.to_string()))?;
    let scratch = guard.scratch().to_path_buf();
    let mut output = child.stdout.take();
    let run = async {
        let mut log = Vec::new();
        if let Some(out) = output.as_mut() {
            let mut buf = [0u8; 8192];
            while let Ok(n) = out.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                log.extend_from_slice(&buf[..n]);
                if log.len() > 4 * LOG_TAIL_BYTES {
                    log.drain(..log.len() - LOG_TAIL_BYTES);
                }
            }
        }
        let status = child.wait().await;
        (log, status)
    };
    let limit = Duration::from_millis(timeout_ms);
    let ended = launch::relay_while(listener, broker, &call, tokio::time::timeout(limit, run))
        .await
        .ok();
    let pid = child.id();
    let Some((log, status)) = ended else {
        let _ = child.start_kill();
        guard.finish(pid);
        return Err(DepsError::Failed {
            installer,
            status: format!("no result within {timeout_ms} ms ([deps] build_timeout_ms)"),
            tail: String::new(),
        });
    };
    let tail = tail_of(&log);
    let ok = matches!(&status, Ok(s) if s.success());
    if !ok {
        guard.finish(pid);
        let status = match status {
            Ok(s) => s.to_string(),
            Err(e) => e.to_string(),
        };
        return Err(DepsError::Failed {
            installer,
            status,
            tail,
        });
    }
    let taken = take(&scratch);
    guard.finish(pid);
    Ok((taken?, tail))
}

/// The last [`LOG_TAIL_BYTES`] of the installer's output, from a line start.
/// A log shorter than that is kept whole (a one-line `No module named pip` included).
pub(super) fn tail_of(log: &[u8]) -> String {
    let text = String::from_utf8_lossy(log);
    let mut start = text.len().saturating_sub(LOG_TAIL_BYTES);
    if start > 0 {
        while !text.is_char_boundary(start) {
            start += 1;
        }
        start = text[start..].find('\n').map_or(start, |i| start + i + 1);
    }
    text.get(start..).unwrap_or_default().trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_installer_log_is_kept_whole() {
        let one = b"/usr/bin/python3: No module named pip\n";
        assert_eq!(tail_of(one), "/usr/bin/python3: No module named pip");
        assert_eq!(tail_of(b"a\nb\n"), "a\nb");
        let long = format!("{}\nlast line\n", "\u{e9}".repeat(LOG_TAIL_BYTES));
        let tail = tail_of(long.as_bytes());
        assert!(tail.ends_with("last line"), "{tail}");
        assert!(tail.len() <= LOG_TAIL_BYTES, "{}", tail.len());
    }
}
