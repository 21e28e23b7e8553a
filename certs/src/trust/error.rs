//! Errors of verifying a package ([`VerifyError`]) and of loading the trust store
//! ([`TrustError`]). Every message starts with the name of the failed check and ends
//! with what to do.

use std::io;
use std::path::PathBuf;

use crate::digest::DigestError;

/// Why a package did not verify: one variant per check, in the order the checks run.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("signature_file: the package has no SIGNATURE file; sign it with `skillbox certs sign DIR --cert C --key K`")]
    /// The package folder has no `SIGNATURE` file.
    MissingSignature,
    #[error("signature_file: cannot read SIGNATURE: {source}; check the package's permissions")]
    /// `SIGNATURE` exists but could not be read.
    ReadSignature {
        /// The I/O error from reading it.
        #[source]
        source: io::Error,
    },
    #[error("signature_file: SIGNATURE is malformed ({reason}); sign the package again with `skillbox certs sign`")]
    /// `SIGNATURE` is not well-formed (not a regular file, too large, not valid JSON,
    /// or a field of the wrong shape).
    MalformedSignature {
        /// What is wrong with it.
        reason: String,
    },
    #[error("algorithm: SIGNATURE uses algorithm {algorithm:?}, only \"ecdsa-p256-sha256\" is accepted; sign again with `skillbox certs sign`")]
    /// `SIGNATURE` names an algorithm other than `ecdsa-p256-sha256`.
    UnsupportedAlgorithm {
        /// The algorithm it names.
        algorithm: String,
    },
    #[error(transparent)]
    /// The package's files could not be hashed.
    Digest(#[from] DigestError),
    #[error("digest: the files do not match the signed digest (signed {signed}, files hash to {actual}); a file was added, removed, changed or had its mode changed after signing; get an untampered copy or sign again")]
    /// The package's files no longer hash to the digest that was signed.
    DigestMismatch {
        /// The digest recorded in `SIGNATURE` (`sha256:<hex>`).
        signed: String,
        /// The digest of the files as they are now (`sha256:<hex>`).
        actual: String,
    },
    #[error("signature: the signature does not verify with the developer certificate's key; the SIGNATURE was altered or made with another key; sign again")]
    /// The signature does not verify with the developer certificate's public key.
    BadSignature,
    #[error("name: the package is signed as {signed:?} but its manifest names {manifest:?}; sign it under the manifest's name")]
    /// The skill name in `SIGNATURE` differs from the manifest's.
    NameMismatch {
        /// The name in `SIGNATURE`.
        signed: String,
        /// The name in the manifest.
        manifest: String,
    },
    #[error("version: the package is signed as version {signed:?} but its manifest says {manifest:?}; sign it under the manifest's version")]
    /// The skill version in `SIGNATURE` differs from the manifest's.
    VersionMismatch {
        /// The version in `SIGNATURE`.
        signed: String,
        /// The version in the manifest.
        manifest: String,
    },
    #[error("basic_constraints: the developer certificate is a CA certificate (cA=true); issue a developer certificate with `skillbox certs issue`")]
    /// The developer (leaf) certificate is a CA certificate.
    LeafIsCa,
    #[error("key_usage: the developer certificate does not allow digitalSignature; issue a developer certificate with `skillbox certs issue`")]
    /// The developer certificate's key usage does not include digitalSignature.
    NoDigitalSignature,
    #[error("eku: the developer certificate does not carry the codeSigning extended key usage; issue a developer certificate with `skillbox certs issue`")]
    /// The developer certificate has no extended key usage, or one without codeSigning.
    NotCodeSigning,
    #[error("eku: the developer certificate also allows {purpose}; code-signing certificates must allow codeSigning only, issue one with `skillbox certs issue`")]
    /// The developer certificate allows an extended key usage besides codeSigning.
    ExtraKeyPurpose {
        /// The extra purpose: its name (e.g. `serverAuth`) or, if unnamed, its OID.
        purpose: String,
    },
    #[error("basic_constraints: an intermediate certificate of the chain is not a CA (cA=true, keyCertSign); put only the issuing CA certificates after the developer certificate")]
    /// A certificate between the developer certificate and the root is not a CA or
    /// may not sign certificates.
    IntermediateNotCa,
    #[error("validity: the certificate {subject} ({fingerprint}) is not valid before {not_before} and it is {now}; check the clock or wait until it becomes valid")]
    /// A certificate on the chain is not valid yet.
    NotYetValid {
        /// Subject of that certificate.
        subject: String,
        /// SHA-256 (hex) of its DER.
        fingerprint: String,
        /// Its notBefore, RFC 3339 UTC.
        not_before: String,
        /// The verification time, RFC 3339 UTC.
        now: String,
    },
    #[error("validity: the certificate {subject} ({fingerprint}) expired at {not_after} and it is {now}; validity is checked at install time, ask the publisher to re-sign with a current certificate")]
    /// A certificate on the chain has expired.
    Expired {
        /// Subject of that certificate.
        subject: String,
        /// SHA-256 (hex) of its DER.
        fingerprint: String,
        /// Its notAfter, RFC 3339 UTC.
        not_after: String,
        /// The verification time, RFC 3339 UTC.
        now: String,
    },
    #[error("chain: the certificate chain does not lead to a root in the trust store; add the publisher's root to <trust>/roots/ or get a certificate from a trusted root")]
    /// No path leads from the developer certificate to a root in the trust store.
    UnknownRoot,
    #[error("retired_root: the chain ends at root {fingerprint}, which the operator retired; ask the publisher to re-sign under a current root")]
    /// The chain leads only to a root the operator retired.
    RetiredRoot {
        /// SHA-256 (hex) of the retired root.
        fingerprint: String,
    },
    #[error("chain: the certificate chain is invalid ({reason}); get a chain issued by `skillbox certs issue`")]
    /// The chain is invalid for another reason (unparsable certificate, bad signature
    /// on the path, unsupported name or extension, ...).
    BadChain {
        /// What is wrong with it.
        reason: String,
    },
    #[error("revocation: the certificate {subject} ({fingerprint}) on the chain is revoked ({reason}); it matches the revoked certificate {revoked} by {by}; ask the publisher to re-sign with a new certificate")]
    /// A certificate on the chain (root included) is on the revocation list.
    Revoked {
        /// Subject of the certificate on the chain.
        subject: String,
        /// SHA-256 of its DER as presented.
        fingerprint: String,
        /// The revocation list's entry (its fingerprint) that names it.
        revoked: String,
        /// What matched: `fingerprint`, `issuer and serial number` or `public key`.
        by: &'static str,
        /// The operator's reason.
        reason: String,
    },
}

