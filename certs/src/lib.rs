//! `skillbox-certs`: code signing for skills.
//!
//! - [`digest`]: the canonical package digest (sorted listing of path, mode and SHA-256).
//! - [`signature`]: the `SIGNATURE` file, what it signs, and signing a package folder.
//! - [`trust`]: the trust store (roots, revocations, rotations, retirements) and package
//!   verification: digest, signature, name/version, certificate profile, chain, validity,
//!   revocation.
//! - [`issue`]: issuing roots, intermediates and developer certificates, rotating and
//!   retiring roots, revoking certificates.
//! - [`rotation`]: root rotation statements.
//!
//! Byte-exact formats are documented in `certs/README.md`. The core links this crate; the
//! executor never does.
#![forbid(unsafe_code)]

mod cert;
pub mod digest;
mod fsutil;
pub mod issue;
pub mod rotation;
pub mod signature;
pub mod trust;

pub use digest::{package_digest, DigestError, FileEntry, PackageDigest, SIGNATURE_FILE};
pub use fsutil::write_atomic;
pub use issue::{
    find_certificate, init_root, issue_developer, issue_intermediate, retire_root, revoke,
    rotate_root, IssueError, IssuedCert,
};
pub use rotation::{RotationRefusal, RotationStatement};
pub use signature::{read_signature, sign_package, PackageSignature, SignError};
pub use trust::{
    LoadWarning, Revocation, RootInfo, RootSource, TrustError, TrustStore, Verified, VerifyError,
};
