//! The Kubernetes manifests (`deploy/kubernetes`, the base; `deploy/kubernetes-example`, an
//! operator's overlay; docs/kubernetes.md), checked offline: no cluster runs here.
//! `kubectl kustomize` renders them; `kubernetes-validate` (PyPI, in the client venv;
//! `integration-tests/python/kube_manifests.py`) validates every object against the
//! OpenAPI schemas of pinned Kubernetes versions; `checks` asserts the security properties
//! on the rendered objects. Every check also runs on a deliberately weakened copy and must
//! refuse it, naming what is wrong.
//!
//! Needs `kubectl` (`SKILLBOX_KUBECTL`, else on `PATH`) and the venv: without them each test
//! prints `SKIPPED <test>`; under CI (`CI` set) it fails (`.ci/run` installs both).

mod checks;
mod network;
mod render;
mod security;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::harness::python::python;

/// The Kubernetes versions every object is validated against: the oldest the manifests
/// claim (docs/kubernetes.md) and the newest the pinned kubernetes-validate ships.
pub const PINNED_VERSIONS: [&str; 2] = ["1.30.0", "1.37.0"];

/// The repository root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The base's folder.
fn base_dir() -> PathBuf {
    repo().join("deploy/kubernetes")
}

/// What renders and validates.
pub struct Tools {
    kubectl: PathBuf,
    python: PathBuf,
}

/// Skips `test` (or fails it under CI) for `why`.
fn skip(test: &str, why: &str) -> Option<Tools> {
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: {why} under CI (.ci/run installs kubectl from Debian's kubernetes-client and the venv)"
    );
    println!("SKIPPED {test}: {why}");
    None
}

/// `name` on `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// kubectl and the venv's Python, or `None` after printing that `test` is skipped.
pub fn tools(test: &str) -> Option<Tools> {
    let kubectl = match std::env::var_os("SKILLBOX_KUBECTL") {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(path.is_file(), "SKILLBOX_KUBECTL is {path:?}, not a file");
            path
        }
        None => match on_path("kubectl") {
            Some(path) => path,
            None => {
                return skip(
                    test,
                    "no kubectl (set SKILLBOX_KUBECTL or install kubernetes-client)",
                )
            }
        },
    };
    let python = python(test)?;
    Some(Tools { kubectl, python })
}

impl Tools {
    /// `kubectl kustomize dir`: the rendered YAML; panics with kubectl's stderr on failure.
    pub fn render(&self, dir: &Path) -> String {
        let out = Command::new(&self.kubectl)
            .arg("kustomize")
            .arg(dir)
            .output()
            .expect("run kubectl");
        assert!(
            out.status.success(),
            "kubectl kustomize {} failed ({}): {}",
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("kubectl prints UTF-8")
    }

    /// The client's minor version (`1.20` → 20), to know which kustomize it embeds.
    pub fn kubectl_minor(&self) -> u32 {
        let out = Command::new(&self.kubectl)
            .args(["version", "--client", "-o", "json"])
            .output()
            .expect("run kubectl version");
        let v: Value = serde_json::from_slice(&out.stdout).expect("kubectl version JSON");
        let minor = v["clientVersion"]["minor"].as_str().unwrap_or_default();
        minor
            .trim_end_matches('+')
            .parse()
            .unwrap_or_else(|_| panic!("kubectl minor version {minor:?}"))
    }

    /// Runs `kube_manifests.py` with `args`; `None` when kubernetes-validate is missing
    /// (exit 3) and this is not CI; panics on any other failure.
    fn script(&self, test: &str, args: &[&str]) -> Option<Value> {
        let script = repo().join("integration-tests/python/kube_manifests.py");
        let out = Command::new(&self.python)
            .arg(&script)
            .args(args)
            .output()
            .expect("run python");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(3) {
            skip(test, stderr.trim())?;
        }
        assert!(out.status.success(), "kube_manifests.py {args:?}: {stderr}");
        Some(serde_json::from_slice(&out.stdout).expect("kube_manifests.py prints JSON"))
    }

    /// The objects of rendered YAML.
    pub fn objects(&self, test: &str, yaml: &str) -> Option<Vec<Value>> {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), yaml).unwrap();
        let json = self.script(test, &["to-json", file.path().to_str().unwrap()])?;
        Some(json.as_array().expect("a list of objects").clone())
    }

    /// Each object validated at each of `versions`: `(kind/name@version, error or None)`.
    pub fn validate(
        &self,
        test: &str,
        objects: &[Value],
        versions: &[&str],
    ) -> Option<Vec<(String, Option<Value>)>> {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), serde_json::to_vec(objects).unwrap()).unwrap();
        let mut args = vec!["validate", file.path().to_str().unwrap()];
        for v in versions {
            args.extend(["--version", v]);
        }
        let out = self.script(test, &args)?;
        let results = out["results"].as_array().expect("results").iter();
        Some(
            results
                .map(|r| {
                    let id = format!("{}/{}@{}", r["kind"], r["name"], r["version"]);
                    let error = Some(r["error"].clone()).filter(|e| !e.is_null());
                    (id.replace('"', ""), error)
                })
                .collect(),
        )
    }

    /// Whether two renders hold the same objects (generated name suffixes aside).
    pub fn compare(&self, test: &str, a: &str, b: &str) -> Option<Value> {
        let (fa, fb) = (
            tempfile::NamedTempFile::new().unwrap(),
            tempfile::NamedTempFile::new().unwrap(),
        );
        std::fs::write(fa.path(), a).unwrap();
        std::fs::write(fb.path(), b).unwrap();
        self.script(
            test,
            &[
                "compare",
                fa.path().to_str().unwrap(),
                fb.path().to_str().unwrap(),
            ],
        )
    }
}

/// The base rendered: the tools and its objects, or `None` when skipped.
pub fn base(test: &str) -> Option<(Tools, Vec<Value>)> {
    let tools = tools(test)?;
    let yaml = tools.render(&base_dir());
    let objects = tools.objects(test, &yaml)?;
    Some((tools, objects))
}
