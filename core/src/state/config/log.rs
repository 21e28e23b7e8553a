//! `[log] format`: the core's log lines on stderr as `"text"` (default) or `"json"` (one
//! JSON object per line, for log shippers).

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
