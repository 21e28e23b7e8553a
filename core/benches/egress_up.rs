//! The egress path as a program in a call's sandbox sees it, against the same program on
//! the host, measured side by side in one run (docs/hot-path.md, "Egress as a program sees
//! it", keeps the results). Unlike `benches/egress.rs` (the proxy in-process), this starts
//! the real `skillbox up` (release binaries in the target dir) and runs `curl` through
//! `exec_command` in the context of a skill that declares the test servers: the call's
//! network namespace, the executor's relay, the mutual-TLS stream to the core and the
//! core's egress proxy are all on the path. Writes `target/egress-up-bench.md`.
//!
//! Run: `cargo build --release --workspace && cargo bench -p skillbox-core --bench
//! egress_up` (`EGRESS_MB` the download's size in MiB, default 100; `EGRESS_ROUNDS`
//! rounds of the downloads, default 5; `EGRESS_N` requests of each latency series,
//! default 100).
//!
//! The servers (threads of this process, on 127.0.0.1): plain HTTP and TLS 1.3 (rustls,
//! a certificate for `data.test` from a CA of the bench's own, which `[egress]
//! extra_roots` trusts), each answering `/big` with the whole download and anything else
//! with 5 bytes, one request per connection. The workspace pins `data.test` to 127.0.0.1
//! (`[egress] resolve`) and allows both ports (`[fetch] allow_private`).
//!
//! Series, one `curl` per round or per latency series, its own `time_total` read (not the
//! process start nor the call around it), rounds interleaved after one of warm-up:
//! - `http direct` / `http sandbox` — `GET http://data.test:PORT/big` (on the host with
//!   `--resolve`, in the sandbox by its proxy);
//! - `https direct` / `https sandbox` — the same over TLS (the sandbox's `CONNECT`
//!   tunnel);
//! - the small series: `EGRESS_N` URLs of `/small` in one `curl`, each its own
//!   connection, p50 and p90 of their `time_total`, direct and in the sandbox.
//!
//! The host's `curl` is given the same trust as the sandbox's: the system bundle plus the
//! bench's CA (OpenSSL 3 parses the whole bundle for each connection; a one-certificate
//! file would hide that cost from the baseline).
//!
//! Nothing here asserts a time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "roundtrip/client.rs"]
mod client;
#[allow(dead_code)]
#[path = "roundtrip/setup.rs"]
mod setup;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use client::KeptBot;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use setup::{start_up, workspace};

const NAME: &str = "data.test";
const SMALL: &[u8] = b"hello";

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Answers one request on `io`: `/big` → `big`, anything else → [`SMALL`].
fn answer<S: Read + Write>(mut io: S, big: &[u8]) {
    let mut head = Vec::new();
    let mut chunk = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match io.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
    }
    let path = head.split(|b| *b == b' ').nth(1).unwrap_or_default();
    let body = if path == b"/big" { big } else { SMALL };
    let out = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if io.write_all(out.as_bytes()).is_ok() {
        let _ = io.write_all(body);
        let _ = io.flush();
    }
}

/// Serves `listener` on threads, each connection over TLS when `tls` is given.
fn serve(listener: TcpListener, big: Arc<Vec<u8>>, tls: Option<Arc<rustls::ServerConfig>>) {
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = stream.set_nodelay(true);
            let (big, tls) = (Arc::clone(&big), tls.clone());
            std::thread::spawn(move || match tls {
                None => answer(stream, &big),
                Some(config) => {
                    let Ok(conn) = rustls::ServerConnection::new(config) else {
                        return;
                    };
                    let mut tls = rustls::StreamOwned::new(conn, stream);
                    answer(&mut tls, &big);
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                }
            });
        }
    });
}

/// A CA of the bench's own (its PEM) and a server configuration for [`NAME`] it issued.
fn tls_config() -> (String, Arc<rustls::ServerConfig>) {
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
        KeyUsagePurpose,
    };
    // Distinct names: a leaf named like its issuer reads as self-signed to OpenSSL.
    let named = |cn: &str| {
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, cn);
        dn
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.distinguished_name = named("skillbox egress bench CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec![NAME.to_string()]).unwrap();
    leaf.distinguished_name = named(NAME);
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    (ca_cert.pem(), Arc::new(config))
}

