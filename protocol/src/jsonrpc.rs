//! JSON-RPC 2.0 envelope: requests, notifications, responses and error objects, with a
//! bounded, strict decoder (unknown members are rejected, batches are not supported).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod raw;

pub use raw::{as_message, decode_call, request_line, Call, Params};

/// The only protocol version skillbox speaks.
pub const VERSION: &str = "2.0";

/// Largest JSON-RPC message (one line of a tool's stdout, one HTTP body) accepted by
/// [`decode`]. Bigger messages are refused before parsing.
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// Longest method name accepted.
pub const MAX_METHOD_LEN: usize = 128;

/// Standard and skillbox error codes (docs/skill-format.md).
pub mod code {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not available.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal JSON-RPC error.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// A capability was refused by the skill's declared permissions.
    pub const PERMISSION_DENIED: i64 = -32001;
    /// An approval was denied or timed out.
    pub const APPROVAL_DENIED: i64 = -32002;
    /// The capability is unavailable (for example no core in one-shot mode).
    pub const CAPABILITY_UNAVAILABLE: i64 = -32003;
    /// The executor is draining (it was told to stop): it refused a `tool.execute` before
    /// running anything of it, so the core may send that call to another executor.
    pub const EXECUTOR_DRAINING: i64 = -32004;
    /// `session.write` named a session the executor does not hold (it ended, or its
    /// executor restarted): the core answers `not_found`.
    pub const SESSION_NOT_FOUND: i64 = -32005;
    /// A quota or size limit refused the request (a context file over `[files]` quotas):
    /// the call's result says `resource_limit`.
    pub const RESOURCE_LIMIT: i64 = -32006;
    /// A call named its context's list of files by digest alone (`list_sha256` without
    /// `files`) and the executor does not hold that list (it never got it, restarted, or
    /// let it go): it refused the call before running anything of it, and the core sends
    /// it again with the whole list.
    pub const UNKNOWN_FILE_LIST: i64 = -32007;
}

/// A request or response id: a number or a string (`null` only in error responses to
/// messages whose id could not be read).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Id {
    /// Numeric id.
    Number(i64),
    /// String id.
    String(String),
}

/// The error member of a failed response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorObject {
    /// One of [`code`] or an application code.
    pub code: i64,
    /// A short human-readable description.
    pub message: String,
    /// Optional structured detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error object with no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }
}

/// A call that expects a response.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Correlates the response.
    pub id: Id,
    /// Method name, `resource.verb`.
    pub method: String,
    /// Parameters, when present.
    pub params: Option<Value>,
}

/// A call that expects no response.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// Method name.
    pub method: String,
    /// Parameters, when present.
    pub params: Option<Value>,
}

/// The response to a request: exactly one of a result or an error.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The request's id; `None` stands for `null` (the request's id was unreadable).
    pub id: Option<Id>,
    /// `Ok(result)` or `Err(error)`.
    pub outcome: Result<Value, ErrorObject>,
}

/// Any single JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A response.
    Response(Response),
}

/// Why a message could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The message is larger than [`MAX_MESSAGE_BYTES`].
    #[error("message of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Size of the message.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The bytes are not JSON.
    #[error("not valid JSON: {source}")]
    Parse {
        /// The parser's error.
        source: serde_json::Error,
    },
    /// The JSON is not a single object (batches are not supported).
    #[error("a JSON-RPC message must be one JSON object (batches are not supported)")]
    NotAnObject,
    /// `jsonrpc` is missing or not `"2.0"`.
    #[error("member \"jsonrpc\" must be \"2.0\"")]
    BadVersion,
    /// A member the protocol does not define.
    #[error("unknown member {member:?}; allowed: jsonrpc, id, method, params, result, error")]
    UnknownMember {
        /// The offending member name.
        member: String,
    },
    /// The members present do not form a request, notification or response.
    #[error("malformed message: {reason}")]
    Malformed {
        /// What is wrong.
        reason: &'static str,
    },
}

