//! The process's log subscriber on stderr: `[log] format = "text"` (default) or `"json"`
//! (one JSON object per line, for log shippers, never colour codes). Text gets ANSI colour
//! codes only when stderr is a terminal. `RUST_LOG` sets the filter (default: warnings).

use std::io::IsTerminal;

use skillbox_core::observe::log::LogFormat;

/// Installs the process's log subscriber in `format`; a second call does nothing.
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .with_ansi(false)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
    };
}
