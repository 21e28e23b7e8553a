//! The re-encoding attack on revocation by fingerprint: an ECDSA signature (r, s) is
//! equally valid as (r, n − s), with n the order of P-256, so replacing s in a certificate's
//! signature gives other bytes (another SHA-256 fingerprint) for the same, validly signed
//! certificate. Built here by hand: parse the DER, decode the ECDSA-Sig-Value inside the
//! signature BIT STRING, subtract, re-encode the INTEGER, SEQUENCE and BIT STRING and the
//! outer SEQUENCE with their new lengths.
//!
//! Only `std` and `base64`: the end-to-end suite (integration-tests) includes this file too.

#![allow(dead_code)]

use base64::Engine as _;

/// The order n of the P-256 group, big-endian.
const P256_ORDER: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xbc, 0xe6, 0xfa, 0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51,
];

/// One DER element at the start of `input`: (tag, contents, the whole element, the rest).
fn read_tlv(input: &[u8]) -> (u8, &[u8], &[u8], &[u8]) {
    let tag = input[0];
    let first = input[1];
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let n = usize::from(first & 0x7f);
        assert!((1..=4).contains(&n), "unsupported DER length form");
        let len = input[2..2 + n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, 2 + n)
    };
    let end = header + len;
    (tag, &input[header..end], &input[..end], &input[end..])
}

/// A DER element with the minimal length encoding.
fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = contents.len();
    if len < 0x80 {
        out.push(u8::try_from(len).unwrap());
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | u8::try_from(bytes.len()).unwrap());
        out.extend(bytes);
    }
    out.extend_from_slice(contents);
    out
}

/// `a - b` for 32-byte big-endian numbers with `a > b`.
fn sub_be(a: &[u8; 32], b: &[u8; 32]) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut borrow = 0i16;
    for i in (0..32).rev() {
        let mut d = i16::from(a[i]) - i16::from(b[i]) - borrow;
        borrow = i16::from(d < 0);
        if d < 0 {
            d += 256;
        }
        out[i] = u8::try_from(d).unwrap();
    }
    assert_eq!(borrow, 0, "a < b");
    out
}

/// The contents of a DER INTEGER holding the unsigned big-endian `n`.
fn der_unsigned(n: &[u8]) -> Vec<u8> {
    let trimmed: Vec<u8> = n.iter().copied().skip_while(|b| *b == 0).collect();
    let mut out = Vec::with_capacity(trimmed.len() + 1);
    if trimmed.first().is_none_or(|b| b & 0x80 != 0) {
        out.push(0);
    }
    out.extend(trimmed);
    out
}

/// The certificate `der` with its ECDSA P-256 signature (r, s) replaced by (r, n − s):
/// the same certificate, still validly signed by its issuer, in other bytes.
pub fn reencode_negated_s(der: &[u8]) -> Vec<u8> {
    let (tag, cert, _, rest) = read_tlv(der);
    assert!(tag == 0x30 && rest.is_empty(), "not one DER SEQUENCE");
    let (_, _, tbs, after_tbs) = read_tlv(cert);
    let (_, _, alg, after_alg) = read_tlv(after_tbs);
    let (tag, bits, _, end) = read_tlv(after_alg);
    assert!(tag == 0x03 && end.is_empty(), "no signature BIT STRING");
    assert_eq!(bits[0], 0, "signature BIT STRING with unused bits");
    let (tag, sig, _, end) = read_tlv(&bits[1..]);
    assert!(tag == 0x30 && end.is_empty(), "not an ECDSA-Sig-Value");
    let (tag, r, _, after_r) = read_tlv(sig);
    assert_eq!(tag, 0x02);
    let (tag, s, _, end) = read_tlv(after_r);
    assert!(tag == 0x02 && end.is_empty());

    let s: Vec<u8> = s.iter().copied().skip_while(|b| *b == 0).collect();
    assert!(s.len() <= 32, "s is not a P-256 scalar");
    let mut s32 = [0u8; 32];
    s32[32 - s.len()..].copy_from_slice(&s);
    let negated = sub_be(&P256_ORDER, &s32);

    let ecdsa = [tlv(0x02, r), tlv(0x02, &der_unsigned(&negated))].concat();
    let mut bit_string = vec![0u8];
    bit_string.extend(tlv(0x30, &ecdsa));
    let body = [tbs, alg, &tlv(0x03, &bit_string)].concat();
    tlv(0x30, &body)
}

/// DER of every certificate in a PEM text.
pub fn pem_to_ders(pem: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut b64 = String::new();
    let mut inside = false;
    for line in pem.lines() {
        let line = line.trim();
        if line == "-----BEGIN CERTIFICATE-----" {
            inside = true;
            b64.clear();
        } else if line == "-----END CERTIFICATE-----" {
            inside = false;
            out.push(
                base64::engine::general_purpose::STANDARD
                    .decode(&b64)
                    .unwrap(),
            );
        } else if inside {
            b64.push_str(line);
        }
    }
    out
}

/// PEM text of one certificate.
pub fn der_to_pem(der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// Rewrites the package's `SIGNATURE` so that chain entry `index` (0 = the developer
/// certificate) is its re-encoded copy; the signed fields are untouched, so the
/// signature still verifies. Returns the new entry's DER.
pub fn reencode_signature_chain(signature_file: &std::path::Path, index: usize) -> Vec<u8> {
    let text = std::fs::read_to_string(signature_file).unwrap();
    let mut sig: serde_json::Value = serde_json::from_str(&text).unwrap();
    let chain = sig["chain"].as_array_mut().unwrap();
    let ders = pem_to_ders(chain[index].as_str().unwrap());
    assert_eq!(ders.len(), 1, "one certificate per chain entry");
    let reencoded = reencode_negated_s(&ders[0]);
    assert_ne!(reencoded, ders[0]);
    chain[index] = serde_json::Value::String(der_to_pem(&reencoded));
    std::fs::write(signature_file, serde_json::to_vec_pretty(&sig).unwrap()).unwrap();
    reencoded
}

/// SHA-256 of `bytes`, lower-case hex (how skillbox names certificates).
pub fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
