//! What an operator must be warned about in text before approving it: characters that
//! show as nothing or change the direction of what follows, and, in a JSON text, a key
//! given twice in one object or a number a JSON parser would read as another number.
//! The text itself is never re-encoded: the console shows its exact characters, with each
//! flagged character drawn as a `<U+XXXX>` badge ([`segments`]).
//!
//! Invisible characters are Unicode's whole `Cf` (format) category, looked up in the
//! `unicode-general-category` crate (Unicode 16 tables, maintained, already in the build
//! through `jsonschema`) rather than a hand-kept list of ranges that would age with each
//! Unicode release; plus the other categories that draw nothing or that an eye cannot
//! tell from a space: line and paragraph separators, spaces other than U+0020, private-use
//! and unassigned code points, variation selectors, the combining grapheme joiner and the
//! Hangul fillers. Control characters (`Cc`) never reach here: a payload with them (tab
//! and newline aside) is shown as hex.

use serde::Serialize;
use unicode_general_category::{get_general_category, GeneralCategory};

mod json;

pub use json::{json_warnings, MAX_DEPTH, MAX_EXACT_INTEGER};

/// What a warning is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// A character that shows as nothing or reorders the text around it.
    InvisibleCharacter,
    /// A JSON object with one key twice: parsers keep the first, the last, or refuse.
    DuplicateKey,
    /// A JSON number a parser reading doubles would change.
    InexactNumber,
    /// JSON nested deeper than [`MAX_DEPTH`]: not inspected further.
    TooDeep,
}

/// One thing the operator must see before approving.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// What it is about.
    pub kind: WarningKind,
    /// Where and what, in words.
    pub detail: String,
}

/// Whether `c` is drawn as nothing (or as a plain space) or changes the direction of the
/// text: shown as a badge and warned about.
pub fn is_hidden(c: char) -> bool {
    use GeneralCategory as G;
    match get_general_category(c) {
        G::Format
        | G::LineSeparator
        | G::ParagraphSeparator
        | G::PrivateUse
        | G::Unassigned
        | G::Surrogate => true,
        G::SpaceSeparator => c != ' ',
        _ => matches!(
            c,
            '\u{034F}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{3164}'
                | '\u{FFA0}'
                | '\u{2800}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{E0100}'..='\u{E01EF}'
        ),
    }
}

/// `<U+202E>`: how a hidden character is drawn.
pub fn badge(c: char) -> String {
    format!("<U+{:04X}>", u32::from(c))
}

/// A run of a text: plain characters, or one hidden character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment<'a> {
    /// Characters shown as they are.
    Plain(&'a str),
    /// A character shown as its badge.
    Hidden(char),
}

/// `text` cut into plain runs and hidden characters, in order: together they are exactly
/// `text`.
pub fn segments(text: &str) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    for (at, c) in text.char_indices() {
        if is_hidden(c) {
            if start < at {
                out.push(Segment::Plain(&text[start..at]));
            }
            out.push(Segment::Hidden(c));
            start = at + c.len_utf8();
        }
    }
    if start < text.len() {
        out.push(Segment::Plain(&text[start..]));
    }
    out
}

/// `text` with each hidden character written as its badge (for one-line views).
pub fn visible(text: &str) -> String {
    segments(text)
        .into_iter()
        .map(|s| match s {
            Segment::Plain(p) => p.to_string(),
            Segment::Hidden(c) => badge(c),
        })
        .collect()
}

/// One warning per distinct hidden character of `text`, with how often it occurs.
pub fn hidden_characters(text: &str) -> Vec<Warning> {
    let mut seen: Vec<(char, usize)> = Vec::new();
    for c in text.chars().filter(|c| is_hidden(*c)) {
        match seen.iter_mut().find(|(s, _)| *s == c) {
            Some((_, n)) => *n += 1,
            None => seen.push((c, 1)),
        }
    }
    seen.into_iter()
        .map(|(c, n)| Warning {
            kind: WarningKind::InvisibleCharacter,
            detail: format!(
                "{} ({}) occurs {n} time{}: it shows as nothing or reorders the text around it",
                badge(c),
                category_name(c),
                if n == 1 { "" } else { "s" }
            ),
        })
        .collect()
}

fn category_name(c: char) -> &'static str {
    use GeneralCategory as G;
    match get_general_category(c) {
        G::Format => "a format character",
        G::LineSeparator | G::ParagraphSeparator => "a line or paragraph separator",
        G::SpaceSeparator => "a space other than U+0020",
        G::PrivateUse => "a private-use character",
        G::Unassigned | G::Surrogate => "an unassigned code point",
        _ => "a character drawn as nothing",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn hidden_characters_are_the_whole_format_category_and_lookalike_spaces() {
        // Bidirectional overrides and isolates, zero-width characters, the BOM, the soft
        // hyphen, tag characters, the Arabic number sign: all Cf.
        for c in [
            '\u{202E}',
            '\u{202A}',
            '\u{2066}',
            '\u{2069}',
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{2060}',
            '\u{FEFF}',
            '\u{00AD}',
            '\u{E0041}',
            '\u{0600}',
            '\u{061C}',
            '\u{200E}',
        ] {
            assert!(is_hidden(c), "{}", badge(c));
        }
        for c in [
            '\u{2028}', '\u{00A0}', '\u{3000}', '\u{E000}', '\u{FE0F}', '\u{3164}',
        ] {
            assert!(is_hidden(c), "{}", badge(c));
        }
        for c in ['a', ' ', 'é', '€', '中', '\n', '\t', 'ـ'] {
            assert!(!is_hidden(c), "{}", badge(c));
        }
    }

    #[test]
    fn segments_draw_each_hidden_character_as_a_badge_and_keep_the_rest() {
        let text = "pay bob\u{202E}001 ,\u{200B}\u{2060}x";
        let s = segments(text);
        assert_eq!(
            s,
            [
                Segment::Plain("pay bob"),
                Segment::Hidden('\u{202E}'),
                Segment::Plain("001 ,"),
                Segment::Hidden('\u{200B}'),
                Segment::Hidden('\u{2060}'),
                Segment::Plain("x"),
            ]
        );
        assert_eq!(visible(text), "pay bob<U+202E>001 ,<U+200B><U+2060>x");
        let w = hidden_characters(&format!("{text}\u{202E}"));
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(
            w[0].detail
                .starts_with("<U+202E> (a format character) occurs 2 times"),
            "{}",
            w[0].detail
        );
    }
}
