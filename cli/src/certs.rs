//! `skillbox certs ...`: the operator's code-signing CA in `<state>/ca/` (0700) and the
//! trust store in `<state>/trust/` (docs/signing-runbook.md). Private keys are written 0600 by
//! `skillbox-certs` and never printed: commands show paths and fingerprints only.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::json;
use skillbox_certs::trust::{RootSource, TrustStore};
use skillbox_certs::{
    init_root, issue_developer, issue_intermediate, retire_root, revoke, rotate_root, sign_package,
};
use skillbox_protocol::skill::{load_skill, LoadOutcome};

use super::{table, up};
use skillbox_core::skills::install::rfc3339;

/// Default validity of a root, in days.
pub const ROOT_DAYS: u32 = 3650;
/// Default validity of an intermediate, in days.
pub const INTERMEDIATE_DAYS: u32 = 1825;
/// Default validity of a developer certificate, in days.
pub const DEVELOPER_DAYS: u32 = 365;

/// `skillbox certs ...`
#[derive(Debug, Subcommand)]
pub enum CertsCommand {
    /// Create the root CA (<state>/ca/root.*) and trust it (<state>/trust/roots/).
    InitRoot(InitRootArgs),
    /// Issue a developer code-signing certificate and key for a publisher.
    Issue(IssueArgs),
    /// Issue an intermediate CA under the root; developer certificates then chain to it.
    IssueIntermediate(DaysArgs),
    /// List trusted roots (current, retiring, retired), revocations and refused rotations.
    List(ListArgs),
    /// Revoke a certificate (PEM file or SHA-256 fingerprint).
    Revoke(RevokeArgs),
    /// Make a new root, signed over by the current one (both trusted during the overlap).
    RotateRoot(DaysArgs),
    /// Stop trusting a root (after its skills were re-signed; see `skill verify --all`).
    RetireRoot(RetireArgs),
    /// Sign a skill folder: writes DIR/SIGNATURE over its name, version and digest.
    Sign(SignArgs),
    /// Make the core ↔ executor channel PKI in a folder, for orchestrator secrets (Swarm,
    /// Kubernetes): ca.pem, skillbox-core.{pem,key}, skillbox-executor.{pem,key}.
    Channel(ChannelArgs),
}

/// `certs channel`
#[derive(Debug, Args)]
pub struct ChannelArgs {
    /// The folder to write the five files to (made 0700 when missing; an existing file
    /// is never overwritten).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// The workspace whose state holds the CA and the trust store.
#[derive(Debug, Args)]
pub struct WorkspaceArg {
    /// The workspace (state in DIR/.skillbox), as for `skillbox up`.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
}

/// `certs init-root`
#[derive(Debug, Args)]
pub struct InitRootArgs {
    /// The root's common name.
    #[arg(long, default_value = "skillbox code-signing root")]
    cn: String,
    /// Validity in days.
    #[arg(long, default_value_t = ROOT_DAYS)]
    days: u32,
    #[command(flatten)]
    ws: WorkspaceArg,
}

/// `certs issue`
#[derive(Debug, Args)]
pub struct IssueArgs {
    /// The publisher's name (certificate subject).
    #[arg(long)]
    publisher: String,
    /// Validity in days.
    #[arg(long, default_value_t = DEVELOPER_DAYS)]
    days: u32,
    /// Where to write <publisher>.pem and <publisher>.key (default <state>/ca/developers).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    #[command(flatten)]
    ws: WorkspaceArg,
}

/// `certs issue-intermediate`, `certs rotate-root`
#[derive(Debug, Args)]
pub struct DaysArgs {
    /// Validity in days.
    #[arg(long)]
    days: Option<u32>,
    #[command(flatten)]
    ws: WorkspaceArg,
}

/// `certs list`
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    ws: WorkspaceArg,
}

/// `certs revoke`
#[derive(Debug, Args)]
pub struct RevokeArgs {
    /// A PEM certificate file or a SHA-256 fingerprint.
    cert: String,
    /// Why (kept in revoked.json).
    #[arg(long, default_value = "unspecified")]
    reason: String,
    #[command(flatten)]
    ws: WorkspaceArg,
}

/// `certs retire-root`
#[derive(Debug, Args)]
pub struct RetireArgs {
    /// The root's SHA-256 fingerprint (see `certs list`).
    fingerprint: String,
    #[command(flatten)]
    ws: WorkspaceArg,
}