/// The skill whose context the sandboxed `curl` runs in, and the workspace's egress
/// settings.
fn prepare(ws: &Path, http: u16, https: u16, ca_pem: &str) {
    let dir = ws.join("skills/netbench");
    std::fs::create_dir_all(&dir).unwrap();
    setup::chmod(&dir, 0o755);
    let hosts = format!("\"http://{NAME}:{http}\", \"https://{NAME}:{https}\"");
    std::fs::write(
        dir.join("skill.yaml"),
        format!(
            "name: netbench\ndescription: downloads from the bench's servers\n\
             permissions:\n  network: [{hosts}]\ntools:\n  - name: noop\n    description: nothing\n    \
             command: [\"true\"]\n    protocol: plain\n"
        ),
    )
    .unwrap();
    std::fs::write(ws.join("bench-ca.pem"), ca_pem).unwrap();
    let mut toml = std::fs::OpenOptions::new()
        .append(true)
        .open(ws.join("skillbox.toml"))
        .unwrap();
    write!(
        toml,
        "\n[fetch]\nallow_private = [\"{NAME}:{http}\", \"{NAME}:{https}\"]\n\n\
         [grants.netbench]\nnetwork = [{hosts}]\n\n\
         [egress]\nresolve = {{ \"{NAME}\" = \"127.0.0.1\" }}\nextra_roots = [\"bench-ca.pem\"]\n"
    )
    .unwrap();
}

/// The `time_total` of each URL (seconds) in curl's output.
fn parse_times(out: &str) -> Vec<f64> {
    out.split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect()
}

