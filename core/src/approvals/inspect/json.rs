//! The JSON half of [`super`]: a reader of one JSON text that keeps nothing but what would
//! mislead an operator: a key given twice in one object, and a number a parser reading
//! doubles would change. It never builds the value, so nothing is re-encoded.

use super::{visible, Warning, WarningKind};

/// The deepest nesting of a JSON text that is inspected; a deeper one is a warning itself.
pub const MAX_DEPTH: usize = 128;

/// The warnings of a JSON text: keys given twice in one object and numbers a parser
/// would change. `None` when `text` is not one JSON value (nothing to say about JSON).
pub fn json_warnings(text: &str) -> Option<Vec<Warning>> {
    let mut scan = Scan {
        s: text.as_bytes(),
        at: 0,
        warnings: Vec::new(),
    };
    scan.ws();
    match scan.value("$", 0) {
        Ok(()) => {}
        // Deeper than anyone reads: the warnings so far, and that one.
        Err(Stop::TooDeep) => return Some(scan.warnings),
        Err(Stop::NotJson) => return None,
    }
    scan.ws();
    (scan.at == scan.s.len()).then_some(scan.warnings)
}

/// A JSON reader that keeps nothing but the warnings.
struct Scan<'a> {
    s: &'a [u8],
    at: usize,
    warnings: Vec<Warning>,
}

/// Why the reader stopped.
enum Stop {
    /// Not JSON.
    NotJson,
    /// Nested past [`MAX_DEPTH`].
    TooDeep,
}

use Stop::NotJson;

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Result<(), Stop> {
        if self.peek() == Some(b) {
            self.at += 1;
            Ok(())
        } else {
            Err(NotJson)
        }
    }

    fn value(&mut self, path: &str, depth: usize) -> Result<(), Stop> {
        if depth > MAX_DEPTH {
            self.warnings.push(Warning {
                kind: WarningKind::TooDeep,
                detail: format!("the JSON nests deeper than {MAX_DEPTH} levels at {path}; it was not inspected further"),
            });
            return Err(Stop::TooDeep);
        }
        match self.peek().ok_or(NotJson)? {
            b'{' => self.object(path, depth),
            b'[' => self.array(path, depth),
            b'"' => self.string().map(drop),
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            _ => self.number(path),
        }
    }

    fn word(&mut self, w: &[u8]) -> Result<(), Stop> {
        if self.s[self.at..].starts_with(w) {
            self.at += w.len();
            Ok(())
        } else {
            Err(NotJson)
        }
    }

    fn object(&mut self, path: &str, depth: usize) -> Result<(), Stop> {
        self.eat(b'{')?;
        self.ws();
        let mut keys: Vec<String> = Vec::new();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(());
        }
        loop {
            self.ws();
            let key = self.string()?;
            let inner = format!("{path}.{}", visible(&key));
            if keys.contains(&key) {
                self.warnings.push(Warning {
                    kind: WarningKind::DuplicateKey,
                    detail: format!(
                        "the key {:?} appears more than once in the object at {path}: parsers disagree on which value counts",
                        visible(&key)
                    ),
                });
            } else {
                keys.push(key);
            }
            self.ws();
            self.eat(b':')?;
            self.ws();
            self.value(&inner, depth + 1)?;
            self.ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(NotJson),
            }
        }
    }

    fn array(&mut self, path: &str, depth: usize) -> Result<(), Stop> {
        self.eat(b'[')?;
        self.ws();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(());
        }
        let mut i = 0usize;
        loop {
            self.ws();
            self.value(&format!("{path}[{i}]"), depth + 1)?;
            i += 1;
            self.ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(NotJson),
            }
        }
    }

    /// A string, decoded (so that `"a"` and `"\u0061"` are the same key).
    fn string(&mut self) -> Result<String, Stop> {
        let start = self.at;
        self.eat(b'"')?;
        loop {
            match self.peek().ok_or(NotJson)? {
                b'"' => {
                    self.at += 1;
                    break;
                }
                b'\\' => self.at += 2,
                b if b < 0x20 => return Err(NotJson),
                _ => self.at += 1,
            }
        }
        let raw = self.s.get(start..self.at).ok_or(NotJson)?;
        serde_json::from_slice::<String>(raw).map_err(|_| NotJson)
    }

    fn number(&mut self, path: &str) -> Result<(), Stop> {
        let start = self.at;
        while matches!(
            self.peek(),
            Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        ) {
            self.at += 1;
        }
        let literal = std::str::from_utf8(&self.s[start..self.at]).map_err(|_| NotJson)?;
        if !is_number(literal) {
            return Err(NotJson);
        }
        if let Some(why) = inexact(literal) {
            self.warnings.push(Warning {
                kind: WarningKind::InexactNumber,
                detail: format!("the number {literal} at {path} {why}"),
            });
        }
        Ok(())
    }
}

