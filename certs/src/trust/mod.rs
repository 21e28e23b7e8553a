//! The trust store: the roots an operator trusts, the revocation list, rotation
//! statements and retired roots, loaded from one folder:
//!
//! ```text
//! <trust>/roots/*.pem          configured roots (CA certificates)
//! <trust>/rotations/*.json     rotation statements (new root signed by a trusted old one)
//! <trust>/revoked.json         revoked certificates (fingerprint, issuer + serial, key)
//! <trust>/retired.json         retired roots by fingerprint
//! ```
//!
//! [`TrustStore::verify_package`] (in `verify.rs`) checks a package against it.

mod error;
mod lists;
mod verify;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use rustls_pki_types::{CertificateDer, TrustAnchor};

pub use error::{TrustError, VerifyError};
pub use lists::{
    RetiredList, Retirement, Revocation, RevocationList, RevokedBy, RETIRED_FILE, REVOKED_FILE,
};
pub use verify::Verified;

pub(crate) use lists::read_list;

use crate::cert::{self, CertId};
use crate::rotation::{self, RotationRefusal};

/// Folder of configured roots inside the trust folder.
pub const ROOTS_DIR: &str = "roots";
/// Folder of rotation statements inside the trust folder.
pub const ROTATIONS_DIR: &str = "rotations";

/// How a root came to be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootSource {
    /// A file in `<trust>/roots/`.
    Configured,
    /// Accepted through a rotation statement signed by the root `from`.
    Rotated {
        /// SHA-256 (hex) of the signing (old) root.
        from: String,
    },
}

/// A root known to the trust store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootInfo {
    /// SHA-256 of the DER, lower-case hex.
    pub fingerprint: String,
    /// Subject, `CN=…`.
    pub subject: String,
    /// notAfter, Unix seconds.
    pub not_after: i64,
    /// How it came to be trusted.
    pub source: RootSource,
    /// A successor root was accepted through a rotation statement signed by this one:
    /// it is going away, packages that chain to it should be re-signed.
    pub retiring: bool,
    /// Listed in `retired.json`: packages that chain to it no longer verify.
    pub retired: bool,
}

/// A rotation statement the store refused (and ignored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadWarning {
    /// The refused statement file in `<trust>/rotations/`.
    pub file: PathBuf,
    /// Why it was refused.
    pub refusal: RotationRefusal,
}

impl fmt::Display for LoadWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.refusal)
    }
}

/// One root with what verification needs.
#[derive(Debug)]
struct Root {
    der: Vec<u8>,
    id: CertId,
    anchor: TrustAnchor<'static>,
    info: RootInfo,
}

impl Root {
    fn from_der(der: Vec<u8>, source: RootSource) -> Result<Root, String> {
        let parsed = cert::parse(&der)?;
        if !cert::is_ca(&parsed) {
            return Err(format!(
                "{} is not a CA certificate (basicConstraints cA)",
                cert::subject(&parsed)
            ));
        }
        let id = cert::identity(&der, &parsed);
        let info = RootInfo {
            fingerprint: id.fingerprint.clone(),
            subject: cert::subject(&parsed),
            not_after: cert::not_after(&parsed),
            source,
            retiring: false,
            retired: false,
        };
        let cert_der = CertificateDer::from(der.as_slice());
        let anchor = webpki::anchor_from_trusted_cert(&cert_der)
            .map_err(|e| format!("not usable as a trust anchor: {e}"))?
            .to_owned();
        Ok(Root {
            der,
            id,
            anchor,
            info,
        })
    }
}

/// The loaded trust store. Cheap to share behind an `Arc`; reload by loading anew.
pub struct TrustStore {
    dir: PathBuf,
    roots: Vec<Root>,
    revoked: BTreeMap<String, Revocation>,
    /// Rotation statements whose signature verified, old root → new roots.
    successors: BTreeMap<String, BTreeSet<String>>,
    warnings: Vec<LoadWarning>,
}

impl fmt::Debug for TrustStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrustStore")
            .field("dir", &self.dir)
            .field("roots", &self.roots())
            .field("revoked", &self.revoked.len())
            .field("warnings", &self.warnings)
            .finish()
    }
}