/// The curl command line: each URL's `time_total` on a line of its own.
fn curl_line(args: &[String], urls: &[String]) -> Vec<String> {
    let mut line: Vec<String> = ["curl", "-sS", "--fail", "-w", "%{time_total}\\n"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    line.extend(args.iter().cloned());
    for url in urls {
        line.extend(["-o".to_string(), "/dev/null".to_string(), url.clone()]);
    }
    line
}

/// Runs `line` on the host.
fn direct(line: &[String]) -> Vec<f64> {
    let out = Command::new(&line[0]).args(&line[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_times(&String::from_utf8_lossy(&out.stdout))
}

/// Runs `line` by `exec_command` in the skill's sandbox.
fn sandboxed(bot: &mut KeptBot, line: &[String]) -> Vec<f64> {
    // A connection of its own: the host's series before it may have run longer than the
    // gateway keeps an idle connection (curl's time is measured, not the call's).
    bot.reconnect();
    let body = serde_json::json!({
        "tool": "exec_command",
        "context_id": "egress-bench",
        "args": {"cmd": line, "skill": "netbench", "yield_ms": 120_000},
    })
    .to_string();
    let (_, r) = bot.call_body("exec_command curl", &body);
    assert_eq!(r["data"]["exit_code"], 0, "{r}");
    parse_times(r["data"]["output"].as_str().unwrap_or_default())
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    // `p` is a fraction in 0..=1, so the index lies in 0..len (and is clamped below).
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

fn main() {
    let mib = env_or("EGRESS_MB", 100).max(1);
    let rounds = env_or("EGRESS_ROUNDS", 5).max(1);
    let n = env_or("EGRESS_N", 100).max(2);
    let big = Arc::new(vec![0x5au8; mib << 20]);
    let (ca_pem, tls) = tls_config();
    let plain = TcpListener::bind("127.0.0.1:0").unwrap();
    let secure = TcpListener::bind("127.0.0.1:0").unwrap();
    let (http, https) = (
        plain.local_addr().unwrap().port(),
        secure.local_addr().unwrap().port(),
    );
    serve(plain, Arc::clone(&big), None);
    serve(secure, Arc::clone(&big), Some(tls));
    let ws = workspace();
    prepare(ws.path(), http, https, &ca_pem);
    // The host's curl trusts what the sandbox's does: the system roots and the bench's CA
    // in one bundle (OpenSSL reads a whole bundle for each connection, a cost of its own).
    let system = std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").unwrap_or_default();
    let bundle = ws.path().join("bench-bundle.pem");
    std::fs::write(&bundle, format!("{system}\n{ca_pem}")).unwrap();
    let ca_file = bundle.to_string_lossy().into_owned();
    let up = start_up(ws.path());
    let mut bot = KeptBot::connect(&up.addr, &up.token);

    let url = |scheme: &str, port: u16, path: &str| format!("{scheme}://{NAME}:{port}/{path}");
    let host_args = vec![
        "--noproxy".to_string(),
        "*".to_string(),
        "--cacert".to_string(),
        ca_file,
        "--resolve".to_string(),
        format!("{NAME}:{http}:127.0.0.1"),
        "--resolve".to_string(),
        format!("{NAME}:{https}:127.0.0.1"),
    ];
    let cases = [("http", http), ("https", https)];
    // [scheme][direct, sandbox] → seconds per round.
    let mut downloads = vec![[Vec::new(), Vec::new()]; cases.len()];
    for round in 0..=rounds {
        for (i, (scheme, port)) in cases.iter().enumerate() {
            let urls = [url(scheme, *port, "big")];
            let host = direct(&curl_line(&host_args, &urls));
            let boxed = sandboxed(&mut bot, &curl_line(&[], &urls));
            if round > 0 {
                downloads[i][0].extend(host);
                downloads[i][1].extend(boxed);
            }
        }
    }
    let mut report = format!(
        "# Egress as a program sees it\n\n`curl` on the host against the same `curl` by `exec_command` in a skill's sandbox under `skillbox up`, {rounds} rounds interleaved after one of warm-up; {mib} MiB per download; curl's own `time_total`.\n\n\
         | series | MiB/s median | lowest | highest | sandbox / direct (medians) |\n|---|---|---|---|---|\n"
    );
    for (i, (scheme, _)) in cases.iter().enumerate() {
        let rates: Vec<Vec<f64>> = downloads[i]
            .iter()
            .map(|s| s.iter().map(|t| mib as f64 / t).collect())
            .collect();
        let mut medians = Vec::new();
        for (which, r) in ["direct", "sandbox"].iter().zip(rates) {
            let mut r = r;
            let (m, lo, hi) = (
                percentile(&mut r, 0.5),
                percentile(&mut r, 0.0),
                percentile(&mut r, 1.0),
            );
            medians.push(m);
            let ratio = if *which == "sandbox" {
                format!("{:.2}", m / medians[0])
            } else {
                String::new()
            };
            report.push_str(&format!(
                "| {scheme} {which} | {m:.0} | {lo:.0} | {hi:.0} | {ratio} |\n"
            ));
        }
    }
    report.push_str(&format!(
        "\n{n} requests of `/small` (5 bytes) in one `curl`, each on its own connection, after {n} of warm-up:\n\n\
         | series | p50 ms | p90 ms | added at p50 |\n|---|---|---|---|\n"
    ));
    for (scheme, port) in cases {
        let urls: Vec<String> = (0..n).map(|_| url(scheme, port, "small")).collect();
        let _ = direct(&curl_line(&host_args, &urls));
        let _ = sandboxed(&mut bot, &curl_line(&[], &urls));
        let mut host = direct(&curl_line(&host_args, &urls));
        let mut boxed = sandboxed(&mut bot, &curl_line(&[], &urls));
        let (h50, h90) = (
            percentile(&mut host, 0.5) * 1e3,
            percentile(&mut host, 0.9) * 1e3,
        );
        let (b50, b90) = (
            percentile(&mut boxed, 0.5) * 1e3,
            percentile(&mut boxed, 0.9) * 1e3,
        );
        report.push_str(&format!("| {scheme} direct | {h50:.2} | {h90:.2} | |\n"));
        report.push_str(&format!(
            "| {scheme} sandbox | {b50:.2} | {b90:.2} | +{:.2} ms |\n",
            b50 - h50
        ));
    }
    drop(bot);
    drop(up);
    let out = setup::target_dir()
        .parent()
        .unwrap()
        .join("egress-up-bench.md");
    std::fs::write(&out, &report).unwrap();
    print!("{report}");
    eprintln!("written to {}", out.display());
}
