//! Issuing: the operator's root CA, an optional intermediate, developer code-signing
//! certificates, root rotation, retirement and revocation. Keys are ECDSA P-256 (rcgen's
//! default), written PKCS#8 PEM with mode 0600 and never printed.
//!
//! ```text
//! <ca>/root.pem, root.key                 current root
//! <ca>/root-<fp>.pem, root-<fp>.key       roots replaced by `rotate_root`
//! <ca>/intermediate.pem, .key             optional intermediate (pathlen 0)
//! <ca>/intermediate-<fp>.pem, .key        intermediates replaced or orphaned by a rotation
//! ```

mod checks;
mod revoke;
mod rotate;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, DnValue,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, PublicKeyData, SerialNumber,
};
use ring::rand::SecureRandom;

pub use revoke::{find_certificate, revoke};
pub use rotate::{retire_root, rotate_root};

use self::checks::{check_days, check_name, check_publisher};
use crate::cert;
use crate::fsutil::{create_dir, unix_seconds, write_new, KEY_MODE, PUBLIC_MODE};
pub use crate::rotation::RotationStatement;
use crate::trust::{RootInfo, RootSource, TrustError, ROOTS_DIR};

pub(crate) const ROOT_CERT: &str = "root.pem";
pub(crate) const ROOT_KEY: &str = "root.key";
pub(crate) const INTERMEDIATE_CERT: &str = "intermediate.pem";
pub(crate) const INTERMEDIATE_KEY: &str = "intermediate.key";

/// Longest validity accepted, in days (about 30 years).
pub const MAX_DAYS: u32 = 11_000;

/// A certificate written by [`issue_developer`] or [`issue_intermediate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedCert {
    /// The PEM written: for a developer, the leaf then the intermediate if any.
    pub cert_path: PathBuf,
    /// The private key (mode 0600).
    pub key_path: PathBuf,
    /// SHA-256 (hex) of the new certificate's DER.
    pub fingerprint: String,
    /// Subject of the new certificate as text, e.g. `CN=…, O=…`.
    pub subject: String,
    /// notAfter, Unix seconds (never later than the issuer's).
    pub not_after: i64,
    /// SHA-256 (hex) of the issuing certificate.
    pub issuer_fingerprint: String,
}

