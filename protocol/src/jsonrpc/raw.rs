//! A call read with its params kept as the JSON text they came in ([`decode_call`]), and
//! a request written straight from its typed params ([`request_line`]): the channel's
//! side of each end reads and writes a method's params as its own type in one pass, with
//! no `Value` tree between (a call's params can list a context's thousand files; the
//! tree was a tenth of the executor's work for such a call).
//!
//! [`decode_call`] takes the message as it is when it is plainly a well-formed request or
//! notification, and otherwise goes through [`super::decode`], whose answers (and
//! refusals) it gives: the two agree on every input (the `jsonrpc_decode` fuzz target
//! checks it).

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use super::{decode, parse_id, DecodeError, Id, Message, MAX_MESSAGE_BYTES, MAX_METHOD_LEN};
use super::{Notification, Request, VERSION};

/// A call's params: the text they came in, or (read through [`super::decode`]) written
/// again from the tree.
#[derive(Debug)]
pub enum Params<'a> {
    /// A slice of the message.
    Borrowed(&'a RawValue),
    /// Written from a `Value`.
    Owned(Box<RawValue>),
}

impl Params<'_> {
    /// The params as JSON text.
    pub fn get(&self) -> &RawValue {
        match self {
            Params::Borrowed(raw) => raw,
            Params::Owned(raw) => raw,
        }
    }
}

/// A message read by [`decode_call`].
#[derive(Debug)]
pub enum Call<'a> {
    /// A request: its id, method and params.
    Request(Id, String, Option<Params<'a>>),
    /// A notification: its method and params.
    Notification(String, Option<Params<'a>>),
    /// A response, as [`super::decode`] reads it.
    Response(super::Response),
}

/// Every member a message may have, each kept as its JSON text when present (a `null`
/// too: a request's `"id": null` is not the absent id of a notification).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Members<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// A member that is there, whatever its value.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Decodes one message as [`super::decode`] does, a request's or notification's params
/// kept as their text.
pub fn decode_call(bytes: &[u8]) -> Result<Call<'_>, DecodeError> {
    if let Some(call) = plain_call(bytes) {
        return Ok(call);
    }
    let owned = |params: Option<Value>| {
        params
            .map(|p| serde_json::value::to_raw_value(&p).map(Params::Owned))
            .transpose()
            .map_err(|source| DecodeError::Parse { source })
    };
    Ok(match decode(bytes)? {
        Message::Request(r) => Call::Request(r.id, r.method, owned(r.params)?),
        Message::Notification(n) => Call::Notification(n.method, owned(n.params)?),
        Message::Response(r) => Call::Response(r),
    })
}

/// The request or notification `bytes` holds when it is plainly well formed: version
/// `"2.0"` as written, a method of 1 to 128 characters, an integer or string id or none,
/// params an object or an array or none, no result or error, no other member, no member
/// twice. `None` for anything else, which [`super::decode`] then reads.
fn plain_call(bytes: &[u8]) -> Option<Call<'_>> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return None;
    }
    let m: Members<'_> = serde_json::from_slice(bytes).ok()?;
    if m.result.is_some() || m.error.is_some() || m.jsonrpc?.get() != "\"2.0\"" {
        return None;
    }
    let method: String = serde_json::from_str(m.method?.get()).ok()?;
    if method.is_empty() || method.len() > MAX_METHOD_LEN {
        return None;
    }
    if let Some(p) = m.params {
        if !matches!(p.get().as_bytes().first(), Some(b'{' | b'[')) {
            return None;
        }
    }
    let params = m.params.map(Params::Borrowed);
    match m.id {
        None => Some(Call::Notification(method, params)),
        Some(id) => {
            let id = parse_id(serde_json::from_str(id.get()).ok()?).ok()?;
            Some(Call::Request(id, method, params))
        }
    }
}

/// A request's line (no trailing newline), written straight from `params`: the object
/// [`Message::to_line`] writes for the same request.
pub fn request_line<P: Serialize + ?Sized>(
    id: i64,
    method: &str,
    params: &P,
) -> serde_json::Result<String> {
    #[derive(Serialize)]
    struct Line<'a, P: ?Sized> {
        id: i64,
        jsonrpc: &'static str,
        method: &'a str,
        params: &'a P,
    }
    serde_json::to_string(&Line {
        id,
        jsonrpc: VERSION,
        method,
        params,
    })
}

/// What [`decode_call`] read, as the [`Message`] [`super::decode`] reads from the same
/// bytes (for comparing the two).
pub fn as_message(call: &Call<'_>) -> serde_json::Result<Message> {
    let tree = |p: &Option<Params<'_>>| -> serde_json::Result<Option<Value>> {
        p.as_ref()
            .map(|p| serde_json::from_str(p.get().get()))
            .transpose()
    };
    Ok(match call {
        Call::Request(id, method, params) => Message::Request(Request {
            id: id.clone(),
            method: method.clone(),
            params: tree(params)?,
        }),
        Call::Notification(method, params) => Message::Notification(Notification {
            method: method.clone(),
            params: tree(params)?,
        }),
        Call::Response(r) => Message::Response(r.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether [`decode_call`] reads `bytes` as [`super::super::decode`] does: the same
    /// message, or the same refusal.
    fn agrees(bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        match (decode(bytes), decode_call(bytes)) {
            (Ok(message), Ok(call)) => assert_eq!(as_message(&call).unwrap(), message, "{text}"),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{text}"),
            (a, b) => panic!("{text}: decode {a:?}, decode_call {b:?}"),
        }
    }

    /// Well-formed calls, responses and every refusal of the reference decoder: the same
    /// answer from both; a plain call's params are a slice of the message.
    #[test]
    fn a_call_is_read_as_the_reference_decoder_reads_it() {
        let cases: &[&str] = &[
            r#"{"jsonrpc":"2.0","id":7,"method":"tool.execute","params":{"files":[{"path":"a","size":1}],"n":1.5}}"#,
            r#" {"method":"m","params":[1,2],"jsonrpc":"2.0","id":"x"} "#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","method":"note","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"ok":true}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"m"}"#,
            r#"{"jsonrpc":"\u0032.0","id":1,"method":"m","params":{"a":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","extra":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":5}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":""}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":3}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":[1],"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","result":1}"#,
            r#"{"jsonrpc":"2.0","method":"m","params":{"result":1,"error":2}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m""#,
            "not json",
            "",
        ];
        for case in cases {
            agrees(case.as_bytes());
        }
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"{}"}}"#,
            "m".repeat(129)
        );
        agrees(long.as_bytes());
        agrees(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\xff\"}");
        let plain = decode_call(cases[0].as_bytes()).unwrap();
        assert!(
            matches!(plain, Call::Request(_, _, Some(Params::Borrowed(_)))),
            "{plain:?}"
        );
    }

    /// A request written from its typed params is the line the message would make.
    #[test]
    fn a_request_line_is_the_messages_line() {
        let params = serde_json::json!({"files": [{"path": "a"}], "z": null});
        let line = request_line(9, "session.exec", &params).unwrap();
        let message = Message::Request(Request {
            id: Id::Number(9),
            method: "session.exec".into(),
            params: Some(params),
        });
        assert_eq!(line, message.to_line());
    }
}
