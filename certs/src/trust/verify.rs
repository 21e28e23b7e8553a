//! Verifying a package folder against the trust store. The checks run in this order and
//! the first failure is returned: signature file, algorithm, digest, signature, name,
//! version, developer certificate profile (basic constraints, key usage, EKU),
//! intermediates are CAs, validity of every certificate at `now`, chain to a current root
//! (rustls-webpki path building), retired root, root validity, revocation (by
//! fingerprint, issuer and serial, or public key).
//!
//! Validity is checked at `now` (install or re-verification time), not at `signed_at`:
//! there is no trusted timestamping yet, so `signed_at` is informative only.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use rustls_pki_types::{CertificateDer, TrustAnchor, UnixTime};
use x509_parser::certificate::X509Certificate;

use super::{Root, TrustStore, VerifyError};
use crate::cert;
use crate::digest::package_digest;
use crate::fsutil::unix_seconds;
use crate::signature::{read_signature, ALGORITHM};

/// OID 1.3.6.1.5.5.7.3.3 (id-kp-codeSigning), DER contents.
const CODE_SIGNING_OID: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x03];

/// What a successful verification established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// `sha256:<hex>` of the package (signed and recomputed).
    pub digest: String,
    /// The developer certificate's subject CN (or O).
    pub publisher: String,
    /// SHA-256 (hex) of the developer certificate's public key (SubjectPublicKeyInfo).
    pub publisher_key: String,
    /// SHA-256 (hex) of the developer certificate's DER.
    pub leaf_fingerprint: String,
    /// SHA-256 (hex) of the root the chain ends at.
    pub root_fingerprint: String,
    /// When the package says it was signed (Unix seconds, informative).
    pub signed_at: i64,
    /// Fingerprints of the verified path: leaf, intermediates, root.
    pub chain_fingerprints: Vec<String>,
    /// The root has an accepted successor: re-sign before it is retired.
    pub root_retiring: bool,
    /// The earliest notAfter on the path (Unix seconds): the package stops verifying then.
    pub not_after: i64,
}

impl TrustStore {
    /// Verifies the package in `dir` whose manifest says `manifest_name` and
    /// `manifest_version`, at time `now`.
    pub fn verify_package(
        &self,
        dir: &Path,
        manifest_name: &str,
        manifest_version: &str,
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let sig = read_signature(dir)?;
        if sig.algorithm != ALGORITHM {
            return Err(VerifyError::UnsupportedAlgorithm {
                algorithm: sig.algorithm,
            });
        }
        let ders = decode_chain(&sig.chain)?;
        let mut certs = Vec::with_capacity(ders.len());
        for (i, der) in ders.iter().enumerate() {
            certs.push(cert::parse(der).map_err(|e| VerifyError::BadChain {
                reason: format!("chain[{i}]: {e}"),
            })?);
        }
        let (leaf, intermediates) = match certs.split_first() {
            Some(split) => split,
            None => {
                return Err(VerifyError::MalformedSignature {
                    reason: "chain is empty".to_string(),
                })
            }
        };

        let actual = package_digest(dir)?.prefixed();
        if actual != sig.digest {
            return Err(VerifyError::DigestMismatch {
                signed: sig.digest,
                actual,
            });
        }

        let signature = base64::engine::general_purpose::STANDARD
            .decode(&sig.signature)
            .map_err(|_| VerifyError::MalformedSignature {
                reason: "signature is not base64".to_string(),
            })?;
        if !cert::p256_verify(leaf, &sig.signed_bytes(), &signature) {
            return Err(VerifyError::BadSignature);
        }

        if sig.name != manifest_name {
            return Err(VerifyError::NameMismatch {
                signed: sig.name,
                manifest: manifest_name.to_string(),
            });
        }
        if sig.version != manifest_version {
            return Err(VerifyError::VersionMismatch {
                signed: sig.version,
                manifest: manifest_version.to_string(),
            });
        }

        check_leaf_profile(leaf)?;
        for ca in intermediates {
            check_intermediate(ca)?;
        }
        let now_s = unix_seconds(now);
        for (c, der) in certs.iter().zip(&ders) {
            check_validity(c, der, now_s)?;
        }

        let (root_index, path_ders) = self.build_path(&ders, now)?;
        let root = &self.roots[root_index];
        let root_parsed = cert::parse(&root.der).map_err(|reason| VerifyError::BadChain {
            reason: format!("root: {reason}"),
        })?;
        check_validity(&root_parsed, &root.der, now_s)?;

        let chain_fingerprints = self.check_revocation(&path_ders, root)?;

        let not_after = certs
            .iter()
            .map(cert::not_after)
            .chain([root.info.not_after])
            .min()
            .unwrap_or(root.info.not_after);
        Ok(Verified {
            digest: actual,
            publisher: cert::publisher(leaf),
            publisher_key: cert::identity(&ders[0], leaf).spki_sha256,
            leaf_fingerprint: cert::fingerprint(&ders[0]),
            root_fingerprint: root.info.fingerprint.clone(),
            signed_at: sig.signed_at,
            chain_fingerprints,
            root_retiring: root.info.retiring,
            not_after,
        })
    }

