//! Recall by meaning: Google's Universal Sentence Encoder Multilingual v3 (USE-m3), run in
//! process. The model (tokenizer, normaliser, token table, dense weights) is compiled into
//! the core from `core/data/recall/` (nothing is loaded or downloaded at run time; see its
//! NOTICE) and parsed once: [`tokenizer`] cuts a text into the model's SentencePiece
//! pieces, [`network`] runs the encoder to a 512-dimensional unit vector, so a skill is as
//! close to a query as the cosine of their vectors. The model knows English, Chinese and
//! fourteen other languages.
//!
//! A skill is embedded from its name in words and description (the head) and its SKILL.md
//! body (code and markdown punctuation stripped, the first 6,000 characters): the
//! normalised sum of the head's vector and half the body's. Skill vectors are cached
//! process-wide by the SHA-256 of their text, so a reload embeds only changed skills.
//!
//! A cosine alone says little (a long query is close to everything a little), so a
//! skill's similarity is judged against the others': its z-score over the catalogue and a
//! background of real skill descriptions shipped with the model, so a small catalogue
//! is judged like a large one. [`SemanticIndex::search`] answers the skills whose z-score
//! passes `[routing] semantic_z_floor`; [`intent`] maps the z-score into `intent_match`.

mod cache;
mod dot;
mod network;
mod normalize;
mod tokenizer;
mod weights;

use std::sync::OnceLock;

pub use weights::DIMS;

/// How much of a skill's body is embedded, in characters.
pub const BODY_CHARS: usize = 6000;
/// The weight of the body's vector beside the head's.
const BODY_WEIGHT: f32 = 0.5;

/// The parsed model.
#[derive(Debug)]
struct Model {
    tokenizer: tokenizer::Tokenizer,
    network: network::Network,
}

/// The model, parsed on first use; `None` if the compiled-in data does not parse (then
/// recall by meaning is off, and the error is logged once).
fn model() -> Option<&'static Model> {
    static MODEL: OnceLock<Option<Model>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let parsed = (|| -> Result<Model, weights::WeightsError> {
                Ok(Model {
                    tokenizer: tokenizer::Tokenizer::parse()?,
                    network: network::Network::new(weights::Weights::parse()?)?,
                })
            })();
            parsed
                .map_err(|e| tracing::error!("recall by meaning is off: {e}"))
                .ok()
        })
        .as_ref()
}

/// The model's piece ids of `text` (`<s>` … `</s>`).
pub fn token_ids(text: &str) -> Vec<u32> {
    model()
        .map(|m| m.tokenizer.encode(text))
        .unwrap_or_default()
}

/// The unit vector of `text`; `None` when the model is off.
pub fn embed(text: &str) -> Option<Vec<f32>> {
    let m = model()?;
    Some(m.network.encode(&m.tokenizer.encode(text)))
}

/// A skill's body as embedded: code blocks and markdown punctuation removed, whitespace
/// collapsed, the first [`BODY_CHARS`] characters.
pub fn body_text(body: &str) -> String {
    let mut prose = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(open) = rest.find("```") {
        let Some(close) = rest[open + 3..].find("```") else {
            break;
        };
        prose.push_str(&rest[..open]);
        prose.push(' ');
        rest = &rest[open + 3 + close + 3..];
    }
    prose.push_str(rest);
    let plain: String = prose
        .chars()
        .map(|c| if "#*`>|_[]()".contains(c) { ' ' } else { c })
        .collect();
    let words: Vec<&str> = plain.split_whitespace().collect();
    words.join(" ").chars().take(BODY_CHARS).collect()
}

/// A skill's text for the model.
#[derive(Debug, Clone, Copy)]
pub struct SkillText<'a> {
    /// "name in words. description".
    pub head: &'a str,
    /// The body as [`body_text`] makes it ("" for none).
    pub body: &'a str,
}

/// A skill's unit vector: the head's, plus half the body's, normalised.
fn embed_skill(text: SkillText<'_>) -> Option<Vec<f32>> {
    let mut v = embed(text.head)?;
    if !text.body.is_empty() {
        let b = embed(text.body)?;
        v.iter_mut()
            .zip(&b)
            .for_each(|(x, y)| *x += BODY_WEIGHT * y);
        normalise(&mut v);
    }
    Some(v)
}

fn normalise(v: &mut [f32]) -> bool {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n <= f32::EPSILON {
        return false;
    }
    v.iter_mut().for_each(|x| *x /= n);
    true
}

/// A unit vector as int8 (x 127), for fast dot products.
fn quantise(v: &[f32]) -> Box<[i8; DIMS]> {
    let mut q = Box::new([0i8; DIMS]);
    for (o, x) in q.iter_mut().zip(v) {
        // Clamped to the i8 range first, so the cast cannot truncate.
        #[allow(clippy::cast_possible_truncation)]
        let b = (x * 127.0).round().clamp(-127.0, 127.0) as i8;
        *o = b;
    }
    q
}

mod index;

pub use index::{intent, QueryVector, Scored, SemanticIndex};

#[cfg(test)]
mod tests;
