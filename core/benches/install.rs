//! Verified install of signed skill packages (docs/signing-runbook.md) through the library API, with
//! baselines measured in the same run so the figures read as ratios:
//!
//! - verify-and-install of a signed 1 MB, 10 MB and 100 MB package (one file of random,
//!   incompressible bytes, so the ratio cap is never near), from its `.tar.gz` (made by
//!   `pack`) and from its folder, each time into a fresh skills root; against a SHA-256 of
//!   the same bytes read from the file and a plain copy of the file;
//! - the re-verification of 500 installed small signed skills after a trust reload: what a
//!   reload runs (`discover` + `verify::enforce`: trust store load, digest, signature,
//!   chain, revocation of every installed skill) and `verify::verify_installed` alone,
//!   against the digests alone (`package_digest` of the 500 folders, which is also what the
//!   executor's registry load hashes).
//!
//! Prints a Markdown table and writes it to `target/install-bench.md`. Times are reported,
//! never asserted. Run: `cargo bench -p skillbox-core --bench install`
//! (`INSTALL_BENCH_QUICK=1` skips the 100 MB package).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use ring::rand::{SecureRandom, SystemRandom};
use skillbox_certs::trust::TrustStore;
use skillbox_core::skills::install::pack::pack;
use skillbox_core::skills::install::verify::{enforce, verify_installed, Status};
use skillbox_core::skills::install::{install, Limits, PublisherChange, TrustPolicy, CA_DIR};
use skillbox_protocol::skill::{discover, package_digest, DiscoveryOptions, InstallLock};

const MB: usize = 1_000_000;
const FLEET: usize = 500;

/// The workspace: state with a CA and a trust store, and a developer certificate.
struct Bench {
    dir: tempfile::TempDir,
    trust_dir: PathBuf,
    chain: String,
    key: String,
}

impl Bench {
    fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("skillbox-install-bench-")
            .tempdir()
            .unwrap();
        let state = dir.path().join(".skillbox");
        std::fs::create_dir_all(&state).unwrap();
        let trust_dir = state.join("trust");
        let ca = state.join(CA_DIR);
        skillbox_certs::init_root(&ca, &trust_dir, "bench root", 30).unwrap();
        let dev =
            skillbox_certs::issue_developer(&ca, "bench", 30, &dir.path().join("dev")).unwrap();
        Self {
            chain: std::fs::read_to_string(&dev.cert_path).unwrap(),
            key: std::fs::read_to_string(&dev.key_path).unwrap(),
            dir,
            trust_dir,
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A policy over a fresh skills root `roots/<name>`.
    fn policy(&self, name: &str) -> TrustPolicy {
        let skills_root = self.path().join("roots").join(name);
        std::fs::create_dir_all(&skills_root).unwrap();
        TrustPolicy {
            roots: vec![skills_root.clone()],
            skills_root,
            trust_dir: self.trust_dir.clone(),
            require_signed: true,
        }
    }

    /// A signed skill folder `name` with `payload` as `data/blob.bin` (when given).
    fn signed_skill(&self, name: &str, payload: Option<&[u8]>) -> PathBuf {
        let dir = self.path().join("packages").join(name);
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::write(
            dir.join("skill.yaml"),
            format!(
                "name: {name}\nversion: 1.0.0\ndescription: install bench skill {name}\n\
                 tools:\n  - name: run\n    description: prints ok\n    command: [\"sh\", \"scripts/run.sh\"]\n    protocol: plain\n"
            ),
        )
        .unwrap();
        let script = dir.join("scripts/run.sh");
        std::fs::write(&script, "#!/bin/sh\necho ok\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        if let Some(bytes) = payload {
            std::fs::create_dir_all(dir.join("data")).unwrap();
            std::fs::write(dir.join("data/blob.bin"), bytes).unwrap();
        }
        skillbox_certs::sign_package(&dir, name, "1.0.0", &self.chain, &self.key).unwrap();
        dir
    }
}

fn random_bytes(n: usize) -> Vec<u8> {
    let rng = SystemRandom::new();
    let mut out = vec![0u8; n];
    for chunk in out.chunks_mut(1 << 20) {
        rng.fill(chunk).unwrap();
    }
    out
}

/// SHA-256 of a file, read in 64 KiB blocks (as the package digest reads).
fn sha256_file(path: &Path) -> String {
    let mut f = std::fs::File::open(path).unwrap();
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        ctx.update(&buf[..n]);
    }
    ctx.finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Runs `f` `n` times (after `prepare`, untimed) and returns the median and the minimum.
fn measure(
    n: usize,
    mut prepare: impl FnMut(usize),
    mut f: impl FnMut(usize),
) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..n)
        .map(|i| {
            prepare(i);
            let t = Instant::now();
            f(i);
            t.elapsed()
        })
        .collect();
    times.sort();
    (times[times.len() / 2], times[0])
}

