//! What an operator sees of an approval before deciding it: the record with, for a
//! signature, the payload decoded (UTF-8 text when it is text, else hex) and its SHA-256,
//! so nobody approves base64 they cannot read. `GET /v1/approvals` and `skillbox approvals
//! list` show this view, and the console draws it.
//!
//! The text is the exact bytes that will be signed, never a re-encoding: a JSON payload is
//! not parsed and written again (that would show one of two duplicate keys, or `1e+20` for
//! a large integer). What would mislead a reader instead becomes `warnings`
//! ([`inspect`](super::inspect)): hidden and direction-changing characters, duplicate
//! keys, numbers a JSON parser would change. The console asks the operator to acknowledge
//! them before it approves.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ring::digest::{digest, SHA256};
use serde_json::{json, Value};

use super::inspect::{self, Warning, WarningKind};
use super::{hex, ApprovalRecord};

/// Longest decoded payload shown in full; longer ones are cut (the hash covers all of it,
/// and the warnings are about all of it).
pub const SHOWN_BYTES: usize = 4096;

/// The record as JSON, plus `payload` for a signature approval.
pub fn view(record: &ApprovalRecord) -> Value {
    let mut v = serde_json::to_value(record).unwrap_or(Value::Null);
    if let Some(p) = sign_payload(&record.args) {
        v["payload"] = p;
    }
    v
}

