//! The model's SentencePiece unigram tokenizer: the text normalised ([`super::normalize`]),
//! then cut into the pieces whose scores sum highest (Viterbi over the lattice of every
//! piece that matches at each character; a character no piece starts with becomes
//! `<unk>` at the lowest score less 10), wrapped in `<s>` … `</s>`.

use std::collections::HashMap;

use super::normalize::Normalizer;
use super::weights::{Reader, WeightsError, PIECES};

const UNK: u32 = 0;
const BOS: u32 = 1;
const EOS: u32 = 2;

/// The vocabulary.
#[derive(Debug)]
pub struct Tokenizer {
    normalizer: Normalizer,
    /// Piece → (id, score).
    pieces: HashMap<&'static str, (u32, f64)>,
    /// The most characters of a piece starting with each character.
    longest: HashMap<char, usize>,
    unk_score: f64,
}

impl Tokenizer {
    pub fn parse() -> Result<Self, WeightsError> {
        let mut r = Reader::open("pieces.bin", PIECES, "SKBP")?;
        let n = r.u32()?;
        let mut pieces = HashMap::with_capacity(n);
        let mut longest: HashMap<char, usize> = HashMap::new();
        let mut lowest = f64::INFINITY;
        for id in 0..n {
            let score = f64::from(r.f32()?);
            let len = usize::from(r.u16()?);
            let piece = r.str(len)?;
            lowest = lowest.min(score);
            if let Some(first) = piece.chars().next() {
                let most = longest.entry(first).or_insert(0);
                *most = (*most).max(piece.chars().count());
            }
            // Ids fit: the vocabulary has 128,000 pieces.
            #[allow(clippy::cast_possible_truncation)]
            pieces.insert(piece, (id as u32, score));
        }
        Ok(Self {
            normalizer: Normalizer::parse()?,
            pieces,
            longest,
            unk_score: lowest - 10.0,
        })
    }

    /// The piece ids of `text`, `<s>` first and `</s>` last.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let normalized = self.normalizer.normalize(text);
        let mut ids = vec![BOS];
        if normalized.is_empty() {
            ids.push(UNK);
        } else {
            ids.extend(self.viterbi(&normalized));
        }
        ids.push(EOS);
        ids
    }

    /// The best segmentation of `s`. Ties keep the earliest-found path (strictly greater
    /// wins, lengths tried shortest first), as SentencePiece does.
    fn viterbi(&self, s: &str) -> Vec<u32> {
        let starts: Vec<usize> = s.char_indices().map(|(i, _)| i).collect();
        let len = starts.len();
        let at = |k: usize| starts.get(k).copied().unwrap_or(s.len());
        let mut best = vec![-1e38f64; len + 1];
        best[0] = 0.0;
        let mut from = vec![0usize; len + 1];
        let mut piece = vec![UNK; len + 1];
        for (i, c) in s.chars().enumerate() {
            let base = best[i];
            let most = self.longest.get(&c).copied().unwrap_or(0);
            let mut single = false;
            for j in i + 1..=(i + most).min(len) {
                let Some(&(id, score)) = self.pieces.get(&s[at(i)..at(j)]) else {
                    continue;
                };
                let total = base + score;
                if total > best[j] {
                    best[j] = total;
                    from[j] = i;
                    piece[j] = id;
                }
                single |= j == i + 1;
            }
            if !single && base + self.unk_score > best[i + 1] {
                best[i + 1] = base + self.unk_score;
                from[i + 1] = i;
                piece[i + 1] = UNK;
            }
        }
        let mut ids = Vec::new();
        let mut p = len;
        while p > 0 {
            ids.push(piece[p]);
            p = from[p];
        }
        if ids.is_empty() {
            ids.push(UNK);
        }
        ids.reverse();
        ids
    }
}