impl DecodeError {
    /// The JSON-RPC error code to answer this decode failure with.
    pub fn code(&self) -> i64 {
        match self {
            DecodeError::Parse { .. } => code::PARSE_ERROR,
            _ => code::INVALID_REQUEST,
        }
    }

    /// The error object to answer this decode failure with.
    pub fn to_error_object(&self) -> ErrorObject {
        ErrorObject::new(self.code(), self.to_string())
    }
}

const ALLOWED_MEMBERS: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];

/// Decodes one JSON-RPC 2.0 message, refusing oversize input, unknown members and any
/// shape the specification does not allow.
pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(DecodeError::TooLarge {
            len: bytes.len(),
            max: MAX_MESSAGE_BYTES,
        });
    }
    let value: Value =
        serde_json::from_slice(bytes).map_err(|source| DecodeError::Parse { source })?;
    let Value::Object(mut obj) = value else {
        return Err(DecodeError::NotAnObject);
    };
    if let Some(member) = obj.keys().find(|k| !ALLOWED_MEMBERS.contains(&k.as_str())) {
        return Err(DecodeError::UnknownMember {
            member: member.clone(),
        });
    }
    if obj.remove("jsonrpc") != Some(Value::String(VERSION.into())) {
        return Err(DecodeError::BadVersion);
    }
    let id = match obj.remove("id") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(v) => Some(Some(parse_id(v)?)),
    };
    if let Some(method) = obj.remove("method") {
        return decode_method(method, id, obj);
    }
    decode_response(id, obj)
}

fn parse_id(v: Value) -> Result<Id, DecodeError> {
    match v {
        Value::String(s) => Ok(Id::String(s)),
        Value::Number(n) => n.as_i64().map(Id::Number).ok_or(DecodeError::Malformed {
            reason: "\"id\" must be an integer or a string",
        }),
        _ => Err(DecodeError::Malformed {
            reason: "\"id\" must be an integer or a string",
        }),
    }
}

fn decode_method(
    method: Value,
    id: Option<Option<Id>>,
    mut obj: Map<String, Value>,
) -> Result<Message, DecodeError> {
    let Value::String(method) = method else {
        return Err(DecodeError::Malformed {
            reason: "\"method\" must be a string",
        });
    };
    if method.is_empty() || method.len() > MAX_METHOD_LEN {
        return Err(DecodeError::Malformed {
            reason: "\"method\" must be 1 to 128 characters",
        });
    }
    if obj.contains_key("result") || obj.contains_key("error") {
        return Err(DecodeError::Malformed {
            reason: "a request cannot carry \"result\" or \"error\"",
        });
    }
    let params = obj.remove("params");
    if let Some(p) = &params {
        if !(p.is_object() || p.is_array()) {
            return Err(DecodeError::Malformed {
                reason: "\"params\" must be an object or an array",
            });
        }
    }
    match id {
        None => Ok(Message::Notification(Notification { method, params })),
        Some(None) => Err(DecodeError::Malformed {
            reason: "a request id cannot be null",
        }),
        Some(Some(id)) => Ok(Message::Request(Request { id, method, params })),
    }
}

fn decode_response(
    id: Option<Option<Id>>,
    mut obj: Map<String, Value>,
) -> Result<Message, DecodeError> {
    if obj.contains_key("params") {
        return Err(DecodeError::Malformed {
            reason: "a response cannot carry \"params\"",
        });
    }
    let Some(id) = id else {
        return Err(DecodeError::Malformed {
            reason: "a response needs an \"id\" (a request needs a \"method\")",
        });
    };
    let outcome = match (obj.remove("result"), obj.remove("error")) {
        (Some(result), None) => Ok(result),
        (None, Some(error)) => Err(serde_json::from_value::<ErrorObject>(error).map_err(|_| {
            DecodeError::Malformed {
                reason: "\"error\" must be {code: integer, message: string, data?}",
            }
        })?),
        _ => {
            return Err(DecodeError::Malformed {
                reason: "a response carries exactly one of \"result\" and \"error\"",
            })
        }
    };
    if id.is_none() && outcome.is_ok() {
        return Err(DecodeError::Malformed {
            reason: "a successful response needs a non-null id",
        });
    }
    Ok(Message::Response(Response { id, outcome }))
}

