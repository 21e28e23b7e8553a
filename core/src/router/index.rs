//! The semantic-recall index: BM25 (k1 = 1.2, b = 0.75) over a small CJK-aware tokenizer.
//!
//! Tokens: Latin (and other non-CJK) letters and digits form words, lowercased, split at
//! anything else (so `apple-notes` is `apple` + `notes`), a few English stop words dropped
//! and a light suffix stemmer applied (`reminders` = `reminder`, `editing` = `edit`); CJK
//! text becomes its characters (unigrams) and overlapping character bigrams, so `天气预报`
//! matches `天气` without a dictionary. Postings are sorted by document, scores accumulate
//! in a dense vector: a query costs one pass over the postings of its terms.

use std::collections::HashMap;

/// BM25 term-frequency saturation.
pub const K1: f64 = 1.2;
/// BM25 length normalisation.
pub const B: f64 = 0.75;

const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "how", "i", "in",
    "is", "it", "me", "my", "of", "on", "or", "please", "the", "this", "that", "to", "use",
    "using", "what", "when", "with", "you", "your", "want", "need", "some", "s",
];

/// Whether `c` is written without spaces between words (Han, kana, Hangul).
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // hiragana, katakana
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0x20000..=0x2FA1F) // CJK extensions B..
}

/// Strips a plural or verb suffix so word forms share a token.
fn stem(word: &str) -> String {
    let n = word.len();
    if !word.is_ascii() || n <= 3 {
        return word.to_string();
    }
    if let Some(s) = word.strip_suffix("ies").filter(|_| n > 4) {
        return format!("{s}y");
    }
    if let Some(s) = word.strip_suffix("ing").filter(|_| n > 5) {
        return s.to_string();
    }
    if let Some(s) = word.strip_suffix("ed").filter(|_| n > 4) {
        return s.to_string();
    }
    if word.ends_with('s') && !word.ends_with("ss") && !word.ends_with("us") {
        return word[..n - 1].to_string();
    }
    word.to_string()
}

/// The index terms of `text`, in order (duplicates kept: they are term frequencies).
pub fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut cjk: Vec<char> = Vec::new();
    let flush_word = |word: &mut String, out: &mut Vec<String>| {
        if !word.is_empty() {
            let w = std::mem::take(word);
            if !STOP_WORDS.contains(&w.as_str()) {
                out.push(stem(&w));
            }
        }
    };
    let flush_cjk = |cjk: &mut Vec<char>, out: &mut Vec<String>| {
        for (i, c) in cjk.iter().enumerate() {
            out.push(c.to_string());
            if let Some(next) = cjk.get(i + 1) {
                out.push(format!("{c}{next}"));
            }
        }
        cjk.clear();
    };
    for c in text.chars() {
        if is_cjk(c) {
            flush_word(&mut word, &mut out);
            cjk.push(c);
        } else if c.is_alphanumeric() {
            flush_cjk(&mut cjk, &mut out);
            word.extend(c.to_lowercase());
        } else {
            flush_word(&mut word, &mut out);
            flush_cjk(&mut cjk, &mut out);
        }
    }
    flush_word(&mut word, &mut out);
    flush_cjk(&mut cjk, &mut out);
    out
}

/// The distinct terms of a query, in first-seen order.
pub fn query_terms(text: &str) -> Vec<String> {
    let mut seen = Vec::new();
    for t in tokenize(text) {
        if !seen.contains(&t) {
            seen.push(t);
        }
    }
    seen
}

#[derive(Debug, Clone)]
struct Term {
    idf: f64,
    /// (document, term frequency), sorted by document.
    postings: Vec<(u32, u32)>,
}

/// A BM25 index over documents numbered in insertion order.
#[derive(Debug, Clone, Default)]
pub struct Bm25Index {
    terms: HashMap<String, Term>,
    doc_len: Vec<f64>,
    avg_len: f64,
}

/// One hit of a search.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The document's number.
    pub doc: usize,
    /// Its BM25 score.
    pub score: f64,
}

impl Bm25Index {
    /// Indexes `docs` (each already a list of terms, see [`tokenize`]).
    pub fn build(docs: &[Vec<String>]) -> Self {
        let mut postings: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut doc_len = Vec::with_capacity(docs.len());
        for (i, doc) in docs.iter().enumerate() {
            let id = u32::try_from(i).unwrap_or(u32::MAX);
            doc_len.push(doc.len() as f64);
            let mut tf: HashMap<&str, u32> = HashMap::new();
            for t in doc {
                *tf.entry(t.as_str()).or_default() += 1;
            }
            for (t, n) in tf {
                postings.entry(t.to_string()).or_default().push((id, n));
            }
        }
        let n = docs.len() as f64;
        let avg_len = if docs.is_empty() {
            1.0
        } else {
            (doc_len.iter().sum::<f64>() / n).max(1.0)
        };
        let terms = postings
            .into_iter()
            .map(|(t, mut p)| {
                p.sort_unstable();
                let df = p.len() as f64;
                let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                (t, Term { idf, postings: p })
            })
            .collect();
        Self {
            terms,
            doc_len,
            avg_len,
        }
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.doc_len.len()
    }

