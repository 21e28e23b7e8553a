//! W3C trace context (`traceparent`, <https://www.w3.org/TR/trace-context/>): a bot that
//! sends the header on a tool call gets its trace id into the core's log lines for that
//! call and, as a field of `tool.execute`, into the executor's. A malformed value is
//! ignored (the specification says to start a new trace rather than fail the request).

use std::fmt;

/// A valid `traceparent` value: `version-traceid-parentid-flags`, lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParent(String);

impl TraceParent {
    /// The header value when it is a valid version-00 (or later, same layout) traceparent
    /// whose trace id and parent id are not all zeros.
    pub fn parse(value: &str) -> Option<Self> {
        let value = value.trim();
        let mut parts = value.split('-');
        let (version, trace_id, parent_id, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        // Version 00 has exactly four fields; later versions may append more.
        if version == "00" && parts.next().is_some() {
            return None;
        }
        let hex = |s: &str, len: usize| {
            s.len() == len
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        let nonzero = |s: &str| s.bytes().any(|b| b != b'0');
        let ok = hex(version, 2)
            && version != "ff"
            && hex(trace_id, 32)
            && nonzero(trace_id)
            && hex(parent_id, 16)
            && nonzero(parent_id)
            && hex(flags, 2);
        ok.then(|| Self(format!("{version}-{trace_id}-{parent_id}-{flags}")))
    }

    /// The 32-hex-digit trace id.
    pub fn trace_id(&self) -> &str {
        self.0.get(3..35).unwrap_or_default()
    }

    /// The whole header value.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn traceparent_parses_the_specification_example() {
        let t = TraceParent::parse(GOOD).unwrap();
        assert_eq!(t.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(t.as_str(), GOOD);
    }

    #[test]
    fn traceparent_refuses_malformed_values() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\nx: y",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
        // A later version may carry more fields.
        assert!(
            TraceParent::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more")
                .is_some()
        );
    }
}
