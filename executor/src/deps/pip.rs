//! pip's part of a build: `pip install --target env` of the requirements file, wheels
//! only unless the operator allows source builds, reporting each package it took with
//! its SHA-256 (`--report`).

use skillbox_protocol::methods::{DepsBuildParams, Ecosystem, LockedPackage};

/// The folder pip installs into, in the scratch folder.
pub(super) const TARGET: &str = "env";
/// pip's installation report, in the scratch folder.
pub(super) const REPORT: &str = "report.json";

/// `pip install` of the requirements file into `<scratch>/env`, reporting what it took.
pub(super) fn argv(p: &DepsBuildParams) -> Vec<String> {
    let mut argv: Vec<String> = [
        "python3",
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-cache-dir",
        "--progress-bar",
        "off",
        "--target",
        TARGET,
        "--report",
        REPORT,
        "--index-url",
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    argv.push(p.index_url.clone());
    if let Some(rest) = p.index_url.strip_prefix("http://") {
        // Plain HTTP reaches only the operator's index, through the egress proxy.
        let host = rest.split(['/', ':']).next().unwrap_or_default();
        argv.extend(["--trusted-host".into(), host.to_string()]);
    }
    if !p.allow_source {
        argv.push("--only-binary=:all:".into());
    }
    if p.no_deps {
        argv.push("--no-deps".into());
    }
    argv.extend(["-r".into(), "requirements.txt".into()]);
    argv.extend(["-c".into(), "constraints.txt".into()]);
    argv
}

/// The packages of pip's installation report (`--report`): name, version, URL, SHA-256.
pub(super) fn packages_of(report: &[u8]) -> Result<Vec<LockedPackage>, String> {
    let v: serde_json::Value =
        serde_json::from_slice(report).map_err(|e| format!("pip's report is not JSON: {e}"))?;
    let installs = v["install"].as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for item in installs {
        let name = item["metadata"]["name"].as_str().unwrap_or_default();
        let version = item["metadata"]["version"].as_str().unwrap_or_default();
        let info = &item["download_info"];
        let url = info["url"].as_str().unwrap_or_default();
        let sha256 = info["archive_info"]["hashes"]["sha256"]
            .as_str()
            .map(str::to_string)
            .or_else(|| {
                (info["archive_info"]["hash"].as_str())
                    .and_then(|h| h.strip_prefix("sha256="))
                    .map(str::to_string)
            })
            .unwrap_or_default();
        if name.is_empty() || version.is_empty() {
            return Err("pip's report names a package without name or version".into());
        }
        out.push(LockedPackage {
            ecosystem: Ecosystem::Python,
            name: name.to_string(),
            version: version.to_string(),
            url: url.to_string(),
            sha256,
            integrity: None,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pip_report_gives_each_package_with_its_hash() {
        let report = br#"{"version": "1", "install": [
            {"download_info": {"url": "http://index.test/files/b-2.0-py3-none-any.whl",
              "archive_info": {"hash": "sha256=bbb"}}, "metadata": {"name": "b", "version": "2.0"}},
            {"download_info": {"url": "http://index.test/files/a-1.0-py3-none-any.whl",
              "archive_info": {"hashes": {"sha256": "aaa"}}}, "metadata": {"name": "a", "version": "1.0"}}
        ]}"#;
        let p = packages_of(report).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].name.as_str(), p[0].sha256.as_str()), ("a", "aaa"));
        assert_eq!(p[1].pin(), "b==2.0 --hash=sha256:bbb");
    }

    #[test]
    fn wheels_only_unless_allowed_and_a_plain_index_is_trusted_by_name() {
        let p = DepsBuildParams {
            call_id: "c".into(),
            capability_token: skillbox_protocol::methods::SecretValue("t".into()),
            skill: "s".into(),
            digest: "0".repeat(64),
            requirements: vec!["pypdf".into()],
            constraints: vec!["pypdf<5".into()],
            index_url: "http://index.test:8080/simple".into(),
            allow_source: false,
            no_deps: true,
            node: None,
            trust_pem: None,
            timeout_ms: 1000,
            memory_mb: 512,
        };
        let line = argv(&p).join(" ");
        assert!(line.contains("--only-binary=:all:"), "{line}");
        assert!(line.contains("--trusted-host index.test "), "{line}");
        assert!(line.contains("--no-deps"), "{line}");
        assert!(
            line.ends_with("-r requirements.txt -c constraints.txt"),
            "{line}"
        );
        let line = argv(&DepsBuildParams {
            allow_source: true,
            index_url: "https://pypi.org/simple".into(),
            ..p
        })
        .join(" ");
        assert!(
            !line.contains("only-binary") && !line.contains("trusted-host"),
            "{line}"
        );
    }
}
