//! An npm registry stand-in on 127.0.0.1 for the Node dependency tests: `GET /<name>`
//! answers the package's document (its versions, each with its tarball's URL on the host
//! the request named and its sha512 integrity), `GET /<name>/-/<name>-<version>.tgz` the
//! tarball, which this module writes itself (a gzipped ustar archive of `package/...`).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

use base64::Engine;
use serde_json::{json, Value};

/// One package version the registry serves: its files under `package/`.
#[derive(Debug, Clone)]
pub struct Package {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// `package/<path>` → content (a `package.json` is made when none is given).
    pub files: Vec<(String, String)>,
    /// Its `scripts` (an install script, say).
    pub scripts: Value,
}

impl Package {
    /// The `.tgz` npm downloads.
    pub fn tarball(&self) -> Vec<u8> {
        let manifest = json!({
            "name": self.name, "version": self.version, "main": "index.js",
            "scripts": self.scripts,
        });
        let mut entries = vec![("package/package.json".to_string(), manifest.to_string())];
        for (path, text) in &self.files {
            entries.push((format!("package/{path}"), text.clone()));
        }
        let mut tar = Vec::new();
        for (path, text) in &entries {
            tar.extend_from_slice(&ustar_header(path, text.len()));
            tar.extend_from_slice(text.as_bytes());
            tar.resize(tar.len().div_ceil(512) * 512, 0);
        }
        tar.resize(tar.len() + 1024, 0);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&tar).expect("gzip");
        gz.finish().expect("gzip")
    }

    /// Its Subresource Integrity, as npm writes it in a lock.
    pub fn integrity(&self) -> String {
        integrity_of(&self.tarball())
    }
}

/// `sha512-<base64>` of `bytes`.
pub fn integrity_of(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA512, bytes);
    format!(
        "sha512-{}",
        base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
    )
}

/// A ustar header of a plain file `path` of `size` bytes.
fn ustar_header(path: &str, size: usize) -> [u8; 512] {
    let mut h = [0u8; 512];
    let put = |h: &mut [u8; 512], at: usize, bytes: &[u8]| {
        h[at..at + bytes.len()].copy_from_slice(bytes);
    };
    put(&mut h, 0, path.as_bytes());
    put(&mut h, 100, b"0000644\0");
    put(&mut h, 108, b"0000000\0");
    put(&mut h, 116, b"0000000\0");
    put(&mut h, 124, format!("{size:011o}\0").as_bytes());
    put(&mut h, 136, b"00000000000\0");
    put(&mut h, 148, b"        ");
    h[156] = b'0';
    put(&mut h, 257, b"ustar\0");
    put(&mut h, 263, b"00");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    put(&mut h, 148, format!("{sum:06o}\0 ").as_bytes());
    h
}

/// A running registry.
#[derive(Debug)]
pub struct Registry {
    /// Its port on 127.0.0.1.
    pub port: u16,
}

/// Starts a registry serving `packages` until the test process ends.
pub fn start(packages: Vec<Package>) -> Registry {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the registry");
    let port = listener.local_addr().expect("its address").port();
    let mut by_name: BTreeMap<String, Vec<Package>> = BTreeMap::new();
    for p in packages {
        by_name.entry(p.name.clone()).or_default().push(p);
    }
    let by_name = Arc::new(by_name);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let by_name = Arc::clone(&by_name);
            std::thread::spawn(move || serve(stream, &by_name));
        }
    });
    Registry { port }
}

/// Answers one request on `stream`.
fn serve(mut stream: TcpStream, by_name: &BTreeMap<String, Vec<Package>>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head).to_string();
    let target = head.split_whitespace().nth(1).unwrap_or("/").to_string();
    let host = (head.lines())
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("host").then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    // A proxy may send the absolute form.
    let path = match target.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]).to_string(),
        None => target,
    };
    let (status, body, kind) = answer(&path, &host, by_name);
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(reply.as_bytes());
    let _ = stream.write_all(&body);
}

/// The status, body and type of `GET path` asked of `host`.
fn answer(
    path: &str,
    host: &str,
    by_name: &BTreeMap<String, Vec<Package>>,
) -> (&'static str, Vec<u8>, &'static str) {
    let path = path.trim_start_matches('/');
    if let Some((name, file)) = path.split_once("/-/") {
        let found = (by_name.get(name).into_iter().flatten())
            .find(|p| file == format!("{}-{}.tgz", p.name, p.version));
        return match found {
            Some(p) => ("200 OK", p.tarball(), "application/octet-stream"),
            None => ("404 Not Found", b"{}".to_vec(), "application/json"),
        };
    }
    let Some(versions) = by_name.get(path) else {
        return ("404 Not Found", b"{}".to_vec(), "application/json");
    };
    let mut doc = json!({"name": path, "dist-tags": {}, "versions": {}});
    for p in versions {
        let tarball = format!("http://{host}/{0}/-/{0}-{1}.tgz", p.name, p.version);
        doc["versions"][&p.version] = json!({
            "name": p.name, "version": p.version, "scripts": p.scripts,
            "dist": {"tarball": tarball, "integrity": p.integrity()},
        });
        doc["dist-tags"]["latest"] = json!(p.version);
    }
    ("200 OK", doc.to_string().into_bytes(), "application/json")
}
