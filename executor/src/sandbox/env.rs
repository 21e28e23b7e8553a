//! The exact environment of a tool process (docs/skill-format.md): a fixed base, the call's
//! SKILLBOX_* variables, the declared names whose values the core supplied, and for a
//! network call the proxy variables ([`proxy`]). Nothing is inherited from the executor.

use std::path::Path;

/// `PATH` inside the sandbox.
pub const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The base variables: PATH, LANG, and HOME, TMPDIR and XDG_CONFIG_HOME (all three the
/// scratch dir). XDG_CONFIG_HOME because the password database is not readable in the
/// sandbox (and the call's user id has no entry in it): a program that looks its home up
/// there instead of reading HOME finds its configuration folder through it (LibreOffice
/// stops with "User installation could not be completed" otherwise).
pub fn base(scratch: &Path) -> Vec<(String, String)> {
    let scratch = scratch.to_string_lossy().into_owned();
    vec![
        ("PATH".into(), SANDBOX_PATH.into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("HOME".into(), scratch.clone()),
        ("TMPDIR".into(), scratch.clone()),
        ("XDG_CONFIG_HOME".into(), scratch),
    ]
}

/// [`base`], for a call of a skill with built dependencies in `deps`: their `bin/` first on
/// `PATH`, the folder on `PYTHONPATH`; with Node packages, its `node_modules` on
/// `NODE_PATH` (what `require()` searches) and `node_modules/.bin` on `PATH` after
/// `bin/` (`crate::deps`).
pub fn base_with_deps(scratch: &Path, deps: Option<&Path>) -> Vec<(String, String)> {
    let mut vars = base(scratch);
    if let Some(deps) = deps {
        let dir = deps.to_string_lossy();
        let modules = deps.join("node_modules");
        let node = modules
            .is_dir()
            .then(|| modules.to_string_lossy().into_owned());
        for (name, value) in vars.iter_mut() {
            if name == "PATH" {
                *value = match &node {
                    Some(m) => format!("{dir}/bin:{m}/.bin:{SANDBOX_PATH}"),
                    None => format!("{dir}/bin:{SANDBOX_PATH}"),
                };
            }
        }
        vars.push(("PYTHONPATH".into(), dir.into_owned()));
        if let Some(m) = node {
            vars.push(("NODE_PATH".into(), m));
        }
    }
    vars
}

/// The names of a call's own loopback, which its clients reach without the proxy (`::1`
/// as curl and Go match it, `[::1]` as Python's urllib does).
pub const OWN_LOOPBACK: &str = "localhost,127.0.0.1,::1,[::1]";

/// The variables that point a network call's programs at the egress proxy on their
/// loopback ([`super::netns::PROXY_URL`]), in the forms curl, Python, Node and Go read:
/// `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` and their lower-case forms (curl reads only
/// `http_proxy` for plain HTTP), `NO_PROXY` naming the call's own loopback (its own
/// servers are reached directly; nothing else is reachable without the proxy), and
/// `NODE_USE_ENV_PROXY=1` (Node's `fetch` and `http` honour the variables only then).
/// Skills cannot declare these names (`is_reserved_env`), and they come last, so nothing
/// overrides them.
pub fn proxy() -> Vec<(String, String)> {
    let url = super::netns::PROXY_URL;
    let mut vars: Vec<(String, String)> = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"]
        .into_iter()
        .flat_map(|name| [name.to_string(), name.to_lowercase()])
        .map(|name| (name, url.to_string()))
        .collect();
    vars.push(("NO_PROXY".into(), OWN_LOOPBACK.into()));
    vars.push(("no_proxy".into(), OWN_LOOPBACK.into()));
    vars.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
    vars
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_names_are_reserved_for_skills() {
        for (name, _) in proxy() {
            assert!(
                skillbox_protocol::skill::validate::is_reserved_env(&name),
                "{name} must be reserved"
            );
        }
    }
}