/// `{"type", "bytes", "sha256", "text" | "hex", "truncated", "json", "warnings"}` of the
/// `{"sign": {"type", "data"}}` arguments of a signature approval; `None` for other
/// arguments. `text` is the payload's exact text; `json` is `true` when that text is one
/// JSON object or array; `warnings` lists what the operator must see before approving
/// (empty when nothing).
pub fn sign_payload(args: &Value) -> Option<Value> {
    let sign = args.get("sign")?;
    let kind = sign
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    let data = sign.get("data").and_then(Value::as_str)?;
    let Ok(bytes) = STANDARD.decode(data) else {
        return Some(json!({
            "type": kind,
            "error": "the data is not base64; the signature will be refused",
            "warnings": [],
        }));
    };
    let mut out = json!({
        "type": kind,
        "bytes": bytes.len(),
        "sha256": hex(digest(&SHA256, &bytes).as_ref()),
        "json": false,
    });
    let mut warnings: Vec<Warning> = Vec::new();
    let shown = match std::str::from_utf8(&bytes) {
        Ok(text)
            if !text
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t') =>
        {
            warnings.extend(inspect::hidden_characters(text));
            let structured = matches!(text.trim_start().as_bytes().first(), Some(b'{' | b'['));
            if let Some(found) = structured.then(|| inspect::json_warnings(text)).flatten() {
                out["json"] = true.into();
                warnings.extend(found);
            }
            let cut = char_boundary(text, SHOWN_BYTES);
            out["text"] = text[..cut].into();
            cut
        }
        _ => {
            let cut = bytes.len().min(SHOWN_BYTES);
            out["hex"] = hex(&bytes[..cut]).into();
            cut
        }
    };
    out["truncated"] = (shown < bytes.len()).into();
    out["warnings"] = serde_json::to_value(&warnings).unwrap_or_else(|_| json!([]));
    Some(out)
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character.
fn char_boundary(text: &str, max: usize) -> usize {
    if text.len() <= max {
        return text.len();
    }
    (0..=max)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

/// Whether the payload view `p` carries warnings the operator must acknowledge.
pub fn has_warnings(p: &Value) -> bool {
    p["warnings"].as_array().is_some_and(|w| !w.is_empty())
}

/// What an operator must read before approving: a signature payload's warnings, or the
/// hidden characters of other arguments. The console refuses an approval that carries
/// some unless the operator ticked that they read them.
pub fn approval_warnings(args: &Value) -> Vec<Value> {
    match sign_payload(args) {
        Some(p) => p["warnings"].as_array().cloned().unwrap_or_default(),
        None => inspect::hidden_characters(&args.to_string())
            .into_iter()
            .filter_map(|w| serde_json::to_value(w).ok())
            .collect(),
    }
}

/// The duplicate-key warning of a signature's base64 `data` when it is a JSON text with
/// a key twice in one object: such a request is refused before any approval is asked
/// (docs/console.md), since the operator and a verifier could read different values.
pub fn duplicate_key(data: &str) -> Option<String> {
    let bytes = STANDARD.decode(data).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    inspect::json_warnings(text)?
        .into_iter()
        .find(|w| w.kind == WarningKind::DuplicateKey)
        .map(|w| w.detail)
}

/// One line for a table: the payload of a signature (text quoted, hidden characters as
/// `<U+XXXX>`, or hex) with the start of its hash and the number of warnings, or the
/// arguments as compact JSON.
pub fn summary(approval: &Value) -> String {
    let p = &approval["payload"];
    if p.is_object() {
        let kind = p["type"].as_str().unwrap_or("message");
        let sha = p["sha256"].as_str().unwrap_or("");
        let body = match (p["text"].as_str(), p["hex"].as_str()) {
            (Some(t), _) => Value::String(inspect::visible(t)).to_string(),
            (None, Some(h)) => format!("hex {h}"),
            (None, None) => p["error"].as_str().unwrap_or("?").to_string(),
        };
        let warned = match p["warnings"].as_array().map_or(0, Vec::len) {
            0 => String::new(),
            1 => " [1 WARNING]".to_string(),
            n => format!(" [{n} WARNINGS]"),
        };
        return format!(
            "sign {kind} {body} (sha256 {}){warned}",
            &sha[..sha.len().min(12)]
        );
    }
    inspect::visible(&approval["args"].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_payload_shows_text_and_its_hash() {
        let args =
            json!({"sign": {"type": "message", "data": STANDARD.encode("pay 1 coin to bob")}});
        let p = sign_payload(&args).unwrap();
        assert_eq!(p["text"], "pay 1 coin to bob");
        assert_eq!(p["bytes"], 17);
        assert_eq!(
            p["sha256"],
            hex(digest(&SHA256, b"pay 1 coin to bob").as_ref())
        );
        assert!(p.get("hex").is_none(), "{p}");
        assert_eq!(p["truncated"], false);
        assert!(!has_warnings(&p));
        let line = summary(&json!({"payload": p}));
        assert!(
            line.starts_with("sign message \"pay 1 coin to bob\" (sha256 "),
            "{line}"
        );
    }

    #[test]
    fn sign_payload_shows_binary_as_hex_and_text_with_escapes_as_hex() {
        let args =
            json!({"sign": {"type": "transaction", "data": STANDARD.encode([0u8, 0xff, 0x10])}});
        let p = sign_payload(&args).unwrap();
        assert_eq!(p["hex"], "00ff10");
        assert!(p.get("text").is_none());
        // Terminal escapes are not shown as text: an operator would see something else.
        let args = json!({"sign": {"type": "message", "data": STANDARD.encode("ok\u{1b}[2Jpay")}});
        assert!(sign_payload(&args).unwrap().get("hex").is_some());
    }

    fn payload_of(text: &str) -> Value {
        let args = json!({"sign": {"type": "transaction", "data": STANDARD.encode(text)}});
        sign_payload(&args).unwrap()
    }

    #[test]
    fn sign_payload_shows_json_text_as_its_exact_bytes() {
        let body = "{ \"to\": \"bob\",\n  \"amount\": 1.50 }";
        let p = payload_of(body);
        assert_eq!(p["json"], true);
        assert_eq!(p["text"], body, "not re-encoded");
        assert_eq!(p["warnings"], json!([]));
        // A bare JSON scalar is text.
        assert_eq!(payload_of("42")["json"], false);
    }

    #[test]
    fn sign_payload_with_duplicate_keys_shows_both_and_warns() {
        let body = r#"{"to":"bob","amount":1,"amount":1000000}"#;
        let p = payload_of(body);
        assert_eq!(p["text"], body, "both values are shown");
        let w = &p["warnings"][0];
        assert_eq!(w["kind"], "duplicate_key", "{p}");
        assert!(w["detail"].as_str().unwrap().contains("\"amount\""), "{w}");
        assert!(has_warnings(&p));
        assert!(summary(&json!({"payload": p})).ends_with("[1 WARNING]"));
    }

    #[test]
    fn sign_payload_with_a_large_integer_shows_its_digits_and_warns() {
        let body = r#"{"amount":100000000000000000000}"#;
        let p = payload_of(body);
        assert_eq!(p["text"], body);
        assert!(!p["text"].as_str().unwrap().contains("e+"), "{p}");
        assert_eq!(p["warnings"][0]["kind"], "inexact_number", "{p}");
    }

    #[test]
    fn sign_payload_with_bidi_override_and_zero_width_characters_warns_and_badges_them() {
        let body = "pay bob\u{202E}0001\u{200B} coins\u{2060}";
        let p = payload_of(body);
        assert_eq!(p["text"], body, "the exact text, for the console to draw");
        let kinds: Vec<&str> = p["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["detail"].as_str().unwrap())
            .collect();
        assert_eq!(kinds.len(), 3, "{kinds:?}");
        assert!(kinds[0].starts_with("<U+202E>"), "{kinds:?}");
        let line = summary(&json!({"payload": p}));
        assert!(
            line.contains("pay bob<U+202E>0001<U+200B> coins<U+2060>"),
            "{line}"
        );
        assert!(line.ends_with("[3 WARNINGS]"), "{line}");
    }

    #[test]
    fn sign_payload_cuts_long_text_on_a_character_and_inspects_all_of_it() {
        let body = format!("{}\u{202E}", "é".repeat(SHOWN_BYTES));
        let p = payload_of(&body);
        assert_eq!(p["truncated"], true);
        assert_eq!(p["text"].as_str().unwrap().len(), SHOWN_BYTES);
        assert_eq!(p["warnings"].as_array().unwrap().len(), 1, "{p}");
    }

    #[test]
    fn duplicate_key_is_found_in_base64_json_only() {
        let dup = STANDARD.encode(r#"{"amount":1,"amount":1000000}"#);
        assert!(duplicate_key(&dup).unwrap().contains("\"amount\""));
        assert_eq!(duplicate_key(&STANDARD.encode(r#"{"amount":1}"#)), None);
        assert_eq!(duplicate_key(&STANDARD.encode("amount amount")), None);
        assert_eq!(duplicate_key("not base64!"), None);
    }

    #[test]
    fn approval_warnings_cover_hidden_characters_in_plain_arguments() {
        let w = approval_warnings(&json!({"text": "rm -rf /\u{202E}gpj.txt"}));
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0]["kind"], "invisible_character");
        assert!(approval_warnings(&json!({"text": "hi"})).is_empty());
    }

    #[test]
    fn sign_payload_is_absent_for_plain_arguments() {
        assert!(sign_payload(&json!({"text": "hi"})).is_none());
        assert_eq!(
            summary(&json!({"args": {"text": "hi"}})),
            r#"{"text":"hi"}"#
        );
    }
}