fn ms(d: Duration) -> String {
    let v = d.as_secs_f64() * 1e3;
    if v < 1.0 {
        format!("{:.0} µs", v * 1e3)
    } else {
        format!("{v:.1} ms")
    }
}

fn ratio(a: Duration, b: Duration) -> String {
    let r = a.as_secs_f64() / b.as_secs_f64();
    if r < 0.1 {
        format!("{r:.3}×")
    } else {
        format!("{r:.2}×")
    }
}

fn packages(bench: &Bench, report: &mut String) {
    let quick = std::env::var_os("INSTALL_BENCH_QUICK").is_some();
    report.push_str(
        "## Verify and install one signed package\n\n\
         One file of random bytes plus `skill.yaml` and a script, signed by a developer\n\
         certificate under the root; each install goes to a fresh skills root (extract or copy\n\
         into staging, digest, signature, chain, rename, lock). Median of n runs (min in brackets).\n\n\
         | package | n | .tar.gz bytes | install from .tar.gz | install from folder | SHA-256 of the bytes | plain copy | .tar.gz ÷ SHA-256 | folder ÷ (copy + SHA-256) |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let sizes: &[(usize, usize)] = if quick {
        &[(1, 15), (10, 7)]
    } else {
        &[(1, 15), (10, 7), (100, 3)]
    };
    for &(size, n) in sizes {
        let name = format!("blob-{size}mb");
        let dir = bench.signed_skill(&name, Some(&random_bytes(size * MB)));
        let archive = bench.path().join(format!("{name}.tar.gz"));
        pack(&dir, &archive).unwrap();
        let archive_bytes = std::fs::metadata(&archive).unwrap().len();
        let blob = dir.join("data/blob.bin");

        let run = |from: &Path, label: &str| {
            let roots: Vec<TrustPolicy> = (0..n)
                .map(|i| bench.policy(&format!("{name}-{label}-{i}")))
                .collect();
            let times = measure(
                n,
                |_| {},
                |i| {
                    let done = install(
                        from,
                        &roots[i],
                        Limits::default(),
                        SystemTime::now(),
                        PublisherChange::Refuse,
                    )
                    .unwrap_or_else(|e| panic!("install {name} refused: {e}"));
                    assert_eq!(done.name, name);
                },
            );
            for p in &roots {
                std::fs::remove_dir_all(&p.skills_root).unwrap();
            }
            times
        };
        let tar = run(&archive, "tar");
        let folder = run(&dir, "dir");
        let sha = measure(
            n,
            |_| {},
            |_| {
                std::hint::black_box(sha256_file(&blob));
            },
        );
        let copy_to = bench.path().join("copy.bin");
        let copy = measure(
            n,
            |_| {
                let _ = std::fs::remove_file(&copy_to);
            },
            |_| {
                std::fs::copy(&blob, &copy_to).unwrap();
            },
        );
        let _ = std::fs::remove_file(&copy_to);
        report.push_str(&format!(
            "| {size} MB | {n} | {archive_bytes} | {} ({}) | {} ({}) | {} | {} | {} | {} |\n",
            ms(tar.0),
            ms(tar.1),
            ms(folder.0),
            ms(folder.1),
            ms(sha.0),
            ms(copy.0),
            ratio(tar.0, sha.0),
            ratio(folder.0, copy.0 + sha.0),
        ));
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_file(&archive).unwrap();
    }
}

