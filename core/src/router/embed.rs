//! Recall by meaning: a static embedding model compiled into the core (nothing is loaded
//! or downloaded at run time). The table is WordLlama's token embeddings (its PyPI wheel
//! ships them; `scripts/build-recall-model.py` writes `core/data/recall/`): a text is cut
//! into the table's tokens (whole words first, then the longest pieces; CJK runs by the
//! longest tokens), their vectors are averaged and normalised, and a skill is as close to
//! a query as the cosine of their vectors.
//!
//! A cosine alone says little (a long query is close to everything a little), so a
//! skill's similarity is judged against the others': its z-score over the catalogue and a
//! background of real skill descriptions shipped with the table, so a small catalogue
//! is judged like a large one. [`SemanticIndex::search`] answers the skills whose z-score
//! passes `[routing] semantic_z_floor`; [`intent`] maps the z-score into `intent_match`.

use std::collections::HashMap;
use std::sync::OnceLock;

/// Dimensions of the table (the model's first 128, Matryoshka-trained).
pub const DIMS: usize = 128;

static VOCAB: &str = include_str!("../../data/recall/vocab.txt");
static VECTORS: &[u8] = include_bytes!("../../data/recall/vectors.bin");
static BACKGROUND: &[u8] = include_bytes!("../../data/recall/background.bin");

/// Words too common to carry meaning in a request.
const STOP_WORDS: [&str; 40] = [
    "the", "a", "an", "of", "to", "in", "for", "and", "or", "is", "are", "be", "i", "me", "my",
    "you", "your", "it", "this", "that", "with", "on", "at", "by", "from", "as", "will", "need",
    "can", "could", "do", "does", "what", "how", "please", "some", "would", "should", "we", "our",
];

/// The token table: each token's row, and the rows (a scale and `DIMS` int8 each).
struct Table {
    rows: HashMap<&'static str, usize>,
    longest: usize,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let rows: HashMap<&'static str, usize> =
            VOCAB.lines().enumerate().map(|(i, t)| (t, i)).collect();
        let longest = rows.keys().map(|t| t.chars().count()).max().unwrap_or(1);
        Table { rows, longest }
    })
}

/// Row `i` of a `SKBV` file (header: magic, rows, dims), added into `into`.
fn add_row(bytes: &[u8], i: usize, into: &mut [f32; DIMS]) {
    let stride = 4 + DIMS;
    let at = 12 + i * stride;
    let Some(row) = bytes.get(at..at + stride) else {
        return;
    };
    let scale = f32::from_le_bytes([row[0], row[1], row[2], row[3]]);
    for (v, b) in into.iter_mut().zip(&row[4..]) {
        *v += f32::from(i8::from_le_bytes([*b])) * scale;
    }
}

fn rows_in(bytes: &[u8]) -> usize {
    bytes
        .get(4..8)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .unwrap_or(0)
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x9FFF | 0xF900..=0xFAFF)
}

/// Whether most letters of `text` are CJK.
pub fn mostly_cjk(text: &str) -> bool {
    let (mut cjk, mut other) = (0usize, 0usize);
    for c in text.chars() {
        if is_cjk(c) {
            cjk += 1;
        } else if c.is_alphanumeric() {
            other += 1;
        }
    }
    // A CJK character carries about a word, a Latin word about five letters.
    cjk * 5 > other
}

/// The table's tokens of `text`, in order.
pub fn tokens(text: &str) -> Vec<&'static str> {
    let t = table();
    let mut out = Vec::new();
    let mut push = |candidate: &str| -> bool {
        match t.rows.get_key_value(candidate) {
            Some((k, _)) => {
                out.push(*k);
                true
            }
            None => false,
        }
    };
    let mut word = String::new();
    let flush = |word: &mut String, push: &mut dyn FnMut(&str) -> bool| {
        if word.is_empty() {
            return;
        }
        let chars: Vec<char> = word.chars().collect();
        if is_cjk(chars[0]) {
            longest_pieces(&chars, t.longest, push);
        } else {
            let lower = word.to_lowercase();
            if !STOP_WORDS.contains(&lower.as_str())
                && !push(&format!("\u{2581}{word}"))
                && !push(&format!("\u{2581}{lower}"))
            {
                let chars: Vec<char> = lower.chars().collect();
                longest_pieces(&chars, t.longest, push);
            }
        }
        word.clear();
    };
    for c in text.chars() {
        let same_kind = word.chars().next().is_none_or(|w| is_cjk(w) == is_cjk(c));
        if (c.is_ascii_alphanumeric() || is_cjk(c)) && same_kind {
            word.push(c);
        } else {
            flush(&mut word, &mut push);
            if c.is_ascii_alphanumeric() || is_cjk(c) {
                word.push(c);
            }
        }
    }
    flush(&mut word, &mut push);
    out
}