/// Why issuing, rotating, retiring or revoking failed.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error("issue: the {what} {value:?} is {reason}")]
    /// A name (root common name or publisher) is empty, too long, holds a control
    /// character or, for a publisher, characters unfit for a file name.
    InvalidName {
        /// Which name: `root common name` or `publisher`.
        what: &'static str,
        /// The name given.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    #[error("issue: --days {days} is out of range; use 1 to {MAX_DAYS}")]
    /// The validity in days is 0, above [`MAX_DAYS`], or gives an unrepresentable date.
    InvalidDays {
        /// The number of days given.
        days: u32,
    },
    #[error("issue: {} already exists; move it away first (keys are never overwritten)", path.display())]
    /// A certificate or key file to be created already exists.
    AlreadyExists {
        /// The existing file.
        path: PathBuf,
    },
    #[error("issue: no CA at {}; run `skillbox certs init-root` first", path.display())]
    /// The CA's certificate or key file does not exist.
    MissingCa {
        /// The missing file.
        path: PathBuf,
    },
    #[error("issue: {} is unusable ({reason}); restore it from a backup", path.display())]
    /// A CA certificate or key file exists but cannot be used (unparsable, key not
    /// matching the certificate, unsupported subject encoding, ...).
    ReadCa {
        /// The unusable file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    #[error("issue: generating the {step} failed: {source}")]
    /// rcgen failed to generate a key or to build and sign a certificate.
    Generate {
        /// What was being generated, e.g. `root key` or `developer certificate`.
        step: &'static str,
        /// The rcgen error.
        #[source]
        source: rcgen::Error,
    },
    #[error("issue: the new certificate's issuer does not match the CA's subject; the CA certificate uses a name encoding this tool cannot reproduce")]
    /// The issued certificate does not parse, or its issuer does not byte-match the
    /// CA certificate's subject.
    IssuerMismatch,
    #[error("issue: signing failed; try again")]
    /// Signing a rotation statement, or drawing random bytes for a serial, failed.
    Sign,
    #[error("issue: cannot write or read {}: {source}", path.display())]
    /// Reading, writing or creating a file or folder failed.
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    /// The trust store could not be loaded or its lists could not be read.
    Trust(#[from] TrustError),
    #[error("issue: {input:?} is neither a PEM certificate, a SHA-256 fingerprint nor a certificate file")]
    /// The input is neither PEM certificate text, a SHA-256 fingerprint nor a readable
    /// PEM certificate file.
    InvalidCertOrFingerprint {
        /// The input given (for revocation, its first 80 characters).
        input: String,
    },
    #[error("issue: no root with fingerprint {fingerprint} in the trust store; see `skillbox certs list`")]
    /// No root in the trust store has the fingerprint given.
    UnknownRoot {
        /// The normalised fingerprint looked for.
        fingerprint: String,
    },
    #[error("issue: retiring {fingerprint} would leave no current root; run `skillbox certs rotate-root` first")]
    /// Retiring the root would leave no root that is not retired.
    LastRoot {
        /// SHA-256 (hex) of the root to be retired.
        fingerprint: String,
    },
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> IssueError + '_ {
    move |source| IssueError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Creates the root CA: `ca_dir/root.pem` and `root.key` (0600), and copies the
/// certificate to `trust_dir/roots/<fingerprint>.pem`. Refuses to replace a root.
pub fn init_root(
    ca_dir: &Path,
    trust_dir: &Path,
    common_name: &str,
    days: u32,
) -> Result<RootInfo, IssueError> {
    check_name("root common name", common_name)?;
    check_days(days)?;
    for name in [ROOT_CERT, ROOT_KEY] {
        let path = ca_dir.join(name);
        if path.exists() {
            return Err(IssueError::AlreadyExists { path });
        }
    }
    create_dir(ca_dir, 0o700).map_err(io_err(ca_dir))?;
    let (der, pem, key) = new_root(&[(DnType::CommonName, DnValue::from(common_name))], days)?;
    let fingerprint = cert::fingerprint(&der);
    write_key(&ca_dir.join(ROOT_KEY), &key)?;
    write_cert(&ca_dir.join(ROOT_CERT), &pem)?;
    let roots = trust_dir.join(ROOTS_DIR);
    create_dir(&roots, 0o755).map_err(io_err(&roots))?;
    write_cert(&roots.join(format!("{fingerprint}.pem")), &pem)?;
    let parsed = cert::parse(&der).map_err(|reason| IssueError::ReadCa {
        path: ca_dir.join(ROOT_CERT),
        reason,
    })?;
    Ok(RootInfo {
        fingerprint,
        subject: cert::subject(&parsed),
        not_after: cert::not_after(&parsed),
        source: RootSource::Configured,
        retiring: false,
        retired: false,
    })
}

/// Issues a developer certificate for `publisher`: not a CA, KeyUsage digitalSignature,
/// EKU codeSigning only, subject `CN=publisher, O=publisher`, signed by
/// `ca_dir/intermediate.*` when present, else by the current root. Writes
/// `out_dir/<publisher>.pem` (leaf, then the intermediate if any) and
/// `out_dir/<publisher>.key` (0600).
pub fn issue_developer(
    ca_dir: &Path,
    publisher: &str,
    days: u32,
    out_dir: &Path,
) -> Result<IssuedCert, IssueError> {
    check_publisher(publisher)?;
    check_days(days)?;
    let cert_path = out_dir.join(format!("{publisher}.pem"));
    let key_path = out_dir.join(format!("{publisher}.key"));
    for path in [&cert_path, &key_path] {
        if path.exists() {
            return Err(IssueError::AlreadyExists { path: path.clone() });
        }
    }
    let intermediate = ca_dir.join(INTERMEDIATE_CERT);
    let ca = if intermediate.exists() {
        Ca::load(&intermediate, &ca_dir.join(INTERMEDIATE_KEY))?
    } else {
        Ca::load(&ca_dir.join(ROOT_CERT), &ca_dir.join(ROOT_KEY))?
    };
    let is_intermediate = intermediate.exists();

    let mut params = base_params(days, ca.not_after)?;
    params.distinguished_name = dn(&[
        (DnType::CommonName, DnValue::from(publisher)),
        (DnType::OrganizationName, DnValue::from(publisher)),
    ]);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
    params.use_authority_key_identifier_extension = true;
    let key = generate_key("developer key")?;
    let der = ca.sign(&params, &key, "developer certificate")?;

    let mut chain = cert::to_pem(&der);
    if is_intermediate {
        chain.push_str(&cert::to_pem(&ca.der));
    }
    create_dir(out_dir, 0o700).map_err(io_err(out_dir))?;
    write_key(&key_path, &key)?;
    write_cert(&cert_path, &chain)?;
    issued(cert_path, key_path, &der, &ca)
}

/// Issues an intermediate CA (pathlen 0, keyCertSign) under the current root as
/// `ca_dir/intermediate.pem` / `.key`. A previous intermediate is kept as
/// `intermediate-<fp>.*`; developer certificates are issued under the new one from now.
pub fn issue_intermediate(ca_dir: &Path, days: u32) -> Result<IssuedCert, IssueError> {
    check_days(days)?;
    let root = Ca::load(&ca_dir.join(ROOT_CERT), &ca_dir.join(ROOT_KEY))?;
    rotate::archive_intermediate(ca_dir)?;
    let root_cn = {
        let parsed = cert::parse(&root.der).map_err(|reason| IssueError::ReadCa {
            path: ca_dir.join(ROOT_CERT),
            reason,
        })?;
        cert::common_name(&parsed).unwrap_or_else(|| "skillbox".to_string())
    };
    let mut params = base_params(days, root.not_after)?;
    params.distinguished_name = dn(&[(
        DnType::CommonName,
        DnValue::from(format!("{root_cn} intermediate")),
    )]);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.use_authority_key_identifier_extension = true;
    let key = generate_key("intermediate key")?;
    let der = root.sign(&params, &key, "intermediate certificate")?;
    let cert_path = ca_dir.join(INTERMEDIATE_CERT);
    let key_path = ca_dir.join(INTERMEDIATE_KEY);
    write_key(&key_path, &key)?;
    write_cert(&cert_path, &cert::to_pem(&der))?;
    issued(cert_path, key_path, &der, &root)
}

/// A CA certificate and its key, read from `ca_dir`.
pub(crate) struct Ca {
    pub(crate) der: Vec<u8>,
    pub(crate) key_pem: String,
    key: KeyPair,
    issuer_dn: DistinguishedName,
    subject_raw: Vec<u8>,
    pub(crate) not_after: i64,
}

impl Ca {
    pub(crate) fn load(cert_path: &Path, key_path: &Path) -> Result<Ca, IssueError> {
        let read = |path: &Path| match fs::read_to_string(path) {
            Ok(s) => Ok(s),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(IssueError::MissingCa {
                path: path.to_path_buf(),
            }),
            Err(source) => Err(IssueError::Io {
                path: path.to_path_buf(),
                source,
            }),
        };
        let bad = |path: &Path, reason: String| IssueError::ReadCa {
            path: path.to_path_buf(),
            reason,
        };
        let pem = read(cert_path)?;
        let key_pem = read(key_path)?;
        let der = cert::single_pem_certificate(&pem).map_err(|r| bad(cert_path, r))?;
        let key = KeyPair::from_pem(&key_pem)
            .map_err(|_| bad(key_path, "not a PKCS#8 private key".to_string()))?;
        let parsed = cert::parse(&der).map_err(|r| bad(cert_path, r))?;
        if !cert::is_ca(&parsed) {
            return Err(bad(cert_path, "not a CA certificate".to_string()));
        }
        if parsed.public_key().raw != key.subject_public_key_info().as_slice() {
            return Err(bad(key_path, "does not match the certificate".to_string()));
        }
        let issuer_dn = dn_of(&parsed).map_err(|r| bad(cert_path, r))?;
        Ok(Ca {
            subject_raw: parsed.subject().as_raw().to_vec(),
            not_after: cert::not_after(&parsed),
            der: der.clone(),
            key_pem,
            key,
            issuer_dn,
        })
    }

    /// Signs `params` for `subject_key`; checks the result names this CA as issuer.
    fn sign(
        &self,
        params: &CertificateParams,
        subject_key: &KeyPair,
        step: &'static str,
    ) -> Result<Vec<u8>, IssueError> {
        let mut issuer_params = CertificateParams::default();
        issuer_params.distinguished_name = self.issuer_dn.clone();
        let issuer = Issuer::new(issuer_params, &self.key);
        let der = params
            .signed_by(subject_key, &issuer)
            .map_err(|source| IssueError::Generate { step, source })?
            .der()
            .to_vec();
        let parsed = cert::parse(&der).map_err(|_| IssueError::IssuerMismatch)?;
        if parsed.issuer().as_raw() != self.subject_raw.as_slice() {
            return Err(IssueError::IssuerMismatch);
        }
        Ok(der)
    }
}

/// A new self-signed root (CA, keyCertSign, cRLSign, digitalSignature).
pub(crate) fn new_root(
    name: &[(DnType, DnValue)],
    days: u32,
) -> Result<(Vec<u8>, String, KeyPair), IssueError> {
    let mut params = base_params(days, i64::MAX)?;
    params.distinguished_name = dn(name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = generate_key("root key")?;
    let cert = params
        .self_signed(&key)
        .map_err(|source| IssueError::Generate {
            step: "root certificate",
            source,
        })?;
    let der = cert.der().to_vec();
    let pem = cert::to_pem(&der);
    Ok((der, pem, key))
}

/// Validity from a minute ago to `days` from now (capped at `cap`, Unix seconds) and a
/// random positive 128-bit serial.
fn base_params(days: u32, cap: i64) -> Result<CertificateParams, IssueError> {
    let now = unix_seconds(SystemTime::now());
    let until = now.saturating_add(i64::from(days) * 86_400).min(cap);
    let at = |t: i64| {
        time::OffsetDateTime::from_unix_timestamp(t).map_err(|_| IssueError::InvalidDays { days })
    };
    let mut params = CertificateParams::default();
    params.not_before = at(now - 60)?;
    params.not_after = at(until)?;
    let mut serial = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut serial)
        .map_err(|_| IssueError::Sign)?;
    serial[0] = (serial[0] & 0x7f) | 0x01;
    params.serial_number = Some(SerialNumber::from_slice(&serial));
    Ok(params)
}

fn generate_key(step: &'static str) -> Result<KeyPair, IssueError> {
    KeyPair::generate().map_err(|source| IssueError::Generate { step, source })
}

pub(crate) fn dn(entries: &[(DnType, DnValue)]) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    for (t, v) in entries {
        name.push(t.clone(), v.clone());
    }
    name
}

/// Rebuilds a certificate's subject as rcgen entries (same attribute order and string
/// types), so certificates it issues carry the exact issuer bytes.
pub(crate) fn dn_entries(
    c: &x509_parser::certificate::X509Certificate<'_>,
) -> Result<Vec<(DnType, DnValue)>, String> {
    use x509_parser::der_parser::asn1_rs::Tag;
    let mut out = Vec::new();
    for attr in c.subject().iter_attributes() {
        let arcs: Vec<u64> = attr
            .attr_type()
            .iter()
            .map(|i| i.collect())
            .ok_or_else(|| "subject attribute with an oversized OID".to_string())?;
        let t = match arcs.as_slice() {
            [2, 5, 4, 3] => DnType::CommonName,
            [2, 5, 4, 10] => DnType::OrganizationName,
            [2, 5, 4, 11] => DnType::OrganizationalUnitName,
            [2, 5, 4, 6] => DnType::CountryName,
            [2, 5, 4, 8] => DnType::StateOrProvinceName,
            [2, 5, 4, 7] => DnType::LocalityName,
            _ => DnType::CustomDnType(arcs),
        };
        let s = attr
            .as_str()
            .map_err(|_| "subject attribute is not a string".to_string())?
            .to_string();
        let v = match attr.attr_value().tag() {
            Tag::Utf8String => DnValue::Utf8String(s),
            Tag::PrintableString => DnValue::PrintableString(
                s.try_into()
                    .map_err(|_| "invalid PrintableString in subject".to_string())?,
            ),
            other => return Err(format!("subject string type {other} is not supported")),
        };
        out.push((t, v));
    }
    Ok(out)
}

fn dn_of(c: &x509_parser::certificate::X509Certificate<'_>) -> Result<DistinguishedName, String> {
    dn_entries(c).map(|e| dn(&e))
}

fn issued(
    cert_path: PathBuf,
    key_path: PathBuf,
    der: &[u8],
    ca: &Ca,
) -> Result<IssuedCert, IssueError> {
    let parsed = cert::parse(der).map_err(|_| IssueError::IssuerMismatch)?;
    Ok(IssuedCert {
        cert_path,
        key_path,
        fingerprint: cert::fingerprint(der),
        subject: cert::subject(&parsed),
        not_after: cert::not_after(&parsed),
        issuer_fingerprint: cert::fingerprint(&ca.der),
    })
}

pub(crate) fn write_key(path: &Path, key: &KeyPair) -> Result<(), IssueError> {
    write_new(path, key.serialize_pem().as_bytes(), KEY_MODE).map_err(|source| {
        if source.kind() == io::ErrorKind::AlreadyExists {
            IssueError::AlreadyExists {
                path: path.to_path_buf(),
            }
        } else {
            IssueError::Io {
                path: path.to_path_buf(),
                source,
            }
        }
    })
}

pub(crate) fn write_cert(path: &Path, pem: &str) -> Result<(), IssueError> {
    crate::fsutil::write_atomic(path, pem.as_bytes(), PUBLIC_MODE).map_err(io_err(path))
}
