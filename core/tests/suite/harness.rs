//! Shared fixtures: a workspace with a code-signing CA, skill folders, signed packages,
//! hand-crafted (malicious) archives, and the "nothing left behind" assertion.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub use crate::support::skill_folder::write_skill;

use flate2::write::GzEncoder;
use flate2::Compression;
use skillbox_core::skills::install::{self, InstallError, Installed, Limits, TrustPolicy};
use skillbox_protocol::skill::InstallLock;
use tar::{EntryType, Header};

/// A workspace: skills root, state with `ca/` and `trust/`, and a developer certificate.
pub struct Workspace {
    pub dir: tempfile::TempDir,
    pub policy: TrustPolicy,
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Workspace {
    /// A workspace with a root and a developer certificate for "acme-skills".
    pub fn new(require_signed: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let workspace = skillbox_core::state::Workspace::new(dir.path());
        let state = workspace.ensure_state_dir().unwrap();
        std::fs::create_dir_all(workspace.skills_dir()).unwrap();
        let policy = TrustPolicy::for_workspace(&workspace, require_signed);
        let ca = state.join(install::CA_DIR);
        skillbox_certs::init_root(&ca, &policy.trust_dir, "test root", 30).unwrap();
        let issued =
            skillbox_certs::issue_developer(&ca, "acme-skills", 30, &dir.path().join("dev"))
                .unwrap();
        Self {
            dir,
            policy,
            ca,
            cert: issued.cert_path,
            key: issued.key_path,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn root(&self) -> &Path {
        &self.policy.skills_root
    }

    /// A fresh folder outside the skills root for building packages.
    pub fn scratch(&self, name: &str) -> PathBuf {
        let p = self.path().join("scratch").join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    /// Installs with default limits at the current time.
    pub fn install(&self, src: &Path) -> Result<Installed, InstallError> {
        self.install_allowing(src, install::PublisherChange::Refuse)
    }

    /// Installs, saying whether a publisher change is allowed.
    pub fn install_allowing(
        &self,
        src: &Path,
        change: install::PublisherChange,
    ) -> Result<Installed, InstallError> {
        install::install(
            src,
            &self.policy,
            Limits::default(),
            SystemTime::now(),
            change,
        )
    }

    /// Signs `dir` with the workspace's developer certificate.
    pub fn sign(&self, dir: &Path, name: &str, version: &str) {
        self.sign_with(dir, name, version, &self.cert, &self.key);
    }

    pub fn sign_with(&self, dir: &Path, name: &str, version: &str, cert: &Path, key: &Path) {
        let chain = std::fs::read_to_string(cert).unwrap();
        let key = std::fs::read_to_string(key).unwrap();
        skillbox_certs::sign_package(dir, name, version, &chain, &key).unwrap();
    }

    /// A signed skill folder `name` at `version` (outside the skills root).
    pub fn signed_skill(&self, name: &str, version: &str, extra: &str) -> PathBuf {
        let dir = self.scratch(&format!("{name}-{version}-{}", extra.len()));
        write_skill(&dir, name, version, extra);
        self.sign(&dir, name, version);
        dir
    }

    /// The lock file's bytes, if any.
    pub fn lock_bytes(&self) -> Option<Vec<u8>> {
        std::fs::read(InstallLock::path(self.root())).ok()
    }

    pub fn lock(&self) -> InstallLock {
        InstallLock::read(self.root()).unwrap().unwrap_or_default()
    }

    /// A refusal left nothing: no staging folder, no skill folder, the lock unchanged.
    pub fn assert_untouched(&self, lock_before: &Option<Vec<u8>>, names_before: &[String]) {
        let names = self.root_names();
        assert_eq!(&names, names_before, "the skills root changed");
        assert!(
            !names.iter().any(|n| n.starts_with(".staging-")),
            "a staging folder was left: {names:?}"
        );
        assert_eq!(&self.lock_bytes(), lock_before, "the install lock changed");
    }

    /// Names in the skills root, sorted.
    pub fn root_names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.root())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Installs `src`, expects a refusal at `check`, and that nothing was left behind.
    pub fn refused(&self, src: &Path, check: &str) -> InstallError {
        let lock = self.lock_bytes();
        let names = self.root_names();
        let err = self
            .install(src)
            .expect_err("the install should be refused");
        assert_eq!(err.check(), check, "refused for another reason: {err}");
        self.assert_untouched(&lock, &names);
        err
    }
}

/// One raw tar entry: a GNU header with exactly these name bytes (no checks), then `data`
/// padded to 512 bytes. `size` is what the header claims.
pub fn raw_entry(
    name: &[u8],
    kind: EntryType,
    size: u64,
    mode: u32,
    link: &[u8],
    data: &[u8],
) -> Vec<u8> {
    let mut h = Header::new_gnu();
    {
        let old = h.as_old_mut();
        old.name[..name.len()].copy_from_slice(name);
        old.linkname[..link.len()].copy_from_slice(link);
    }
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(mode);
    h.set_mtime(0);
    h.set_cksum();
    let mut out = h.as_bytes().to_vec();
    out.extend_from_slice(data);
    let pad = (512 - data.len() % 512) % 512;
    out.extend(std::iter::repeat_n(0u8, pad));
    out
}

/// A regular-file entry.
pub fn file_entry(name: &str, body: &[u8]) -> Vec<u8> {
    raw_entry(
        name.as_bytes(),
        EntryType::Regular,
        body.len() as u64,
        0o644,
        b"",
        body,
    )
}

/// Entries of a valid little skill (`SKILL.md`).
pub fn skill_entries(name: &str) -> Vec<u8> {
    file_entry(
        "SKILL.md",
        format!("---\nname: {name}\ndescription: x\n---\nbody\n").as_bytes(),
    )
}

/// Gzips raw tar entries, adding the end-of-archive blocks.
pub fn tar_gz(path: &Path, entries: &[Vec<u8>]) -> PathBuf {
    let mut gz = GzEncoder::new(std::fs::File::create(path).unwrap(), Compression::fast());
    for e in entries {
        gz.write_all(e).unwrap();
    }
    gz.write_all(&[0u8; 1024]).unwrap();
    gz.finish().unwrap();
    path.to_path_buf()
}
