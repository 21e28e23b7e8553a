//! A throwaway PKI (CA folder, trust folder, developer certificates) and packages.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use skillbox_certs::{
    init_root, issue_developer, sign_package, RootInfo, TrustStore, Verified, VerifyError,
};
use tempfile::TempDir;

pub const NAME: &str = "hello";
pub const VERSION: &str = "1.0.0";
pub const ROOT_CN: &str = "Test Root";

pub struct Pki {
    pub tmp: TempDir,
    pub ca: PathBuf,
    pub trust: PathBuf,
    pub out: PathBuf,
    pub root: RootInfo,
}

impl Pki {
    pub fn new() -> Pki {
        let tmp = tempfile::tempdir().unwrap();
        let ca = tmp.path().join("ca");
        let trust = tmp.path().join("trust");
        let out = tmp.path().join("out");
        let root = init_root(&ca, &trust, ROOT_CN, 365).unwrap();
        Pki {
            tmp,
            ca,
            trust,
            out,
            root,
        }
    }

    /// Issues a developer certificate; returns (chain PEM, key PEM).
    pub fn developer(&self, publisher: &str) -> (String, String) {
        let issued = issue_developer(&self.ca, publisher, 30, &self.out).unwrap();
        (
            fs::read_to_string(issued.cert_path).unwrap(),
            fs::read_to_string(issued.key_path).unwrap(),
        )
    }

    pub fn store(&self) -> TrustStore {
        TrustStore::load(&self.trust).unwrap()
    }

    /// A fresh package folder under this PKI's temp folder.
    pub fn package(&self, label: &str) -> PathBuf {
        let dir = self.tmp.path().join("pkgs").join(label);
        make_package(&dir);
        dir
    }

    /// The current root as an rcgen issuer (same subject as `init_root` writes).
    pub fn root_issuer(&self) -> Issuer<'static, KeyPair> {
        let key =
            KeyPair::from_pem(&fs::read_to_string(self.ca.join("root.key")).unwrap()).unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(ROOT_CN);
        Issuer::new(params, key)
    }
}

pub fn dn(cn: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, cn);
    name
}

/// Parameters of a well-formed developer certificate valid for the next 30 days; tests
/// break one property at a time.
pub fn developer_params(publisher: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut name = dn(publisher);
    name.push(DnType::OrganizationName, publisher);
    params.distinguished_name = name;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
    params.use_authority_key_identifier_extension = true;
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(30);
    params
}

/// Signs `params` with `issuer`; returns (leaf PEM, key PEM).
pub fn leaf_signed_by(
    params: &CertificateParams,
    issuer: &Issuer<'_, KeyPair>,
) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// A small skill package: manifest, an executable script and a nested file.
pub fn make_package(dir: &Path) {
    fs::create_dir_all(dir.join("lib")).unwrap();
    fs::write(
        dir.join("skill.toml"),
        format!("name = \"{NAME}\"\nversion = \"{VERSION}\"\n"),
    )
    .unwrap();
    fs::write(dir.join("run.sh"), "#!/bin/sh\necho hello\n").unwrap();
    fs::set_permissions(dir.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(dir.join("lib/helper.py"), "print('hi')\n").unwrap();
    fs::set_permissions(dir.join("lib/helper.py"), fs::Permissions::from_mode(0o644)).unwrap();
    fs::set_permissions(dir.join("skill.toml"), fs::Permissions::from_mode(0o644)).unwrap();
}

pub fn sign(dir: &Path, chain: &str, key: &str) {
    sign_package(dir, NAME, VERSION, chain, key).unwrap();
}

pub fn verify(store: &TrustStore, dir: &Path) -> Result<Verified, VerifyError> {
    store.verify_package(dir, NAME, VERSION, SystemTime::now())
}

/// Asserts a refusal: its check name, that its message starts with that name, and
/// that the message contains `needle`.
pub fn assert_refused(err: &VerifyError, check: &str, needle: &str) {
    assert_eq!(err.check(), check, "wrong check for: {err}");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("{check}:")),
        "message does not name the check {check}: {msg}"
    );
    assert!(msg.contains(needle), "message lacks {needle:?}: {msg}");
}

pub fn mode_of(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}