    /// Refuses the package if any certificate of the path or its root is revoked, and
    /// returns the path's fingerprints: leaf, intermediates, root.
    fn check_revocation(
        &self,
        path_ders: &[Vec<u8>],
        root: &Root,
    ) -> Result<Vec<String>, VerifyError> {
        // Revocation names what the issuer signed (issuer and serial, public key), not only
        // the bytes presented, so a re-encoded copy of a revoked certificate is caught.
        let mut ids = Vec::with_capacity(path_ders.len() + 1);
        for (i, der) in path_ders.iter().enumerate() {
            let parsed = cert::parse(der).map_err(|e| VerifyError::BadChain {
                reason: format!("path[{i}]: {e}"),
            })?;
            ids.push((cert::subject(&parsed), cert::identity(der, &parsed)));
        }
        ids.push((root.info.subject.clone(), root.id.clone()));
        for (subject, id) in &ids {
            if let Some((r, by)) = self.revoked_match(id) {
                return Err(VerifyError::Revoked {
                    subject: subject.clone(),
                    fingerprint: id.fingerprint.clone(),
                    revoked: r.fingerprint.clone(),
                    by: by.describe(),
                    reason: r.reason.clone(),
                });
            }
        }
        Ok(ids.into_iter().map(|(_, id)| id.fingerprint).collect())
    }

    /// Builds a path from the leaf through the given intermediates to a current root.
    /// Returns the root's index and the DER of the leaf and of the intermediates used. If
    /// only a retired root completes the path, the error is `RetiredRoot`.
    fn build_path(
        &self,
        ders: &[Vec<u8>],
        now: SystemTime,
    ) -> Result<(usize, Vec<Vec<u8>>), VerifyError> {
        let since_epoch = now
            .duration_since(UNIX_EPOCH)
            .map_err(|_| VerifyError::BadChain {
                reason: "verification time is before 1970".to_string(),
            })?;
        let time = UnixTime::since_unix_epoch(since_epoch);
        let cert_ders: Vec<CertificateDer<'_>> = ders
            .iter()
            .map(|d| CertificateDer::from(d.as_slice()))
            .collect();
        let Some((leaf_der, inter_ders)) = cert_ders.split_first() else {
            return Err(VerifyError::UnknownRoot);
        };
        let leaf = webpki::EndEntityCert::try_from(leaf_der).map_err(map_webpki)?;
        // The leaf's EKU is checked exactly (codeSigning only) by `check_leaf_profile`;
        // here codeSigning is required of any certificate on the path that has an EKU.
        let usage = webpki::KeyUsage::required_if_present(CODE_SIGNING_OID);

        let (current, retired): (Vec<usize>, Vec<usize>) =
            (0..self.roots.len()).partition(|&i| !self.roots[i].info.retired);
        let attempt = |indices: &[usize]| {
            let anchors: Vec<TrustAnchor<'_>> = indices
                .iter()
                .map(|&i| self.roots[i].anchor.clone())
                .collect();
            leaf.verify_for_usage(
                webpki::ALL_VERIFICATION_ALGS,
                &anchors,
                inter_ders,
                time,
                usage,
                None,
                None,
            )
            .map(|path| {
                let anchor = path.anchor();
                let at = anchors
                    .iter()
                    .position(|a| a == anchor)
                    .and_then(|p| indices.get(p).copied());
                let mut path_ders = vec![leaf_der.as_ref().to_vec()];
                path_ders.extend(
                    path.intermediate_certificates()
                        .map(|c| c.der().as_ref().to_vec()),
                );
                (at, path_ders)
            })
        };

        match attempt(&current) {
            Ok((Some(index), fps)) => Ok((index, fps)),
            Ok((None, _)) => Err(VerifyError::UnknownRoot),
            Err(err) => match attempt(&retired) {
                Ok((Some(index), _)) => Err(VerifyError::RetiredRoot {
                    fingerprint: self.roots[index].info.fingerprint.clone(),
                }),
                _ => Err(map_webpki(err)),
            },
        }
    }
}