impl TrustStore {
    /// Loads `<trust_dir>`. Missing `roots/`, `rotations/` or lists count as empty; a
    /// root or list that does not parse is an error (fail closed). Refused rotation
    /// statements are logged and listed by [`TrustStore::warnings`].
    pub fn load(trust_dir: &Path) -> Result<TrustStore, TrustError> {
        if !trust_dir.is_dir() {
            return Err(TrustError::NotFound {
                path: trust_dir.to_path_buf(),
            });
        }
        let mut store = TrustStore {
            dir: trust_dir.to_path_buf(),
            roots: Vec::new(),
            revoked: BTreeMap::new(),
            successors: BTreeMap::new(),
            warnings: Vec::new(),
        };

        for path in files_with_ext(&trust_dir.join(ROOTS_DIR), "pem")? {
            let text = fs::read_to_string(&path).map_err(|source| TrustError::Read {
                path: path.clone(),
                source,
            })?;
            let ders = cert::pem_certificates(&text).map_err(|reason| TrustError::Root {
                path: path.clone(),
                reason,
            })?;
            if ders.is_empty() {
                return Err(TrustError::Root {
                    path,
                    reason: "no PEM CERTIFICATE block".to_string(),
                });
            }
            for der in ders {
                let root = Root::from_der(der, RootSource::Configured).map_err(|reason| {
                    TrustError::Root {
                        path: path.clone(),
                        reason,
                    }
                })?;
                if store.root(&root.info.fingerprint).is_none() {
                    store.roots.push(root);
                }
            }
        }

        let revoked_path = trust_dir.join(REVOKED_FILE);
        let list: RevocationList = lists::read_list(&revoked_path)?;
        for r in list.revoked {
            let r = lists::checked_revocation(&revoked_path, r)?;
            store.revoked.insert(r.fingerprint.clone(), r);
        }
        let retired_path = trust_dir.join(RETIRED_FILE);
        let list: RetiredList = lists::read_list(&retired_path)?;
        let mut retired = BTreeSet::new();
        for r in list.retired {
            retired.insert(lists::checked_fingerprint(&retired_path, &r.fingerprint)?);
        }

        store.accept_rotations(&trust_dir.join(ROTATIONS_DIR), &retired)?;
        for root in &mut store.roots {
            root.info.retired = retired.contains(&root.info.fingerprint);
            if root.info.retired {
                root.info.retiring = false;
            }
        }
        for w in &store.warnings {
            tracing::warn!(file = %w.file.display(), reason = %w.refusal, "rotation statement refused");
        }
        Ok(store)
    }

    /// An empty store: nothing verifies.
    pub fn empty() -> TrustStore {
        TrustStore {
            dir: PathBuf::new(),
            roots: Vec::new(),
            revoked: BTreeMap::new(),
            successors: BTreeMap::new(),
            warnings: Vec::new(),
        }
    }

    /// The folder this store was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every root known: configured ones, those accepted through rotation, and retired
    /// ones (flagged `retired`, they verify nothing).
    pub fn roots(&self) -> Vec<RootInfo> {
        self.roots.iter().map(|r| r.info.clone()).collect()
    }

    /// Rotation statements refused during the load, with the reason.
    pub fn warnings(&self) -> &[LoadWarning] {
        &self.warnings
    }

    /// The revocation list.
    pub fn revoked(&self) -> Vec<Revocation> {
        self.revoked.values().cloned().collect()
    }

    /// The revocation listed under this fingerprint, if any.
    pub fn revocation(&self, fingerprint: &str) -> Option<&Revocation> {
        self.revoked.get(fingerprint)
    }

    /// The revocation that names the certificate `id` (by fingerprint first, then by
    /// issuer and serial or public key), and by what.
    pub(crate) fn revoked_match(&self, id: &CertId) -> Option<(&Revocation, RevokedBy)> {
        if let Some(r) = self.revoked.get(&id.fingerprint) {
            return Some((r, RevokedBy::Fingerprint));
        }
        self.revoked
            .values()
            .find_map(|r| r.matches(id).map(|by| (r, by)))
    }

    /// Whether the roots `a` and `b` (fingerprints) are the same root or linked by
    /// rotation statements in this trust folder (either way, any number of steps): one
    /// operator's root across rotations.
    pub fn same_root_lineage(&self, a: &str, b: &str) -> bool {
        if a == b {
            return true;
        }
        let mut seen = BTreeSet::from([a.to_string()]);
        let mut pending = vec![a.to_string()];
        while let Some(fp) = pending.pop() {
            let next = self
                .successors
                .get(&fp)
                .into_iter()
                .flatten()
                .cloned()
                .chain(
                    self.successors
                        .iter()
                        .filter(|(_, new)| new.contains(&fp))
                        .map(|(old, _)| old.clone()),
                );
            for n in next.collect::<Vec<_>>() {
                if n == b {
                    return true;
                }
                if seen.insert(n.clone()) {
                    pending.push(n);
                }
            }
        }
        false
    }

    /// The PEM of a known root (configured, rotated or retired).
    pub fn root_pem(&self, fingerprint: &str) -> Option<String> {
        self.root(fingerprint).map(|r| cert::to_pem(&r.der))
    }