/// Cuts `chars` into the longest tokens of the table, from the left (the first piece may
/// carry the word-start mark); characters no token covers are skipped.
fn longest_pieces(chars: &[char], longest: usize, push: &mut dyn FnMut(&str) -> bool) {
    let mut i = 0;
    let mut first = true;
    while i < chars.len() {
        let most = longest.min(chars.len() - i);
        let piece = |len: usize| chars[i..i + len].iter().collect::<String>();
        // A word's first piece is looked for with the word-start mark first, as the
        // model's tokenizer cuts it.
        let marked = if first {
            (1..=most)
                .rev()
                .find(|&len| push(&format!("\u{2581}{}", piece(len))))
        } else {
            None
        };
        let taken = marked.or_else(|| (1..=most).rev().find(|&len| push(&piece(len))));
        i += taken.unwrap_or(1);
        first = false;
    }
}

/// The normalised embedding of `text`, none when no token of it is in the table.
pub fn embed(text: &str) -> Option<[f32; DIMS]> {
    let t = table();
    let toks = tokens(text);
    if toks.is_empty() {
        return None;
    }
    let mut v = [0f32; DIMS];
    for tok in toks {
        if let Some(&row) = t.rows.get(tok) {
            add_row(VECTORS, row, &mut v);
        }
    }
    normalise(&mut v).then_some(v)
}

fn normalise(v: &mut [f32; DIMS]) -> bool {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n <= f32::EPSILON {
        return false;
    }
    v.iter_mut().for_each(|x| *x /= n);
    true
}

/// A unit vector as int8 (x 127), for fast dot products.
fn quantise(v: &[f32; DIMS]) -> [i8; DIMS] {
    let mut q = [0i8; DIMS];
    for (o, x) in q.iter_mut().zip(v) {
        // Clamped to the i8 range first, so the cast cannot truncate.
        #[allow(clippy::cast_possible_truncation)]
        let b = (x * 127.0).round().clamp(-127.0, 127.0) as i8;
        *o = b;
    }
    q
}

/// The dot product of two int8 unit vectors, in lanes of 16 the compiler vectorises.
fn dot(a: &[i8; DIMS], b: &[i8; DIMS]) -> f32 {
    let mut lanes = [0i32; 16];
    for (ca, cb) in a.chunks_exact(16).zip(b.chunks_exact(16)) {
        for ((l, x), y) in lanes.iter_mut().zip(ca).zip(cb) {
            *l += i32::from(*x) * i32::from(*y);
        }
    }
    lanes.iter().sum::<i32>() as f32 / (127.0 * 127.0)
}

/// The similarity of every skill to one query, and their spread.
#[derive(Debug, Clone, Default)]
pub struct Scored {
    /// Cosine similarity by skill number (`NaN`: the skill has no embedding).
    sims: Vec<f32>,
    mean: f32,
    sd: f32,
}

impl Scored {
    /// How many standard deviations above the catalogue and background skill `doc` is.
    pub fn z(&self, doc: usize) -> Option<f32> {
        let s = *self.sims.get(doc)?;
        (!s.is_nan() && self.sd > f32::EPSILON).then(|| (s - self.mean) / self.sd)
    }

    /// The cosine similarity of skill `doc`.
    pub fn similarity(&self, doc: usize) -> Option<f32> {
        self.sims.get(doc).copied().filter(|s| !s.is_nan())
    }