/// The developer certificate: not a CA, KeyUsage digitalSignature, EKU codeSigning only.
fn check_leaf_profile(leaf: &X509Certificate<'_>) -> Result<(), VerifyError> {
    let bad = |e: x509_parser::error::X509Error| VerifyError::BadChain {
        reason: format!("developer certificate: {e}"),
    };
    if cert::is_ca(leaf) {
        return Err(VerifyError::LeafIsCa);
    }
    match leaf.key_usage().map_err(bad)? {
        Some(ku) if ku.value.digital_signature() => {}
        _ => return Err(VerifyError::NoDigitalSignature),
    }
    let Some(eku) = leaf.extended_key_usage().map_err(bad)? else {
        return Err(VerifyError::NotCodeSigning);
    };
    let eku = eku.value;
    if !eku.code_signing {
        return Err(VerifyError::NotCodeSigning);
    }
    let named = [
        (eku.any, "anyExtendedKeyUsage"),
        (eku.server_auth, "serverAuth"),
        (eku.client_auth, "clientAuth"),
        (eku.email_protection, "emailProtection"),
        (eku.time_stamping, "timeStamping"),
        (eku.ocsp_signing, "OCSPSigning"),
    ];
    if let Some((_, purpose)) = named.iter().find(|(set, _)| *set) {
        return Err(VerifyError::ExtraKeyPurpose {
            purpose: (*purpose).to_string(),
        });
    }
    if let Some(oid) = eku.other.first() {
        return Err(VerifyError::ExtraKeyPurpose {
            purpose: oid.to_id_string(),
        });
    }
    Ok(())
}

/// An intermediate: cA=true, and keyCertSign when KeyUsage is present.
fn check_intermediate(ca: &X509Certificate<'_>) -> Result<(), VerifyError> {
    if !cert::is_ca(ca) {
        return Err(VerifyError::IntermediateNotCa);
    }
    match ca.key_usage() {
        Ok(Some(ku)) if !ku.value.key_cert_sign() => Err(VerifyError::IntermediateNotCa),
        Ok(_) => Ok(()),
        Err(e) => Err(VerifyError::BadChain {
            reason: format!("intermediate: {e}"),
        }),
    }
}

fn check_validity(c: &X509Certificate<'_>, der: &[u8], now: i64) -> Result<(), VerifyError> {
    let not_before = cert::not_before(c);
    let not_after = cert::not_after(c);
    if now < not_before {
        return Err(VerifyError::NotYetValid {
            subject: cert::subject(c),
            fingerprint: cert::fingerprint(der),
            not_before: cert::format_time(not_before),
            now: cert::format_time(now),
        });
    }
    if now > not_after {
        return Err(VerifyError::Expired {
            subject: cert::subject(c),
            fingerprint: cert::fingerprint(der),
            not_after: cert::format_time(not_after),
            now: cert::format_time(now),
        });
    }
    Ok(())
}

/// Maps a path-building failure to the check it belongs to.
fn map_webpki(err: webpki::Error) -> VerifyError {
    use webpki::Error as E;
    match err {
        // No trusted root by that name, or one by that name whose key did not sign the
        // chain (two operators' roots may well share a subject): either way the chain
        // does not lead to a root in the store.
        E::UnknownIssuer | E::InvalidSignatureForPublicKey => VerifyError::UnknownRoot,
        E::CaUsedAsEndEntity => VerifyError::LeafIsCa,
        E::EndEntityUsedAsCa => VerifyError::IntermediateNotCa,
        E::RequiredEkuNotFoundContext(_) => VerifyError::NotCodeSigning,
        E::CertExpired { .. } | E::CertNotValidYet { .. } => VerifyError::BadChain {
            reason: format!("a certificate on the path is outside its validity period ({err})"),
        },
        other => VerifyError::BadChain {
            reason: other.to_string(),
        },
    }
}

/// The DER of each PEM certificate of the signature's chain, leaf first.
fn decode_chain(chain: &[String]) -> Result<Vec<Vec<u8>>, VerifyError> {
    let mut ders = Vec::with_capacity(chain.len());
    for (i, pem) in chain.iter().enumerate() {
        let der =
            cert::single_pem_certificate(pem).map_err(|e| VerifyError::MalformedSignature {
                reason: format!("chain[{i}]: {e}"),
            })?;
        ders.push(der);
    }
    Ok(ders)
}
