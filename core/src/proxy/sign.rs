//! The sign proxy: Ed25519 signatures by keys that never leave the core.
//!
//! One key per name (`[a-z0-9_-]{1,64}`, chosen by the dispatcher, for example the skill's
//! name), stored as PKCS#8 in `<dir>/<name>.pk8`. A key is created on first use: written
//! to a temporary file created with mode 0600, synced, then linked into place with
//! `link(2)`, which (unlike `rename`) never replaces a key another signer created in the
//! meantime; the loser of such a race uses the winner's key. The directory is 0700, and a
//! key file that group or others can access is refused. Key bytes are never logged or
//! returned; `Debug` of [`Signer`] prints `***` for them.
//!
//! `message` and `transaction` requests are signed the same way: the raw bytes of `data`
//! (base64, at most 64 KiB decoded), so anyone can verify them with the public key.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{Ed25519KeyPair, KeyPair as _};
use skillbox_protocol::methods::{SignParams, SignResult};

use super::ProxyError;

const CAP: &str = "sign";

/// Largest payload a skill may have signed: 64 KiB (decoded).
pub const MAX_SIGN_BYTES: usize = 64 * 1024;

/// The `algorithm` of every [`SignResult`].
pub const ALGORITHM: &str = "ed25519";

/// Why the key store failed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The key name is not `[a-z0-9_-]{1,64}`.
    #[error("key name {name:?} is not valid: use 1 to 64 characters of a-z, 0-9, _ and -")]
    BadKeyName {
        /// The name given.
        name: String,
    },
    /// The key directory could not be created or restricted to 0700.
    #[error("cannot create the key directory {dir}: {source}")]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A key file could not be read.
    #[error("cannot read the key file {path}: {source}")]
    ReadKey {
        /// The key file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A new key could not be written.
    #[error("cannot write the key file {path}: {source}")]
    WriteKey {
        /// The key file (or its temporary file).
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A key file is accessible to group or others.
    #[error("key file {path} has mode {mode:o}; it must be readable by the core's user only (chmod 600 it)")]
    InsecureKeyFile {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A key file does not hold an Ed25519 PKCS#8 key.
    #[error("key file {path} is not an Ed25519 PKCS#8 key; restore it from a backup or move it away to create a new key")]
    BadKey {
        /// The key file.
        path: PathBuf,
    },
    /// The system random generator failed while creating a key.
    #[error("generating a new Ed25519 key failed (system random generator)")]
    Generate,
}

/// Holds the signing keys; see the module docs.
pub struct Signer {
    dir: PathBuf,
    /// Serializes key creation within this process.
    create: Mutex<()>,
    rng: SystemRandom,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("dir", &self.dir)
            .field("keys", &"***")
            .finish()
    }
}

impl Signer {
    /// Opens (creating it with mode 0700 if needed) the key directory `dir`.
    ///
    /// # Errors
    /// [`SignError::CreateDir`] when the directory cannot be created or restricted.
    pub fn open(dir: PathBuf) -> Result<Self, SignError> {
        let create_err = |source| SignError::CreateDir {
            dir: dir.clone(),
            source,
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(create_err)?;
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).map_err(create_err)?;
        Ok(Self {
            dir,
            create: Mutex::new(()),
            rng: SystemRandom::new(),
        })
    }

    /// Signs the bytes of `req.data` with the key `key_name`, creating the key on first use.
    ///
    /// # Errors
    /// `InvalidParams` for data that is not base64, `TooLarge` past [`MAX_SIGN_BYTES`],
    /// [`ProxyError::Sign`] when the key name is bad or the key store fails.
    pub fn sign(&self, key_name: &str, req: &SignParams) -> Result<SignResult, ProxyError> {
        let data = decode_data(&req.data)?;
        let pair = self.key_pair(key_name)?;
        let signature = pair.sign(&data);
        Ok(SignResult {
            signature: STANDARD.encode(signature.as_ref()),
            public_key: STANDARD.encode(pair.public_key().as_ref()),
            algorithm: ALGORITHM.into(),
        })
    }

    /// The raw 32-byte Ed25519 public key of `key_name`, creating the key on first use.
    ///
    /// # Errors
    /// A [`SignError`] when the key name is bad or the key cannot be read or created.
    pub fn public_key(&self, key_name: &str) -> Result<Vec<u8>, SignError> {
        Ok(self.key_pair(key_name)?.public_key().as_ref().to_vec())
    }

    fn key_path(&self, key_name: &str) -> Result<PathBuf, SignError> {
        let valid = (1..=64).contains(&key_name.len())
            && key_name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if !valid {
            return Err(SignError::BadKeyName {
                name: key_name.to_string(),
            });
        }
        Ok(self.dir.join(format!("{key_name}.pk8")))
    }

    fn key_pair(&self, key_name: &str) -> Result<Ed25519KeyPair, SignError> {
        let path = self.key_path(key_name)?;
        if let Some(pair) = load(&path)? {
            return Ok(pair);
        }
        let _guard = self.create.lock().unwrap_or_else(|e| e.into_inner());
        // Another thread may have created it while this one waited.
        if let Some(pair) = load(&path)? {
            return Ok(pair);
        }
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&self.rng).map_err(|_| SignError::Generate)?;
        match self.install(&path, key_name, pkcs8.as_ref())? {
            true => Ed25519KeyPair::from_pkcs8(pkcs8.as_ref())
                .map_err(|_| SignError::BadKey { path: path.clone() }),
            // Another process created the key first: use it.
            false => load(&path)?.ok_or_else(|| SignError::ReadKey {
                path,
                source: io::ErrorKind::NotFound.into(),
            }),
        }
    }

    /// Writes `pkcs8` to `path` unless a key is already there; `false` when one was.
    fn install(&self, path: &Path, key_name: &str, pkcs8: &[u8]) -> Result<bool, SignError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let tmp = self.dir.join(format!(
            ".{key_name}.pk8.tmp-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let write_err = |source| SignError::WriteKey {
            path: tmp.clone(),
            source,
        };
        let written = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
            .and_then(|mut f| {
                f.write_all(pkcs8)?;
                f.sync_all()
            });
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(write_err(e));
        }
        let linked = fs::hard_link(&tmp, path);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => {
                // Make the new name durable; a failure here does not lose the key in use.
                if let Ok(dir) = File::open(&self.dir) {
                    let _ = dir.sync_all();
                }
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(source) => Err(SignError::WriteKey {
                path: path.to_path_buf(),
                source,
            }),
        }
    }
}