fn fleet(bench: &Bench, report: &mut String) {
    let policy = bench.policy("fleet");
    let t = Instant::now();
    for i in 0..FLEET {
        let name = format!("skill-{i:03}");
        let dir = bench.signed_skill(&name, None);
        install(
            &dir,
            &policy,
            Limits::default(),
            SystemTime::now(),
            PublisherChange::Refuse,
        )
        .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
    let setup = t.elapsed();
    let lock = InstallLock::read(&policy.skills_root).unwrap().unwrap();
    assert_eq!(lock.skills.len(), FLEET);
    let dirs: Vec<PathBuf> = lock
        .skills
        .keys()
        .map(|n| policy.skills_root.join(n))
        .collect();
    const N: usize = 5;

    let discovery = measure(
        N,
        |_| {},
        |_| {
            let c = discover(
                std::slice::from_ref(&policy.skills_root),
                DiscoveryOptions::default(),
            );
            assert_eq!(c.skills.len(), FLEET);
        },
    );
    let digests = measure(
        N,
        |_| {},
        |_| {
            for d in &dirs {
                std::hint::black_box(package_digest(d).unwrap());
            }
        },
    );
    let store_load = measure(
        N,
        |_| {},
        |_| {
            std::hint::black_box(TrustStore::load(&policy.trust_dir).unwrap());
        },
    );
    let verify = measure(
        N,
        |_| {},
        |_| {
            let store = TrustStore::load(&policy.trust_dir).unwrap();
            let reports = verify_installed(&policy, &lock, Ok(&store), SystemTime::now());
            assert!(reports.iter().all(|r| r.status == Status::Ok));
        },
    );
    let reload = measure(
        N,
        |_| {},
        |_| {
            let mut c = discover(
                std::slice::from_ref(&policy.skills_root),
                DiscoveryOptions::default(),
            );
            let disabled = enforce(&mut c, &policy, SystemTime::now());
            assert!(disabled.is_empty(), "{disabled:?}");
            assert_eq!(c.skills.len(), FLEET);
        },
    );
    report.push_str(&format!(
        "\n## Re-verify {FLEET} installed skills after a trust reload\n\n\
         {FLEET} small signed skills (3 files each) installed in one skills root (setup: {}\n\
         for the {FLEET} installs). Median of {N} runs (min in brackets).\n\n\
         | step | total | per skill | ÷ digests only |\n|---|---|---|---|\n",
        ms(setup)
    ));
    let per = |d: Duration| ms(d.div_f64(FLEET as f64));
    for (label, (med, min)) in [
        ("discovery only (`discover`)", discovery),
        ("digests only (`package_digest` × 500, baseline)", digests),
        ("trust store load (`TrustStore::load`)", store_load),
        (
            "`verify_installed` (store load, digest, signature, chain, revocation)",
            verify,
        ),
        (
            "reload as the core runs it (`discover` + `enforce`)",
            reload,
        ),
    ] {
        report.push_str(&format!(
            "| {label} | {} ({}) | {} | {} |\n",
            ms(med),
            ms(min),
            per(med),
            ratio(med, digests.0)
        ));
    }
}

fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    // target/<profile>/deps/install-xxxx → target
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().to_path_buf()
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let bench = Bench::new();
    let mut report = String::from("# Install benchmark\n\n");
    packages(&bench, &mut report);
    fleet(&bench, &mut report);
    print!("{report}");
    let out = target_dir().join("install-bench.md");
    match std::fs::write(&out, &report) {
        Ok(()) => println!("\nwritten to {}", out.display()),
        Err(e) => eprintln!("could not write {}: {e}", out.display()),
    }
}
