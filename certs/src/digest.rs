//! The canonical package digest: SHA-256 over a sorted listing of every regular file's
//! path, mode and SHA-256 (the top-level `SIGNATURE` excluded). The listing format is
//! documented byte for byte in `certs/README.md`.
//!
//! The implementation lives in `skillbox_protocol::skill::digest` and is re-exported here
//! unchanged: the digest is part of the package format, and the executor must check
//! installed skills against the install lock without linking this crate (ARCHITECTURE).

pub use skillbox_protocol::skill::digest::{
    canonical_listing, package_digest, DigestError, FileEntry, PackageDigest, DIGEST_VERSION_LINE,
    SIGNATURE_FILE,
};