    /// Whether the index holds no document.
    pub fn is_empty(&self) -> bool {
        self.doc_len.is_empty()
    }

    /// The IDF of a term found in exactly one document: what one rare matching word is
    /// worth, the unit intent calibration divides by.
    pub fn rare_idf(&self) -> f64 {
        let n = self.len() as f64;
        (1.0 + (n - 0.5) / 1.5).ln().max(f64::EPSILON)
    }

    fn term_score(&self, term: &Term, doc: usize, tf: u32) -> f64 {
        let tf = f64::from(tf);
        let len = self.doc_len.get(doc).copied().unwrap_or(self.avg_len);
        let norm = K1 * (1.0 - B + B * len / self.avg_len);
        term.idf * tf * (K1 + 1.0) / (tf + norm)
    }

    /// The `k` best documents for `terms` with a score above zero, best first (ties by
    /// document number).
    pub fn search(&self, terms: &[String], k: usize) -> Vec<Hit> {
        let mut acc = vec![0.0f64; self.len()];
        for t in terms {
            if let Some(term) = self.terms.get(t) {
                for &(doc, tf) in &term.postings {
                    let d = doc as usize;
                    if let Some(a) = acc.get_mut(d) {
                        *a += self.term_score(term, d, tf);
                    }
                }
            }
        }
        let mut hits: Vec<Hit> = acc
            .into_iter()
            .enumerate()
            .filter(|(_, s)| *s > 0.0)
            .map(|(doc, score)| Hit { doc, score })
            .collect();
        let order = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc));
        if k == 0 {
            return Vec::new();
        }
        if hits.len() > k {
            // Top-k without sorting every hit: O(n) selection, then sort the k.
            hits.select_nth_unstable_by(k - 1, order);
            hits.truncate(k);
        }
        hits.sort_by(order);
        hits
    }

    /// The scores of `docs` (no matched terms kept): the terms are looked up once, so
    /// ranking thousands of recalled skills costs a binary search per term and skill.
    pub fn scores_of(&self, terms: &[String], docs: &[usize]) -> Vec<f64> {
        let found: Vec<_> = terms.iter().filter_map(|t| self.terms.get(t)).collect();
        docs.iter()
            .map(|&doc| {
                let id = u32::try_from(doc).unwrap_or(u32::MAX);
                found
                    .iter()
                    .filter_map(|term| {
                        let i = term.postings.binary_search_by_key(&id, |p| p.0).ok()?;
                        let &(_, tf) = term.postings.get(i)?;
                        Some(self.term_score(term, doc, tf))
                    })
                    .sum()
            })
            .collect()
    }

    /// The score of one document and the query terms it contains.
    pub fn score_doc(&self, terms: &[String], doc: usize) -> (f64, Vec<String>) {
        let mut score = 0.0;
        let mut matched = Vec::new();
        let id = u32::try_from(doc).unwrap_or(u32::MAX);
        for t in terms {
            let Some(term) = self.terms.get(t) else {
                continue;
            };
            if let Ok(i) = term.postings.binary_search_by_key(&id, |p| p.0) {
                if let Some(&(_, tf)) = term.postings.get(i) {
                    score += self.term_score(term, doc, tf);
                    matched.push(t.clone());
                }
            }
        }
        (score, matched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenize_splits_latin_words_and_drops_stop_words() {
        assert_eq!(
            tokenize("Use the Apple-Notes skill for Reminders"),
            vec!["apple", "note", "skill", "reminder"]
        );
    }

    #[test]
    fn tokenize_gives_cjk_unigrams_and_bigrams() {
        assert_eq!(
            tokenize("查天气 PDF"),
            vec!["查", "查天", "天", "天气", "气", "pdf"]
        );
    }

    #[test]
    fn search_ranks_the_document_with_the_rare_term_first() {
        let docs: Vec<Vec<String>> = [
            "weather forecast for a city",
            "notes on a city",
            "play music",
        ]
        .iter()
        .map(|d| tokenize(d))
        .collect();
        let index = Bm25Index::build(&docs);
        let hits = index.search(&query_terms("city weather"), 3);
        assert_eq!(hits.first().map(|h| h.doc), Some(0));
        assert_eq!(hits.len(), 2);
        let (score, matched) = index.score_doc(&query_terms("city weather"), 0);
        assert!((score - hits[0].score).abs() < 1e-9);
        assert_eq!(matched, vec!["city", "weather"]);
    }

    #[test]
    fn search_of_unknown_terms_is_empty() {
        let index = Bm25Index::build(&[tokenize("play music")]);
        assert!(index
            .search(&query_terms("quantum chromodynamics"), 3)
            .is_empty());
    }
}
