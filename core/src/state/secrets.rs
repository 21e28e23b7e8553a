//! Secret values of declared env names. They come from the core's own environment or from
//! `<state>/secrets.env` (`NAME=VALUE` lines, `#` comments; the file wins), and reach a
//! call only for names its skill declared. Values never appear in logs or `Debug`.
//!
//! A reload (`POST /v1/skills/reload`, SIGHUP, a change of the skills) reads the file
//! again ([`Secrets::reload`]) and swaps the values whole: a call takes the values of the
//! last load when it is dispatched, never half of one file and half of the next.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

use skillbox_protocol::methods::SecretValue;

pub use crate::state::workspace::SECRETS_FILE;

/// The values of `secrets.env`, as one load read them.
type FileValues = Arc<BTreeMap<String, SecretValue>>;

/// Where secret values come from. Clones share the values, so a reload through one is
/// seen by all.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    file: Arc<RwLock<FileValues>>,
}

impl Secrets {
    /// Reads `<state>/secrets.env` if present.
    pub fn load(state: &Path) -> std::io::Result<Self> {
        Ok(Self {
            file: Arc::new(RwLock::new(Arc::new(read_file(state)?))),
        })
    }

    /// Reads `<state>/secrets.env` again and swaps in its values; returns how many names
    /// it holds. A file that cannot be read keeps the previous values (the error says why).
    pub fn reload(&self, state: &Path) -> std::io::Result<usize> {
        let values = read_file(state)?;
        let names = values.len();
        match self.file.write() {
            Ok(mut file) => *file = Arc::new(values),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(values),
        }
        Ok(names)
    }

    fn values(&self) -> FileValues {
        match self.file.read() {
            Ok(file) => Arc::clone(&file),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// The value of `name`, file first, then the core's environment.
    pub fn get(&self, name: &str) -> Option<SecretValue> {
        self.values()
            .get(name)
            .cloned()
            .or_else(|| std::env::var(name).ok().map(SecretValue))
    }

    /// Whether the core holds a value for `name`.
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Values for the declared names the core holds, all from one load of the file.
    pub fn for_names(&self, names: &[String]) -> BTreeMap<String, SecretValue> {
        let file = self.values();
        names
            .iter()
            .filter_map(|n| {
                file.get(n)
                    .cloned()
                    .or_else(|| std::env::var(n).ok().map(SecretValue))
                    .map(|v| (n.clone(), v))
            })
            .collect()
    }
}

/// The `NAME=VALUE` lines of `<state>/secrets.env` (`#` comments); empty without the file.
fn read_file(state: &Path) -> std::io::Result<BTreeMap<String, SecretValue>> {
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
    Ok(file)
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

    #[test]
    fn reload_swaps_in_the_new_values_and_a_clone_sees_them() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(SECRETS_FILE),
            "API_KEY=sk-old
",
        )
        .unwrap();
        let s = Secrets::load(dir.path()).unwrap();
        let held = s.clone();
        std::fs::write(
            dir.path().join(SECRETS_FILE),
            "API_KEY=sk-new
ADDED_NAME_Q7=v
",
        )
        .unwrap();
        assert_eq!(s.reload(dir.path()).unwrap(), 2);
        assert_eq!(held.get("API_KEY").unwrap().0, "sk-new");
        assert!(held.has("ADDED_NAME_Q7"));
        assert!(!format!("{s:?}").contains("sk-new"));
        // An unreadable file keeps the previous values.
        std::fs::remove_file(dir.path().join(SECRETS_FILE)).unwrap();
        std::fs::create_dir(dir.path().join(SECRETS_FILE)).unwrap();
        assert!(s.reload(dir.path()).is_err());
        assert_eq!(held.get("API_KEY").unwrap().0, "sk-new");
    }
}
