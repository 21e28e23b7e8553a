//! Name rules: skill, tool and environment variable names, and the env names reserved to skillbox.

use super::{MAX_NAME_LEN, MAX_TOOL_NAME_LEN};

/// Env names skills may not declare: the contract sets them, or they change how the
/// dynamic loader or an interpreter starts.
const RESERVED_ENV: [&str; 29] = [
    "PATH",
    "HOME",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "LANG",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "BASH_ENV",
    "ENV",
    "PERL5OPT",
    "PERL5LIB",
    "RUBYOPT",
    // The egress proxy of a network call (docs/sandbox.md): set by the executor, never by a
    // skill (a skill that set them could route around the proxy's view or break it).
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "NODE_USE_ENV_PROXY",
    // The CA bundle a network call's programs trust (the system roots plus the egress CA):
    // a skill that set them could trust a server the proxy does not vouch for.
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "CURL_CA_BUNDLE",
];
const RESERVED_ENV_PREFIXES: [&str; 4] = ["SKILLBOX_", "LD_", "DYLD_", "LC_"];

/// Whether `name` follows the Agent Skills rule: 1-64 of `a-z0-9` and single inner `-`.
pub fn is_spec_skill_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.split('-').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

/// Whether `name` can be used as an identifier at all (even leniently): it must not be
/// able to name a path or break `skill:tool`.
pub fn is_usable_skill_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 2 * MAX_NAME_LEN
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "/\\:".contains(c))
}

/// Whether `name` is a valid tool name: `[a-z0-9_]{1,64}`.
pub fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Whether `name` is a valid environment variable name.
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 128
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `name` is set by skillbox or changes how programs load (never a skill's to set).
pub fn is_reserved_env(name: &str) -> bool {
    RESERVED_ENV.contains(&name) || RESERVED_ENV_PREFIXES.iter().any(|p| name.starts_with(p))
}
