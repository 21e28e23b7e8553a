//! The exact environment of a tool process (docs/skill-format.md): a fixed base, the call's
//! SKILLBOX_* variables, and the declared names whose values the core supplied. Nothing
//! is inherited from the executor.

use std::path::Path;

/// `PATH` inside the sandbox.
pub const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The base variables: PATH, LANG, HOME and TMPDIR (both the scratch dir).
pub fn base(scratch: &Path) -> Vec<(String, String)> {
    let scratch = scratch.to_string_lossy().into_owned();
    vec![
        ("PATH".into(), SANDBOX_PATH.into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("HOME".into(), scratch.clone()),
        ("TMPDIR".into(), scratch),
    ]
}
