//! A workspace and every path in it: `skillbox.toml`, the install root `skills/`, and the
//! core's state folder `.skillbox` (0700) with the API token, the gateway address of the
//! running core, the channel PKI, signing keys, secrets, the operator's CA, the trust store
//! and the SQLite store. [`Workspace`] is the one place these names are written; the
//! modules that own a file take its path from here.

use std::path::{Path, PathBuf};

use crate::random::SystemSource;
use skillbox_protocol::methods::SecretValue;

use crate::state::pki::{write_atomic, PkiError};

/// The configuration file at the workspace's root.
pub const CONFIG_FILE: &str = "skillbox.toml";
/// The install root at the workspace's root (always a skills root; `[skills] roots`).
pub const SKILLS_DIR: &str = "skills";
/// The state folder's name in a workspace. Nothing in it is ever readable by a skill
/// (see `proxy::readfile`).
pub const STATE_DIR: &str = ".skillbox";
/// The API token file (in the state folder).
pub const TOKEN_FILE: &str = "api-token";
/// The file holding the running gateway's address (in the state folder).
pub const GATEWAY_ADDR_FILE: &str = "gateway.addr";
pub use super::pki::PKI_DIR;
/// The signing keys folder of `core.sign` (in the state folder).
pub const KEYS_DIR: &str = "keys";
/// The secrets file (in the state folder).
pub const SECRETS_FILE: &str = "secrets.env";
/// The SQLite database (in the state folder).
pub const DB_FILE: &str = "skillbox.db";
/// The operator's code-signing CA folder (in the state folder).
pub const CA_DIR: &str = "ca";
/// The trust store folder (in the state folder).
pub const TRUST_DIR: &str = "trust";

/// A workspace folder: the paths of everything the core reads and writes in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// The workspace at `root` (not checked; see [`Workspace::ensure_state_dir`]).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The workspace folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `skillbox.toml`.
    pub fn config_file(&self) -> PathBuf {
        self.root.join(CONFIG_FILE)
    }

    /// The install root `skills/`.
    pub fn skills_dir(&self) -> PathBuf {
        self.root.join(SKILLS_DIR)
    }

    /// The state folder `.skillbox`.
    pub fn state_dir(&self) -> PathBuf {
        self.root.join(STATE_DIR)
    }

    /// `.skillbox/api-token`.
    pub fn token_file(&self) -> PathBuf {
        self.state_dir().join(TOKEN_FILE)
    }

    /// `.skillbox/gateway.addr`.
    pub fn gateway_addr_file(&self) -> PathBuf {
        self.state_dir().join(GATEWAY_ADDR_FILE)
    }

    /// `.skillbox/pki`.
    pub fn pki_dir(&self) -> PathBuf {
        self.state_dir().join(PKI_DIR)
    }

    /// `.skillbox/keys`.
    pub fn keys_dir(&self) -> PathBuf {
        self.state_dir().join(KEYS_DIR)
    }

    /// `.skillbox/secrets.env`.
    pub fn secrets_file(&self) -> PathBuf {
        self.state_dir().join(SECRETS_FILE)
    }

    /// `.skillbox/skillbox.db`.
    pub fn db_file(&self) -> PathBuf {
        self.state_dir().join(DB_FILE)
    }

    /// `.skillbox/ca`.
    pub fn ca_dir(&self) -> PathBuf {
        self.state_dir().join(CA_DIR)
    }

    /// `.skillbox/trust`.
    pub fn trust_dir(&self) -> PathBuf {
        self.state_dir().join(TRUST_DIR)
    }

    /// Whether the folder is a workspace: it holds a state folder (`skillbox up` made one)
    /// or a `skillbox.toml`. A command that would write the state of a folder that is
    /// neither refuses, so no stray `.skillbox/` appears where no core will read it.
    pub fn is_workspace(&self) -> bool {
        self.state_dir().is_dir() || self.config_file().is_file()
    }

    /// Creates the state folder (0700) when missing and returns it.
    pub fn ensure_state_dir(&self) -> std::io::Result<PathBuf> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = self.state_dir();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        Ok(dir)
    }

    /// Reads the API token, creating a random one (0600) on first start. The token is held
    /// as a [`SecretValue`] from here on, so no `Debug` prints it.
    pub fn ensure_token(&self) -> Result<SecretValue, PkiError> {
        let path = self.token_file();
        if let Ok(t) = std::fs::read_to_string(&path) {
            let t = t.trim().to_string();
            if !t.is_empty() {
                return Ok(SecretValue(t));
            }
        }
        let token = crate::random::hex(&SystemSource::default(), 32, "API token").map_err(|e| {
            PkiError::Write {
                path: path.clone(),
                source: std::io::Error::other(e.to_string()),
            }
        })?;
        write_atomic(&path, format!("{token}\n").as_bytes(), 0o600)?;
        Ok(SecretValue(token))
    }

    /// Records where the gateway listens (for the CLI and scripts).
    pub fn write_gateway_addr(&self, addr: &str) -> Result<(), PkiError> {
        write_atomic(&self.gateway_addr_file(), addr.as_bytes(), 0o644)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_state_file_lies_in_the_state_folder() {
        let ws = Workspace::new("/w");
        for path in [
            ws.token_file(),
            ws.gateway_addr_file(),
            ws.pki_dir(),
            ws.keys_dir(),
            ws.secrets_file(),
            ws.db_file(),
            ws.ca_dir(),
            ws.trust_dir(),
        ] {
            assert_eq!(
                path.parent().unwrap(),
                Path::new("/w/.skillbox"),
                "{path:?}"
            );
        }
        assert_eq!(ws.config_file(), Path::new("/w/skillbox.toml"));
        assert_eq!(ws.skills_dir(), Path::new("/w/skills"));
    }

    #[test]
    fn the_token_is_made_once_owner_only_and_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path());
        let state = ws.ensure_state_dir().unwrap();
        assert_eq!(
            std::fs::metadata(&state).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let first = ws.ensure_token().unwrap();
        assert_eq!(first.0.len(), 64);
        let mode = std::fs::metadata(ws.token_file())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(ws.ensure_token().unwrap().0, first.0);
    }
}