/// Whether `literal` is a JSON number: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
fn is_number(literal: &str) -> bool {
    let b = literal.strip_prefix('-').unwrap_or(literal).as_bytes();
    let digits = |from: usize| b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let mut at = match b.first() {
        Some(b'0') => 1,
        Some(b'1'..=b'9') => 1 + digits(1),
        _ => return false,
    };
    if b.get(at) == Some(&b'.') {
        let n = digits(at + 1);
        if n == 0 {
            return false;
        }
        at += 1 + n;
    }
    if matches!(b.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(b.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        let n = digits(at);
        if n == 0 {
            return false;
        }
        at += n;
    }
    at == b.len()
}

/// Largest integer every JSON parser reads exactly (2^53 - 1: doubles, JavaScript).
pub const MAX_EXACT_INTEGER: u64 = (1 << 53) - 1;

/// Why a valid JSON number literal would be read as another number by a parser that
/// reads doubles, or `None`: an integer past 2^53 - 1, more significant digits than a
/// double keeps (15 always survive), or a value past a double's range.
fn inexact(literal: &str) -> Option<String> {
    let unsigned = literal.trim_start_matches('-');
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], Some(&unsigned[i + 1..])),
        None => (unsigned, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if exponent.is_none() && frac.is_empty() {
        let big = int.len() > 16 || int.parse::<u64>().map_or(true, |n| n > MAX_EXACT_INTEGER);
        return big.then(|| {
            "is past 2^53 - 1: a parser that reads doubles (JavaScript, many others) reads another integer".to_string()
        });
    }
    let digits = format!("{int}{frac}");
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len();
    if significant > 15 {
        return Some(format!(
            "has {significant} significant digits: a double keeps 15 for sure, so a parser may read another number"
        ));
    }
    let value: f64 = literal.parse().ok()?;
    if value.is_infinite() {
        return Some("is past the range of a double: a parser reads infinity or refuses it".into());
    }
    if value == 0.0 && significant > 0 {
        return Some("is too small for a double: a parser reads 0".into());
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn kinds(text: &str) -> Vec<WarningKind> {
        json_warnings(text)
            .unwrap()
            .into_iter()
            .map(|w| w.kind)
            .collect()
    }

    #[test]
    fn json_with_a_duplicate_key_is_flagged_at_any_depth_and_in_any_spelling() {
        let w = json_warnings(r#"{"to":"bob","amount":1,"x":{"a":1},"amount":1000000}"#).unwrap();
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].kind, WarningKind::DuplicateKey);
        assert!(w[0].detail.contains("\"amount\""), "{}", w[0].detail);
        assert!(w[0].detail.contains("at $"), "{}", w[0].detail);
        // An escape spells the same key.
        assert_eq!(
            kinds(r#"[{"k":{"amount":1,"\u0061mount":2}}]"#),
            [WarningKind::DuplicateKey]
        );
        let w = json_warnings(r#"[{"k":{"amount":1,"\u0061mount":2}}]"#).unwrap();
        assert!(w[0].detail.contains("at $[0].k"), "{}", w[0].detail);
        // The same key in two objects is fine.
        assert!(kinds(r#"[{"a":1},{"a":2}]"#).is_empty());
    }

    #[test]
    fn json_numbers_a_double_would_change_are_flagged() {
        for n in [
            "100000000000000000000",
            "9007199254740993",
            "-9007199254740993",
            "0.12345678901234567",
            "1e400",
            "1e-400",
        ] {
            assert_eq!(
                kinds(&format!("{{\"amount\":{n}}}")),
                [WarningKind::InexactNumber],
                "{n}"
            );
        }
        for n in [
            "9007199254740991",
            "-42",
            "0",
            "1.5",
            "1e20",
            "123456789012345",
            "0.000001",
        ] {
            assert!(kinds(&format!("[{n}]")).is_empty(), "{n}");
        }
        let w = json_warnings(r#"{"amount":100000000000000000000}"#).unwrap();
        assert!(
            w[0].detail.contains("100000000000000000000 at $.amount"),
            "{}",
            w[0].detail
        );
    }

    #[test]
    fn text_that_is_not_one_json_value_has_no_json_warnings() {
        for t in [
            "pay 1 coin",
            "{\"a\":1} trailing",
            "{\"a\":}",
            "[1,]",
            "",
            "\"unterminated",
            "[01]",
            "[1.]",
            "[-]",
            "[1e]",
            "[+1]",
        ] {
            assert!(json_warnings(t).is_none(), "{t}");
        }
    }

    #[test]
    fn json_nested_past_the_limit_is_a_warning_not_a_crash() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let w = json_warnings(&deep).unwrap();
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].kind, WarningKind::TooDeep);
    }
}
