//! SentencePiece's `nmt_nfkc` normalisation as the model was trained with it: the
//! model's precompiled character map (exported as a key → replacement table) replaces
//! the longest key starting the remaining text (else the character stays), then
//! whitespace is made SentencePiece's: leading, trailing and repeated spaces dropped,
//! every space written as U+2581, one U+2581 put in front.

use std::collections::HashMap;

use super::weights::{Reader, WeightsError, NORMALIZE};

/// The word-boundary mark SentencePiece writes for a space.
pub const SPACE: char = '\u{2581}';

/// The character map.
#[derive(Debug)]
pub struct Normalizer {
    map: HashMap<&'static str, &'static str>,
    /// The most characters a key has.
    longest: usize,
}

impl Normalizer {
    pub fn parse() -> Result<Self, WeightsError> {
        let mut r = Reader::open("normalize.bin", NORMALIZE, "SKBN")?;
        let n = r.u32()?;
        let mut map = HashMap::with_capacity(n);
        let mut longest = 1;
        for _ in 0..n {
            let (k, v) = (usize::from(r.u8()?), usize::from(r.u8()?));
            let (key, value) = (r.str(k)?, r.str(v)?);
            longest = longest.max(key.chars().count());
            map.insert(key, value);
        }
        Ok(Self { map, longest })
    }

    /// What the start of `rest` becomes, and how many bytes of it that consumes.
    fn prefix<'a>(&self, rest: &'a str) -> (&'a str, usize) {
        let mut ends: Vec<usize> = rest
            .char_indices()
            .skip(1)
            .map(|(i, _)| i)
            .take(self.longest)
            .collect();
        if ends.len() < self.longest {
            ends.push(rest.len());
        }
        for &end in ends.iter().rev() {
            if let Some(v) = rest.get(..end).and_then(|k| self.map.get(k)) {
                return (v, end);
            }
        }
        let first = ends.first().copied().unwrap_or(rest.len());
        (&rest[..first], first)
    }

    /// `text` normalised, SentencePiece's whitespace included ("" when nothing is left).
    pub fn normalize(&self, text: &str) -> String {
        let mut pos = 0;
        while pos < text.len() {
            let (p, adv) = self.prefix(&text[pos..]);
            if p != " " {
                break;
            }
            pos += adv;
        }
        if pos >= text.len() {
            return String::new();
        }
        let mut out = String::with_capacity(text.len() * 2);
        out.push(SPACE);
        let mut prev_space = true;
        while pos < text.len() {
            let (mut p, adv) = self.prefix(&text[pos..]);
            pos += adv;
            if prev_space {
                p = p.trim_start_matches(' ');
            }
            if p.is_empty() {
                continue;
            }
            if p.contains(' ') {
                out.extend(p.chars().map(|c| if c == ' ' { SPACE } else { c }));
                prev_space = p.ends_with(' ');
            } else {
                out.push_str(p);
                prev_space = false;
            }
        }
        while out.ends_with(SPACE) {
            out.pop();
        }
        out
    }
}