/// `certs sign`
#[derive(Debug, Args)]
pub struct SignArgs {
    /// The skill folder (its manifest gives the name and version signed).
    dir: PathBuf,
    /// The developer certificate chain (PEM, from `certs issue`).
    #[arg(long, value_name = "FILE")]
    cert: PathBuf,
    /// The developer private key (PEM, from `certs issue`).
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
}

/// `<state>/ca` and `<state>/trust` of the workspace.
fn dirs(ws: &WorkspaceArg) -> anyhow::Result<(PathBuf, PathBuf)> {
    let ws = up::workspace(ws.workspace.as_deref())?;
    ws.ensure_state_dir()?;
    Ok((ws.ca_dir(), ws.trust_dir()))
}

/// Runs a `certs` subcommand; returns the exit code.
pub fn run(cmd: CertsCommand) -> anyhow::Result<u8> {
    match cmd {
        CertsCommand::InitRoot(a) => {
            let (ca, trust) = dirs(&a.ws)?;
            let root = init_root(&ca, &trust, &a.cn, a.days)?;
            println!("root created: {} ({})", root.subject, root.fingerprint);
            println!("  expires: {}", date(root.not_after));
            println!(
                "  key:     {} (0600, keep it offline if you can)",
                ca.join("root.key").display()
            );
            println!("  trusted: {}", trust.join("roots").display());
        }
        CertsCommand::Issue(a) => {
            let (ca, _) = dirs(&a.ws)?;
            let out = a.out.unwrap_or_else(|| ca.join("developers"));
            let issued = issue_developer(&ca, &a.publisher, a.days, &out)?;
            println!(
                "developer certificate for {}: {}",
                a.publisher, issued.fingerprint
            );
            println!("  certificate: {}", issued.cert_path.display());
            println!("  key:         {} (0600)", issued.key_path.display());
            println!("  expires:     {}", date(issued.not_after));
            println!(
                "sign with: skillbox certs sign DIR --cert {} --key {}",
                issued.cert_path.display(),
                issued.key_path.display()
            );
        }
        CertsCommand::IssueIntermediate(a) => {
            let (ca, _) = dirs(&a.ws)?;
            let issued = issue_intermediate(&ca, a.days.unwrap_or(INTERMEDIATE_DAYS))?;
            println!(
                "intermediate CA {} ({})",
                issued.subject, issued.fingerprint
            );
            println!("  certificate: {}", issued.cert_path.display());
            println!("  expires:     {}", date(issued.not_after));
        }
        CertsCommand::List(a) => return list(a),
        CertsCommand::Revoke(a) => {
            let (ca, trust) = dirs(&a.ws)?;
            let skills = up::workspace(a.ws.workspace.as_deref())?.skills_dir();
            // A fingerprint names one encoding only: find the certificate (CA folder,
            // installed skills' SIGNATURE files) to revoke it by issuer, serial and key.
            let r = revoke(&trust, &a.cert, &a.reason, &[&ca, &skills])?;
            println!("revoked {} ({})", r.fingerprint, r.reason);
            match (&r.issuer, &r.serial, &r.spki_sha256) {
                (Some(issuer), Some(serial), Some(spki)) => {
                    println!("  issuer: {issuer}  serial: {serial}");
                    println!("  public key (SPKI SHA-256): {spki}");
                }
                _ => println!(
                    "  warning: the certificate was not found (CA folder, installed skills), so it is revoked by fingerprint only and a re-encoded copy of it would not be caught; run `skillbox certs revoke CERT.pem` with its PEM file to complete the entry"
                ),
            }
            println!("Running cores disable skills signed under it within ~2 s (they watch the trust folder), on SIGHUP or on POST /v1/trust/reload; `skillbox skill verify --all` lists them.");
        }
        CertsCommand::RotateRoot(a) => {
            let (ca, trust) = dirs(&a.ws)?;
            let s = rotate_root(&ca, &trust, a.days.unwrap_or(ROOT_DAYS))?;
            println!(
                "new root {} accepted by a statement signed by the old root {}",
                s.new_root_fingerprint, s.old_root_fingerprint
            );
            println!(
                "Both roots verify during the overlap. Re-sign skills under the new root, check"
            );
            println!(
                "`skillbox skill verify --all`, then `skillbox certs retire-root {}`.",
                s.old_root_fingerprint
            );
        }
        CertsCommand::RetireRoot(a) => {
            let (_, trust) = dirs(&a.ws)?;
            retire_root(&trust, &a.fingerprint)?;
            println!(
                "retired root {}; packages chaining to it no longer verify",
                a.fingerprint
            );
        }
        CertsCommand::Sign(a) => sign(a)?,
        CertsCommand::Channel(a) => {
            let files = skillbox_core::state::pki::write_channel_set(&a.out)?;
            println!("channel PKI written (keys 0600; give each side only its own key):");
            for f in &files {
                println!("  {}", f.display());
            }
            println!(
                "the core needs ca.pem, skillbox-core.pem, skillbox-core.key ([executor] pki_dir);"
            );
            println!("each executor needs ca.pem, skillbox-executor.pem, skillbox-executor.key (--pki DIR)");
        }
    }
    Ok(0)
}