impl Message {
    /// Serializes the message as one compact JSON object.
    pub fn to_value(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("jsonrpc".into(), VERSION.into());
        match self {
            Message::Request(r) => {
                obj.insert("id".into(), id_value(Some(&r.id)));
                obj.insert("method".into(), r.method.clone().into());
                if let Some(p) = &r.params {
                    obj.insert("params".into(), p.clone());
                }
            }
            Message::Notification(n) => {
                obj.insert("method".into(), n.method.clone().into());
                if let Some(p) = &n.params {
                    obj.insert("params".into(), p.clone());
                }
            }
            Message::Response(r) => {
                obj.insert("id".into(), id_value(r.id.as_ref()));
                match &r.outcome {
                    Ok(v) => obj.insert("result".into(), v.clone()),
                    Err(e) => obj.insert(
                        "error".into(),
                        serde_json::to_value(e).unwrap_or(Value::Null),
                    ),
                };
            }
        }
        Value::Object(obj)
    }

    /// Serializes the message as one line of JSON (no trailing newline): the same object
    /// as [`Message::to_value`], written straight from the message (no copy of its params
    /// or result as a tree first; a call's params can list a context's thousand files).
    pub fn to_line(&self) -> String {
        serde_json::to_string(&Wire(self)).unwrap_or_else(|_| self.to_value().to_string())
    }
}

/// A [`Message`] as its JSON object, keys in the order [`Message::to_value`]'s map holds
/// them (sorted), borrowed rather than copied.
struct Wire<'a>(&'a Message);

impl Serialize for Wire<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        match self.0 {
            Message::Request(r) => {
                map.serialize_entry("id", &id_value(Some(&r.id)))?;
                map.serialize_entry("jsonrpc", VERSION)?;
                map.serialize_entry("method", &r.method)?;
                if let Some(p) = &r.params {
                    map.serialize_entry("params", p)?;
                }
            }
            Message::Notification(n) => {
                map.serialize_entry("jsonrpc", VERSION)?;
                map.serialize_entry("method", &n.method)?;
                if let Some(p) = &n.params {
                    map.serialize_entry("params", p)?;
                }
            }
            Message::Response(r) => match &r.outcome {
                Ok(v) => {
                    map.serialize_entry("id", &id_value(r.id.as_ref()))?;
                    map.serialize_entry("jsonrpc", VERSION)?;
                    map.serialize_entry("result", v)?;
                }
                Err(e) => {
                    map.serialize_entry("error", e)?;
                    map.serialize_entry("id", &id_value(r.id.as_ref()))?;
                    map.serialize_entry("jsonrpc", VERSION)?;
                }
            },
        }
        map.end()
    }
}

fn id_value(id: Option<&Id>) -> Value {
    match id {
        None => Value::Null,
        Some(Id::Number(n)) => (*n).into(),
        Some(Id::String(s)) => s.clone().into(),
    }
}

impl Response {
    /// A successful response.
    pub fn ok(id: Id, result: Value) -> Self {
        Self {
            id: Some(id),
            outcome: Ok(result),
        }
    }

