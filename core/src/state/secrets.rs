//! Secret values of declared env names. They come from the core's own environment or from
//! `<state>/secrets.env` (`NAME=VALUE` lines, `#` comments; the file wins), and reach a
//! call only for names its skill declared. Values never appear in logs or `Debug`.

use std::collections::BTreeMap;
use std::path::Path;

use skillbox_protocol::methods::SecretValue;

pub use crate::state::workspace::SECRETS_FILE;

/// Where secret values come from.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    file: BTreeMap<String, SecretValue>,
}

impl Secrets {
    /// Reads `<state>/secrets.env` if present.
    pub fn load(state: &Path) -> std::io::Result<Self> {
        let path = state.join(SECRETS_FILE);
        let mut file = BTreeMap::new();
        if path.exists() {
            for line in std::fs::read_to_string(&path)?.lines() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                if let Some((k, v)) = line.split_once('=') {
                    file.insert(k.trim().to_string(), SecretValue(v.trim().to_string()));
                }
            }
        }
        Ok(Self { file })
    }

    /// The value of `name`, file first, then the core's environment.
    pub fn get(&self, name: &str) -> Option<SecretValue> {
        self.file
            .get(name)
            .cloned()
            .or_else(|| std::env::var(name).ok().map(SecretValue))
    }

    /// Whether the core holds a value for `name`.
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Values for the declared names the core holds.
    pub fn for_names(&self, names: &[String]) -> BTreeMap<String, SecretValue> {
        names
            .iter()
            .filter_map(|n| self.get(n).map(|v| (n.clone(), v)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_values_only_for_declared_names() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(SECRETS_FILE),
            "# comment\nAPI_KEY=sk-1\nOTHER=x\n",
        )
        .unwrap();
        let s = Secrets::load(dir.path()).unwrap();
        let got = s.for_names(&["API_KEY".to_string(), "MISSING_NAME_XYZ".to_string()]);
        assert_eq!(got.len(), 1);
        assert_eq!(got["API_KEY"].0, "sk-1");
        assert!(!format!("{s:?}").contains("sk-1"));
    }
}