fn sign(a: SignArgs) -> anyhow::Result<()> {
    let skill = match load_skill(&a.dir) {
        LoadOutcome::Loaded(s) => s,
        LoadOutcome::Skipped(s) => {
            anyhow::bail!("{} does not load: {}", a.dir.display(), s.reason())
        }
        LoadOutcome::NotASkill => anyhow::bail!("{} is not a skill folder", a.dir.display()),
    };
    let Some(version) = skill.version.clone() else {
        anyhow::bail!(
            "{} has no version; add `version: X.Y.Z` to skill.yaml (signed skills need one)",
            skill.name
        );
    };
    let chain = std::fs::read_to_string(&a.cert)
        .with_context(|| format!("reading the certificate {}", a.cert.display()))?;
    let key = read_key(&a.key)?;
    let sig = sign_package(&a.dir, &skill.name, &version, &chain, &key)?;
    drop(key);
    println!("signed {} {version}: {}", skill.name, sig.digest);
    println!(
        "  wrote {}",
        a.dir.join(skillbox_certs::SIGNATURE_FILE).display()
    );
    Ok(())
}

/// Reads a private key without ever putting its bytes in an error message.
fn read_key(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading the key {}", path.display()))
}

fn date(unix: i64) -> String {
    let secs = u64::try_from(unix).unwrap_or(0);
    rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

fn list(a: ListArgs) -> anyhow::Result<u8> {
    let (ca, trust) = dirs(&a.ws)?;
    let store = TrustStore::load(&trust)?;
    let roots = store.roots();
    let state_of = |r: &skillbox_certs::RootInfo| {
        if r.retired {
            "retired"
        } else if r.retiring {
            "retiring"
        } else {
            "current"
        }
    };
    let source_of = |s: &RootSource| match s {
        RootSource::Configured => "configured".to_string(),
        RootSource::Rotated { from } => format!("rotated from {}", short(from)),
    };
    if a.json {
        let out = json!({
            "ca_dir": ca,
            "trust_dir": trust,
            "roots": roots.iter().map(|r| json!({
                "fingerprint": r.fingerprint,
                "subject": r.subject,
                "not_after": date(r.not_after),
                "source": source_of(&r.source),
                "state": state_of(r),
            })).collect::<Vec<_>>(),
            "revoked": store.revoked().iter().map(|r| json!({
                "fingerprint": r.fingerprint,
                "issuer": r.issuer,
                "serial": r.serial,
                "spki_sha256": r.spki_sha256,
                "reason": r.reason,
                "revoked_at": date(r.revoked_at),
                "subject": r.subject,
            })).collect::<Vec<_>>(),
            "warnings": store.warnings().iter().map(ToString::to_string).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }
    let rows: Vec<Vec<String>> = roots
        .iter()
        .map(|r| {
            vec![
                r.fingerprint.clone(),
                state_of(r).to_string(),
                date(r.not_after),
                source_of(&r.source),
                r.subject.clone(),
            ]
        })
        .collect();
    println!("roots ({}):", trust.display());
    print!(
        "{}",
        table::render(
            &["FINGERPRINT", "STATE", "EXPIRES", "SOURCE", "SUBJECT"],
            &rows
        )
    );
    let revoked = store.revoked();
    if !revoked.is_empty() {
        println!("\nrevoked:");
        for r in &revoked {
            println!(
                "  {} {} ({}) {}",
                r.fingerprint,
                date(r.revoked_at),
                r.reason,
                r.subject.as_deref().unwrap_or("")
            );
            match (&r.issuer, &r.serial, &r.spki_sha256) {
                (Some(issuer), Some(serial), Some(spki)) => {
                    println!(
                        "      issuer {issuer}, serial {serial}, key {}",
                        short(spki)
                    );
                }
                _ => println!(
                    "      by fingerprint only (revoke its PEM to catch re-encoded copies)"
                ),
            }
        }
    }
    for w in store.warnings() {
        println!("refused rotation statement {w}");
    }
    Ok(0)
}

fn short(fp: &str) -> &str {
    fp.get(..16).unwrap_or(fp)
}
