//! The core's log lines on stderr: `[log] format = "text"` (default) or `"json"` (one JSON
//! object per line, for log shippers). ANSI colour codes only when stderr is a terminal;
//! `RUST_LOG` sets the filter (default: warnings).

use std::io::IsTerminal;

use serde::{Deserialize, Serialize};

/// `[log] format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `fields`, `span`, `spans`).
    Json,
}

/// `[log]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSection {
    /// `"text"` or `"json"`.
    pub format: LogFormat,
}

/// Installs the process's log subscriber in `format`; a second call does nothing.
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    let _ = match format {
        // JSON lines never carry colour codes, whatever stderr is.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_format_reads_text_and_json_and_refuses_others() {
        let s: LogSection = toml::from_str("format = \"json\"").unwrap();
        assert_eq!(s.format, LogFormat::Json);
        let s: LogSection = toml::from_str("").unwrap();
        assert_eq!(s.format, LogFormat::Text);
        let e = toml::from_str::<LogSection>("format = \"xml\"").unwrap_err();
        assert!(e.to_string().contains("unknown variant"), "{e}");
    }
}
