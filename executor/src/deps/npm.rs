//! npm's part of a build: `npm ci` of the skill's lock (integrity of every tarball checked
//! by npm against it), or `npm install` of its `package.json` without one, into
//! `<scratch>/node_modules`; install scripts ignored unless the operator allows them; the
//! configured registry only, through the egress proxy; no configuration file of the host,
//! npm's cache in the scratch folder. What it installed is read from npm's own record of
//! the folder, `node_modules/.package-lock.json`.

use std::path::{Path, PathBuf};

use skillbox_protocol::methods::{Ecosystem, LockedPackage, NodeBuild};

use crate::sandbox::env::SANDBOX_PATH;
use crate::sandbox::netns::PROXY_URL;

/// The folder npm installs into, in the scratch folder (and in the environment).
pub const MODULES: &str = "node_modules";
/// npm's record of what `node_modules` holds.
const HIDDEN_LOCK: &str = "node_modules/.package-lock.json";

/// Where the sandbox finds `npm` (on its `PATH`), if it does.
pub(super) fn find() -> Option<PathBuf> {
    find_on(SANDBOX_PATH)
}

/// `npm` in a folder of `path` (`:`-separated), if there is one.
fn find_on(path: &str) -> Option<PathBuf> {
    (path.split(':'))
        .map(|dir| Path::new(dir).join("npm"))
        .find(|p| p.is_file())
}

/// The files the build starts from: the manifest, and the lock when there is one.
pub(super) fn files(node: &NodeBuild) -> Vec<(String, Vec<u8>)> {
    let mut files = vec![(
        "package.json".to_string(),
        node.manifest.clone().into_bytes(),
    )];
    if let Some(lock) = &node.lock {
        files.push(("package-lock.json".into(), lock.clone().into_bytes()));
    }
    files
}

/// The command: `npm ci` with a lock, `npm install` without.
pub(super) fn argv(node: &NodeBuild) -> Vec<String> {
    let verb = if node.lock.is_some() { "ci" } else { "install" };
    let mut argv: Vec<String> = [
        "npm",
        verb,
        "--no-audit",
        "--no-fund",
        "--no-update-notifier",
        "--no-progress",
        "--omit=dev",
        // Relative to the build's working directory, its scratch folder.
        "--cache=.npm-cache",
        // A failed download (a tarball that does not match its integrity included) is
        // tried twice more within seconds, not npm's minute.
        "--fetch-retry-mintimeout=1000",
        "--fetch-retry-maxtimeout=5000",
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    argv.push(format!("--registry={}", node.registry));
    // npm honours the proxy variables too; said here so no other setting can win.
    argv.push(format!("--proxy={PROXY_URL}"));
    argv.push(format!("--https-proxy={PROXY_URL}"));
    if !node.allow_scripts {
        argv.push("--ignore-scripts".into());
    }
    argv
}

/// npm's environment: no configuration file of the host applies (the user's is
/// `$HOME/.npmrc`, in the empty scratch folder).
pub(super) fn env() -> Vec<(String, String)> {
    [
        ("npm_config_globalconfig", "/dev/null"),
        ("npm_config_update_notifier", "false"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The packages `node_modules` holds, from npm's record of it in the scratch folder
/// `scratch`: each name, version, tarball URL and integrity.
pub(super) fn packages_in(scratch: &Path) -> Result<Vec<LockedPackage>, String> {
    match std::fs::read(scratch.join(HIDDEN_LOCK)) {
        Ok(bytes) => packages_of(&bytes),
        // Nothing installed (every dependency optional and skipped, say): no record.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!("npm's record {HIDDEN_LOCK}: {e}")),
    }
}

/// The packages of an npm lock (`packages`, keyed by folder).
fn packages_of(lock: &[u8]) -> Result<Vec<LockedPackage>, String> {
    let v: serde_json::Value =
        serde_json::from_slice(lock).map_err(|e| format!("npm's record is not JSON: {e}"))?;
    let mut out = Vec::new();
    for (path, entry) in v["packages"].as_object().into_iter().flatten() {
        if path.is_empty() || entry["link"].as_bool() == Some(true) {
            continue;
        }
        let folder_name = path.rsplit("node_modules/").next().unwrap_or_default();
        let name = entry["name"].as_str().unwrap_or(folder_name);
        let version = entry["version"].as_str().unwrap_or_default();
        if name.is_empty() || version.is_empty() {
            return Err(format!(
                "npm's record names {path:?} without name or version"
            ));
        }
        out.push(LockedPackage {
            ecosystem: Ecosystem::Npm,
            name: name.to_string(),
            version: version.to_string(),
            url: entry["resolved"].as_str().unwrap_or_default().to_string(),
            sha256: String::new(),
            integrity: entry["integrity"].as_str().map(str::to_string),
        });
    }
    out.sort_by(|a, b| (&a.name, &a.version).cmp(&(&b.name, &b.version)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(lock: Option<&str>, allow_scripts: bool) -> NodeBuild {
        NodeBuild {
            manifest: r#"{"name":"s","dependencies":{"a":"^1"}}"#.into(),
            lock: lock.map(str::to_string),
            registry: "http://registry.test:4873/".into(),
            allow_scripts,
        }
    }

    #[test]
    fn a_lock_is_installed_exactly_and_scripts_are_ignored_unless_allowed() {
        let line = argv(&node(Some("{}"), false)).join(" ");
        assert!(line.starts_with("npm ci "), "{line}");
        assert!(line.contains("--ignore-scripts"), "{line}");
        assert!(
            line.contains("--registry=http://registry.test:4873/"),
            "{line}"
        );
        assert!(line.contains("--no-audit --no-fund"), "{line}");
        assert!(
            line.contains(&format!("--https-proxy={PROXY_URL}")),
            "{line}"
        );
        assert_eq!(files(&node(Some("{}"), false)).len(), 2);
        let line = argv(&node(None, true)).join(" ");
        assert!(line.starts_with("npm install "), "{line}");
        assert!(!line.contains("--ignore-scripts"), "{line}");
        assert_eq!(files(&node(None, true))[0].0, "package.json");
    }

    #[test]
    fn npm_is_looked_for_on_the_sandboxs_path_and_its_absence_names_the_package() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_string_lossy().into_owned();
        assert_eq!(find_on(&path), None);
        std::fs::write(dir.path().join("npm"), "").unwrap();
        assert_eq!(
            find_on(&format!("/nowhere:{path}")),
            Some(dir.path().join("npm"))
        );
        let why = super::super::DepsError::NpmMissing { path: SANDBOX_PATH }.to_string();
        assert!(why.contains("apt-get install npm"), "{why}");
    }

    #[test]
    fn npms_record_gives_each_package_with_its_integrity() {
        let lock = br#"{"name": "s", "lockfileVersion": 3, "packages": {
            "": {"name": "s", "dependencies": {"b": "^2"}},
            "node_modules/b": {"version": "2.0.1", "resolved": "http://r.test/b/-/b-2.0.1.tgz",
                               "integrity": "sha512-bbb"},
            "node_modules/b/node_modules/@s/a": {"version": "1.0.0", "integrity": "sha512-aaa"},
            "node_modules/linked": {"resolved": "../x", "link": true}
        }}"#;
        let p = packages_of(lock).unwrap();
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(
            (p[0].name.as_str(), p[0].version.as_str()),
            ("@s/a", "1.0.0")
        );
        assert_eq!(p[1].integrity.as_deref(), Some("sha512-bbb"));
        assert_eq!(p[1].ecosystem, Ecosystem::Npm);
        assert!(packages_of(br#"{"packages": {"node_modules/x": {}}}"#).is_err());
    }
}
