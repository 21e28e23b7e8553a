//! Findings of loading and validation: each names the file, the field and what would be
//! valid.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// A deviation from the Agent Skills spec that lenient loading accepts and
    /// `--strict` rejects.
    Warning,
    /// The skill cannot be used: lenient loading skips it, `--strict` rejects it.
    Error,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// Warning or error.
    pub severity: Severity,
    /// The file the finding is about.
    pub file: PathBuf,
    /// The field, dotted (`tools[0].command`), or `-` for the whole file.
    pub field: String,
    /// What is wrong and what would be valid.
    pub message: String,
}

impl Diagnostic {
    /// An error.
    pub fn error(
        file: impl Into<PathBuf>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            severity: Severity::Error,
            file: file.into(),
            field: field.into(),
            message: message.into(),
        }
    }

    /// A warning.
    pub fn warning(
        file: impl Into<PathBuf>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            severity: Severity::Warning,
            file: file.into(),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let level = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(
            f,
            "{level}: {}: {}: {}",
            self.file.display(),
            self.field,
            self.message
        )
    }
}