/// The key at `path`, or `None` when there is none yet.
fn load(path: &Path) -> Result<Option<Ed25519KeyPair>, SignError> {
    let read_err = |source| SignError::ReadKey {
        path: path.to_path_buf(),
        source,
    };
    let mut file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e)),
    };
    let meta = file.metadata().map_err(read_err)?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(SignError::InsecureKeyFile {
            path: path.to_path_buf(),
            mode,
        });
    }
    // A PKCS#8 Ed25519 key is under 100 bytes; read a little more to detect junk.
    let mut bytes = Vec::new();
    (&mut file)
        .take(4096)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    Ed25519KeyPair::from_pkcs8(&bytes)
        .map(Some)
        .map_err(|_| SignError::BadKey {
            path: path.to_path_buf(),
        })
}

fn decode_data(data: &str) -> Result<Vec<u8>, ProxyError> {
    let too_large = || ProxyError::TooLarge {
        capability: CAP,
        what: "data",
        limit: MAX_SIGN_BYTES as u64,
    };
    // Refuse before decoding what cannot fit: base64 is 4 characters per 3 bytes.
    if data.len() > MAX_SIGN_BYTES.div_ceil(3) * 4 {
        return Err(too_large());
    }
    let bytes = STANDARD.decode(data).map_err(|e| {
        ProxyError::invalid(
            CAP,
            format!("data is not standard base64 ({e}); encode the bytes to sign with base64"),
        )
    })?;
    if bytes.len() > MAX_SIGN_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{UnparsedPublicKey, ED25519};
    use skillbox_protocol::methods::SignType;

    fn params(kind: SignType, data: &[u8]) -> SignParams {
        SignParams {
            kind,
            data: STANDARD.encode(data),
        }
    }

    fn signer() -> (tempfile::TempDir, Signer) {
        let root = tempfile::tempdir().unwrap();
        let signer = Signer::open(root.path().join("keys")).unwrap();
        (root, signer)
    }

    fn verify(result: &SignResult, data: &[u8]) -> bool {
        let pk = STANDARD.decode(&result.public_key).unwrap();
        let sig = STANDARD.decode(&result.signature).unwrap();
        UnparsedPublicKey::new(&ED25519, pk)
            .verify(data, &sig)
            .is_ok()
    }

    #[test]
    fn sign_signature_verifies_with_public_key() {
        let (_root, s) = signer();
        for kind in [SignType::Message, SignType::Transaction] {
            let r = s.sign("wallet", &params(kind, b"pay 5 to bob")).unwrap();
            assert_eq!(r.algorithm, "ed25519");
            assert!(verify(&r, b"pay 5 to bob"));
            assert!(!verify(&r, b"pay 500 to bob"));
            assert_eq!(
                STANDARD.decode(&r.public_key).unwrap(),
                s.public_key("wallet").unwrap()
            );
        }
        assert!(verify(
            &s.sign("wallet", &params(SignType::Message, b"")).unwrap(),
            b""
        ));
    }

    #[test]
    fn sign_key_file_is_mode_0600_in_0700_dir() {
        let (root, s) = signer();
        s.public_key("k1").unwrap();
        let dir = root.path().join("keys");
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("k1.pk8")), 0o600);
        // No temporary file is left behind.
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["k1.pk8"]);
    }

    #[test]
    fn sign_reuses_key_across_signer_instances() {
        let (root, s) = signer();
        let first = s.sign("skill-a", &params(SignType::Message, b"x")).unwrap();
        let again = Signer::open(root.path().join("keys")).unwrap();
        let second = again
            .sign("skill-a", &params(SignType::Message, b"y"))
            .unwrap();
        assert_eq!(first.public_key, second.public_key);
        assert!(verify(&second, b"y"));
        // Another name is another key.
        assert_ne!(
            again.public_key("skill-b").unwrap(),
            again.public_key("skill-a").unwrap()
        );
    }

    #[test]
    fn sign_creates_one_key_under_concurrent_first_use() {
        let (_root, s) = signer();
        let keys: Vec<Vec<u8>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| s.public_key("race").unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(keys.windows(2).all(|w| w[0] == w[1]));
    }

    #[test]
    fn sign_refuses_invalid_base64() {
        let (_root, s) = signer();
        for data in ["not base64!", "AAA", "QUJD\n", "QUJD===="] {
            let req = SignParams {
                kind: SignType::Message,
                data: data.to_string(),
            };
            match s.sign("k", &req) {
                Err(ProxyError::InvalidParams { reason, .. }) => {
                    assert!(reason.contains("not standard base64"), "{data:?}: {reason}")
                }
                other => panic!("{data:?}: expected InvalidParams, got {other:?}"),
            }
        }
    }

    #[test]
    fn sign_refuses_oversize_data() {
        let (_root, s) = signer();
        assert!(s
            .sign("k", &params(SignType::Message, &[7; MAX_SIGN_BYTES]))
            .is_ok());
        let err = s
            .sign(
                "k",
                &params(SignType::Transaction, &[7; MAX_SIGN_BYTES + 1]),
            )
            .unwrap_err();
        assert!(
            matches!(
                err,
                ProxyError::TooLarge {
                    what: "data",
                    limit: 65536,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn sign_refuses_bad_key_name() {
        let (root, s) = signer();
        let long = "a".repeat(65);
        for name in [
            "",
            "Wallet",
            "../escape",
            "a/b",
            "a.b",
            "a b",
            long.as_str(),
        ] {
            let err = s.sign(name, &params(SignType::Message, b"x")).unwrap_err();
            assert!(
                matches!(err, ProxyError::Sign(SignError::BadKeyName { .. })),
                "{name:?}: {err:?}"
            );
            assert!(err.to_string().contains("a-z, 0-9, _ and -"), "{err}");
        }
        assert!(!root.path().join("escape.pk8").exists());
        assert!(s.public_key(&"a".repeat(64)).is_ok());
    }

    #[test]
    fn sign_refuses_group_readable_key_file() {
        let (root, s) = signer();
        s.public_key("k").unwrap();
        let path = root.path().join("keys/k.pk8");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let err = s.sign("k", &params(SignType::Message, b"x")).unwrap_err();
        assert!(
            matches!(
                err,
                ProxyError::Sign(SignError::InsecureKeyFile { mode: 0o644, .. })
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("chmod 600"), "{err}");
    }

    #[test]
    fn sign_refuses_corrupt_key_file_without_replacing_it() {
        let (root, s) = signer();
        let path = root.path().join("keys/k.pk8");
        fs::write(&path, b"junk").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let err = s.public_key("k").unwrap_err();
        assert!(matches!(err, SignError::BadKey { .. }), "{err:?}");
        assert_eq!(fs::read(&path).unwrap(), b"junk");
    }

    #[test]
    fn signer_debug_masks_key_material() {
        let (root, s) = signer();
        s.public_key("k").unwrap();
        let pkcs8 = fs::read(root.path().join("keys/k.pk8")).unwrap();
        let dbg = format!("{s:?}");
        assert!(dbg.contains("***"), "{dbg}");
        assert!(!dbg.contains(&STANDARD.encode(&pkcs8)), "{dbg}");
        assert!(!dbg.contains(&format!("{pkcs8:?}")), "{dbg}");
    }

    #[test]
    fn sign_error_maps_to_internal_error() {
        let (_root, s) = signer();
        let obj = s
            .sign("BAD", &params(SignType::Message, b"x"))
            .unwrap_err()
            .to_error_object();
        assert_eq!(obj.code, skillbox_protocol::jsonrpc::code::INTERNAL_ERROR);
    }
}
