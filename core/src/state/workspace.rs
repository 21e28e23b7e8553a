//! The core's state folder `<workspace>/.skillbox` (0700): the API token, the gateway
//! address of the running core, the PKI, keys, secrets and the SQLite store.

use std::path::{Path, PathBuf};

use crate::random::SystemSource;
use skillbox_protocol::methods::SecretValue;

use crate::state::pki::{write_atomic, PkiError};

/// The state folder's name in a workspace. Nothing in it is ever readable by a skill
/// (see `proxy::readfile`).
pub const STATE_DIR: &str = ".skillbox";
/// The API token file.
pub const TOKEN_FILE: &str = "api-token";
/// The file holding the running gateway's address.
pub const GATEWAY_ADDR_FILE: &str = "gateway.addr";

/// Creates `<workspace>/.skillbox` (0700) and returns it.
pub fn ensure_dir(workspace: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = workspace.join(STATE_DIR);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    Ok(dir)
}

/// Reads the API token, creating a random one (0600) on first start. The token is held
/// as a [`SecretValue`] from here on, so no `Debug` prints it.
pub fn ensure_token(state: &Path) -> Result<SecretValue, PkiError> {
    let path = state.join(TOKEN_FILE);
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
pub fn write_gateway_addr(state: &Path, addr: &str) -> Result<(), PkiError> {
    write_atomic(&state.join(GATEWAY_ADDR_FILE), addr.as_bytes(), 0o644)
}