    /// A failed response.
    pub fn error(id: Option<Id>, error: ErrorObject) -> Self {
        Self {
            id,
            outcome: Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_line_is_the_object_to_value_makes_for_every_kind_of_message() {
        let params = serde_json::json!({"files": [{"path": "a", "size": 1}], "n": 1.5});
        let messages = [
            Message::Request(Request {
                id: Id::Number(7),
                method: "m".into(),
                params: Some(params.clone()),
            }),
            Message::Request(Request {
                id: Id::String("x".into()),
                method: "m".into(),
                params: None,
            }),
            Message::Notification(Notification {
                method: "n".into(),
                params: Some(params.clone()),
            }),
            Message::Response(Response::ok(Id::Number(1), params)),
            Message::Response(Response::error(None, ErrorObject::new(-32600, "bad"))),
        ];
        for m in messages {
            let line = m.to_line();
            assert!(!line.contains('\n'), "{line}");
            let parsed: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(parsed, m.to_value(), "{line}");
        }
    }

    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn dec(v: Value) -> Result<Message, DecodeError> {
        decode(v.to_string().as_bytes())
    }

    #[test]
    fn decode_accepts_request_notification_and_responses() {
        assert!(matches!(
            dec(json!({"jsonrpc":"2.0","id":1,"method":"fetch","params":{"url":"x"}})),
            Ok(Message::Request(_))
        ));
        assert!(matches!(
            dec(json!({"jsonrpc":"2.0","method":"log"})),
            Ok(Message::Notification(_))
        ));
        assert!(matches!(
            dec(json!({"jsonrpc":"2.0","id":"a","result":null})),
            Ok(Message::Response(Response {
                outcome: Ok(Value::Null),
                ..
            }))
        ));
        let Ok(Message::Response(r)) =
            dec(json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}))
        else {
            panic!("error response with null id must decode");
        };
        assert_eq!(r.id, None);
    }

    #[test]
    fn decode_rejects_unknown_member() {
        let err = dec(json!({"jsonrpc":"2.0","id":1,"method":"m","extra":1})).unwrap_err();
        assert!(matches!(err, DecodeError::UnknownMember { ref member } if member == "extra"));
        assert_eq!(err.code(), code::INVALID_REQUEST);
        let err = dec(json!({"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","x":2}}))
            .unwrap_err();
        assert!(matches!(err, DecodeError::Malformed { .. }));
    }

    #[test]
    fn decode_rejects_wrong_version_and_batches() {
        assert!(matches!(
            dec(json!({"jsonrpc":"1.0","id":1,"method":"m"})),
            Err(DecodeError::BadVersion)
        ));
        assert!(matches!(
            dec(json!([{"jsonrpc":"2.0","id":1,"method":"m"}])),
            Err(DecodeError::NotAnObject)
        ));
    }

    #[test]
    fn decode_rejects_both_result_and_error() {
        let err = dec(json!({"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}));
        assert!(matches!(err, Err(DecodeError::Malformed { .. })));
        assert!(matches!(
            dec(json!({"jsonrpc":"2.0","id":1})),
            Err(DecodeError::Malformed { .. })
        ));
    }

    #[test]
    fn decode_rejects_bad_ids_and_params() {
        for bad in [
            json!({"jsonrpc":"2.0","id":1.5,"method":"m"}),
            json!({"jsonrpc":"2.0","id":[1],"method":"m"}),
            json!({"jsonrpc":"2.0","id":null,"method":"m"}),
            json!({"jsonrpc":"2.0","id":1,"method":"m","params":3}),
            json!({"jsonrpc":"2.0","id":1,"method":""}),
            json!({"jsonrpc":"2.0","id":1,"method":7}),
        ] {
            assert!(
                matches!(dec(bad.clone()), Err(DecodeError::Malformed { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn decode_rejects_oversize_before_parsing() {
        let big = vec![b' '; MAX_MESSAGE_BYTES + 1];
        assert!(matches!(decode(&big), Err(DecodeError::TooLarge { .. })));
    }

    #[test]
    fn decode_reports_parse_error_code() {
        let err = decode(b"{not json").unwrap_err();
        assert_eq!(err.code(), code::PARSE_ERROR);
    }

    proptest! {
        #[test]
        fn decode_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn encode_then_decode_round_trips(id in any::<i64>(), method in "[a-z]{1,10}\\.[a-z]{1,10}", n in any::<i32>()) {
            let msg = Message::Request(Request { id: Id::Number(id), method, params: Some(json!({"n": n})) });
            let back = decode(msg.to_line().as_bytes());
            prop_assert_eq!(back.ok(), Some(msg));
        }
    }
}