    /// The `k` most similar skills whose z-score is at least `floor`, best first: one
    /// pass, no sort of the catalogue.
    pub fn top(&self, k: usize, floor: f64) -> Vec<usize> {
        let mut best: Vec<(f32, usize)> = Vec::with_capacity(k + 1);
        for (doc, &s) in self.sims.iter().enumerate() {
            if s.is_nan() || best.len() == k && best.last().is_some_and(|(b, _)| s <= *b) {
                continue;
            }
            if self.z(doc).is_none_or(|z| f64::from(z) < floor) {
                continue;
            }
            let at = best.partition_point(|(b, _)| *b >= s);
            best.insert(at, (s, doc));
            best.truncate(k);
        }
        best.into_iter().map(|(_, d)| d).collect()
    }
}

/// The skills' embeddings.
#[derive(Debug, Default)]
pub struct SemanticIndex {
    /// By skill number; a skill without embedding has zeros and `false` in `embedded`.
    docs: Vec<[i8; DIMS]>,
    embedded: Vec<bool>,
    background: Vec<[i8; DIMS]>,
}

impl SemanticIndex {
    /// Embeds each skill's text.
    pub fn build<'a>(texts: impl Iterator<Item = &'a str>) -> Self {
        let (docs, embedded) = texts
            .map(|t| match embed(t) {
                Some(v) => (quantise(&v), true),
                None => ([0i8; DIMS], false),
            })
            .unzip();
        let background = (0..rows_in(BACKGROUND))
            .map(|i| {
                let mut v = [0f32; DIMS];
                add_row(BACKGROUND, i, &mut v);
                normalise(&mut v);
                quantise(&v)
            })
            .collect();
        Self {
            docs,
            embedded,
            background,
        }
    }

    /// Every skill's similarity to `query`; `None` when the query has no token in the
    /// table.
    pub fn search(&self, query: &str) -> Option<Scored> {
        let q = quantise(&embed(query)?);
        let sims: Vec<f32> = self
            .docs
            .iter()
            .zip(&self.embedded)
            .map(|(d, &e)| if e { dot(&q, d) } else { f32::NAN })
            .collect();
        let (mut n, mut sum, mut sq) = (0f32, 0f32, 0f32);
        for s in sims
            .iter()
            .copied()
            .filter(|s| !s.is_nan())
            .chain(self.background.iter().map(|b| dot(&q, b)))
        {
            n += 1.0;
            sum += s;
            sq += s * s;
        }
        if n < 2.0 {
            return None;
        }
        let mean = sum / n;
        let sd = (sq / n - mean * mean).max(0.0).sqrt();
        Some(Scored { sims, mean, sd })
    }
}

/// `intent_match` from a z-score: 0 at `floor`, 1 at `full`, linear between.
pub fn intent(z: f32, floor: f64, full: f64) -> f64 {
    let span = (full - floor).max(f64::EPSILON);
    ((f64::from(z) - floor) / span).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_cjk_runs_become_table_tokens() {
        let t = tokens("Will I need an umbrella in Paris?");
        assert!(t.contains(&"\u{2581}Paris"), "{t:?}");
        // A word the table lacks whole is cut into its longest pieces, the first marked.
        assert!(t.iter().any(|x| x.starts_with("\u{2581}um")), "{t:?}");
        assert!(
            !t.iter().any(|x| x.ends_with("will") || x.ends_with("an")),
            "{t:?}"
        );
        assert!(!tokens("天气").is_empty());
        assert!(tokens("!!! ???").is_empty());
    }

    #[test]
    fn meaning_is_closer_than_unrelated_text() {
        let docs = [
            "weather: current weather and forecasts for any city",
            "github: pull requests, issues and CI runs",
            "spotify-player: play music",
        ];
        let index = SemanticIndex::build(docs.iter().copied());
        let scored = index
            .search("will I need an umbrella in Paris tomorrow")
            .unwrap();
        assert_eq!(scored.top(1, f64::MIN), [0]);
        assert_eq!(scored.top(3, f64::MIN).len(), 3);
        assert!(scored.z(0).unwrap() > scored.z(1).unwrap());
        assert!(scored.z(0).unwrap() > scored.z(2).unwrap());
        assert_eq!(scored.top(3, 100.0), Vec::<usize>::new());
        assert!(index.search("?!").is_none());
    }

    #[test]
    fn intent_rises_from_floor_to_full() {
        assert_eq!(intent(2.0, 3.0, 4.5), 0.0);
        assert_eq!(intent(6.0, 3.0, 4.5), 1.0);
        assert!((intent(3.75, 3.0, 4.5) - 0.5).abs() < 1e-6);
    }
}