    fn root(&self, fingerprint: &str) -> Option<&Root> {
        self.roots
            .iter()
            .find(|r| r.info.fingerprint == fingerprint)
    }

    /// Accepts rotation statements whose signer is trusted, repeatedly, so a chain of
    /// rotations (A→B, B→C) resolves in any file order.
    fn accept_rotations(
        &mut self,
        dir: &Path,
        retired: &BTreeSet<String>,
    ) -> Result<(), TrustError> {
        let mut pending = self.read_rotations(dir)?;
        loop {
            let mut progress = false;
            let mut still = Vec::new();
            for (path, s) in pending {
                if self.root(&s.statement.new_root_fingerprint).is_some() {
                    // Already trusted (configured, or promoted when the signer retired):
                    // the statement still links the two roots when its signature holds.
                    progress = true;
                    let old = &s.statement.old_root_fingerprint;
                    let signed = self.root(old).is_some_and(|signer| {
                        cert::parse(&signer.der)
                            .map(|c| {
                                cert::p256_verify(&c, &s.statement.signed_bytes(), &s.signature)
                            })
                            .unwrap_or(false)
                    });
                    if signed {
                        self.successors
                            .entry(old.clone())
                            .or_default()
                            .insert(s.statement.new_root_fingerprint.clone());
                    }
                    continue;
                }
                let old = &s.statement.old_root_fingerprint;
                let Some(signer) = self
                    .root(old)
                    .filter(|r| !retired.contains(old) && self.revoked_match(&r.id).is_none())
                else {
                    still.push((path, s));
                    continue;
                };
                progress = true;
                let verified = cert::parse(&signer.der)
                    .map(|c| cert::p256_verify(&c, &s.statement.signed_bytes(), &s.signature))
                    .unwrap_or(false);
                if !verified {
                    self.warnings.push(LoadWarning {
                        file: path,
                        refusal: RotationRefusal::BadSignature {
                            fingerprint: old.clone(),
                        },
                    });
                    continue;
                }
                let source = RootSource::Rotated { from: old.clone() };
                match Root::from_der(s.new_der, source) {
                    Ok(root) => {
                        if let Some(signer) =
                            self.roots.iter_mut().find(|r| &r.info.fingerprint == old)
                        {
                            signer.info.retiring = true;
                        }
                        self.successors
                            .entry(old.clone())
                            .or_default()
                            .insert(root.info.fingerprint.clone());
                        self.roots.push(root);
                    }
                    Err(reason) => self.warnings.push(LoadWarning {
                        file: path,
                        refusal: RotationRefusal::Malformed { reason },
                    }),
                }
            }
            pending = still;
            if !progress || pending.is_empty() {
                break;
            }
        }
        self.refuse_unresolved(pending, retired);
        Ok(())
    }

    /// Reads every rotation statement of `dir`, keeping those of a valid shape and
    /// recording a refusal for the others.
    fn read_rotations(
        &mut self,
        dir: &Path,
    ) -> Result<Vec<(PathBuf, rotation::CheckedStatement)>, TrustError> {
        let mut pending = Vec::new();
        for path in files_with_ext(dir, "json")? {
            let bytes = fs::read(&path).map_err(|source| TrustError::Read {
                path: path.clone(),
                source,
            })?;
            match rotation::check_shape(&bytes) {
                Ok(s) => pending.push((path, s)),
                Err(refusal) => self.warnings.push(LoadWarning {
                    file: path,
                    refusal,
                }),
            }
        }
        Ok(pending)
    }

    /// Records why each statement still pending after resolution was refused: its signer
    /// retired, revoked, or unknown.
    fn refuse_unresolved(
        &mut self,
        pending: Vec<(PathBuf, rotation::CheckedStatement)>,
        retired: &BTreeSet<String>,
    ) {
        for (path, s) in pending {
            let fingerprint = s.statement.old_root_fingerprint;
            let refusal = if retired.contains(&fingerprint) && self.root(&fingerprint).is_some() {
                RotationRefusal::SignerRetired { fingerprint }
            } else if self
                .root(&fingerprint)
                .is_some_and(|r| self.revoked_match(&r.id).is_some())
            {
                RotationRefusal::SignerRevoked { fingerprint }
            } else {
                RotationRefusal::UnknownSigner { fingerprint }
            };
            self.warnings.push(LoadWarning {
                file: path,
                refusal,
            });
        }
    }
}

/// Regular files of `dir` ending in `.ext` (dot files skipped), sorted; a missing
/// folder has none.
fn files_with_ext(dir: &Path, ext: &str) -> Result<Vec<PathBuf>, TrustError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(TrustError::Read {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| TrustError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || path.extension().and_then(|e| e.to_str()) != Some(ext) {
            continue;
        }
        if path.is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}
