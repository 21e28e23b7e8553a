//! Percent-escapes in request paths and resource URIs (RFC 3986 §2.1): decoded once where
//! a route's parameters are captured (`table.rs`) and where a context file's resource URI
//! is parsed (MCP), and made where a client writes such a path (the CLI, MCP's resource
//! links), so that a file named `my file.txt` is that name whether it came as
//! `my%20file.txt` over REST, the CLI or MCP.

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, CONTROLS};

/// What a path segment escapes: controls, space, and the characters a URI gives a meaning
/// (RFC 3986 §3.3 `pchar` keeps the rest).
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// `segment` with its percent-escapes decoded; `Err` names it when the bytes are not
/// UTF-8.
pub fn decode(segment: &str) -> Result<String, String> {
    percent_decode_str(segment)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| format!("{segment:?} is not UTF-8 once its percent-escapes are decoded"))
}

/// `path` (`/`-separated) with each segment escaped for a URI path.
pub fn encode_path(path: &str) -> String {
    path.split('/')
        .map(|s| utf8_percent_encode(s, SEGMENT).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_names_round_trip() {
        for name in [
            "my file.txt",
            "out/a b.csv",
            "100%.txt",
            "q?#x",
            "\u{e9}t\u{e9}.md",
        ] {
            let encoded = encode_path(name);
            assert!(!encoded.contains(' '), "{encoded}");
            let decoded: Vec<String> = encoded.split('/').map(|s| decode(s).unwrap()).collect();
            assert_eq!(decoded.join("/"), name);
        }
        assert_eq!(encode_path("a/b c"), "a/b%20c");
        assert!(decode("%FF").unwrap_err().contains("not UTF-8"));
    }
}