impl VerifyError {
    /// Short name of the failed check: `signature_file`, `algorithm`, `digest`,
    /// `signature`, `name`, `version`, `basic_constraints`, `key_usage`, `eku`,
    /// `validity`, `chain`, `retired_root` or `revocation`.
    pub fn check(&self) -> &'static str {
        match self {
            Self::MissingSignature
            | Self::ReadSignature { .. }
            | Self::MalformedSignature { .. } => "signature_file",
            Self::UnsupportedAlgorithm { .. } => "algorithm",
            Self::Digest(_) | Self::DigestMismatch { .. } => "digest",
            Self::BadSignature => "signature",
            Self::NameMismatch { .. } => "name",
            Self::VersionMismatch { .. } => "version",
            Self::LeafIsCa | Self::IntermediateNotCa => "basic_constraints",
            Self::NoDigitalSignature => "key_usage",
            Self::NotCodeSigning | Self::ExtraKeyPurpose { .. } => "eku",
            Self::NotYetValid { .. } | Self::Expired { .. } => "validity",
            Self::UnknownRoot | Self::BadChain { .. } => "chain",
            Self::RetiredRoot { .. } => "retired_root",
            Self::Revoked { .. } => "revocation",
        }
    }
}

/// Why the trust store could not be loaded. A refused rotation statement is not an
/// error: it is logged and listed by [`super::TrustStore::warnings`].
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("trust store: {} is not a folder; create it with `skillbox certs init-root` or point the config at it", path.display())]
    /// The trust folder does not exist or is not a folder.
    NotFound {
        /// The trust folder.
        path: PathBuf,
    },
    #[error("trust store: cannot read {}: {source}; check its permissions", path.display())]
    /// A file or folder of the trust store could not be read.
    Read {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    #[error("trust store: root file {}: {reason}; fix or remove it", path.display())]
    /// A file in `roots/` holds no certificate or one that is not a usable CA root.
    Root {
        /// The root file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    #[error("trust store: {} is malformed ({reason}); fix it or restore it from a backup", path.display())]
    /// `revoked.json` or `retired.json` does not parse or holds an invalid entry.
    List {
        /// The list file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}
