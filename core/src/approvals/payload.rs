//! What an operator sees of an approval before deciding it: the record with, for a
//! signature, the payload decoded (UTF-8 text when it is text, else hex) and its SHA-256,
//! so nobody approves base64 they cannot read. `GET /v1/approvals` and `skillbox approvals
//! list` show this view.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ring::digest::{digest, SHA256};
use serde_json::{json, Value};

use super::{hex, ApprovalRecord};

/// Longest decoded payload shown in full; longer ones are cut (the hash covers all of it).
pub const SHOWN_BYTES: usize = 4096;

/// The record as JSON, plus `payload` for a signature approval.
pub fn view(record: &ApprovalRecord) -> Value {
    let mut v = serde_json::to_value(record).unwrap_or(Value::Null);
    if let Some(p) = sign_payload(&record.args) {
        v["payload"] = p;
    }
    v
}

/// `{"type", "bytes", "sha256", "text" | "hex", "truncated"}` of the `{"sign": {"type",
/// "data"}}` arguments of a signature approval, plus `"json"` when the text is a JSON
/// object or array; `None` for other arguments.
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
        }));
    };
    let shown = &bytes[..bytes.len().min(SHOWN_BYTES)];
    let mut out = json!({
        "type": kind,
        "bytes": bytes.len(),
        "sha256": hex(digest(&SHA256, &bytes).as_ref()),
        "truncated": shown.len() < bytes.len(),
    });
    match std::str::from_utf8(shown) {
        Ok(text)
            if !text
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t') =>
        {
            if let Ok(parsed @ (Value::Object(_) | Value::Array(_))) =
                serde_json::from_str::<Value>(text)
            {
                out["json"] = parsed;
            }
            out["text"] = text.into();
        }
        _ => out["hex"] = hex(shown).into(),
    }
    Some(out)
}

/// One line for a table: the payload of a signature (text quoted, or hex) with the start
/// of its hash, or the arguments as compact JSON.
pub fn summary(approval: &Value) -> String {
    let p = &approval["payload"];
    if p.is_object() {
        let kind = p["type"].as_str().unwrap_or("message");
        let sha = p["sha256"].as_str().unwrap_or("");
        let body = match (p["text"].as_str(), p["hex"].as_str()) {
            (Some(t), _) => Value::String(t.to_string()).to_string(),
            (None, Some(h)) => format!("hex {h}"),
            (None, None) => p["error"].as_str().unwrap_or("?").to_string(),
        };
        return format!("sign {kind} {body} (sha256 {})", &sha[..sha.len().min(12)]);
    }
    approval["args"].to_string()
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

    #[test]
    fn sign_payload_parses_json_text() {
        let body = r#"{"to":"bob","amount":1}"#;
        let args = json!({"sign": {"type": "transaction", "data": STANDARD.encode(body)}});
        let p = sign_payload(&args).unwrap();
        assert_eq!(p["json"], json!({"to": "bob", "amount": 1}));
        assert_eq!(p["text"], body);
        // A bare JSON scalar stays text only.
        let args = json!({"sign": {"type": "message", "data": STANDARD.encode("42")}});
        assert!(sign_payload(&args).unwrap().get("json").is_none());
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
