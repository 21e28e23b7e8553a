//! The skills' vectors and the scoring of a query against them.

use super::{cache, dot, embed, embed_skill, model, quantise, SkillText, DIMS};

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
        // z >= floor is s >= mean + floor sd: most skills fail this comparison alone (a
        // little below it, so rounding leaves the exact test to `z`).
        #[allow(clippy::cast_possible_truncation)]
        let below = self.mean + (floor as f32) * self.sd - 1e-4;
        for (doc, &s) in self.sims.iter().enumerate() {
            if s.is_nan()
                || s < below
                || best.len() == k && best.last().is_some_and(|(b, _)| s <= *b)
            {
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

/// A query's vector, quantised as the skills' are.
#[derive(Debug, Clone)]
pub struct QueryVector(Box<[i8; DIMS]>);

impl QueryVector {
    /// Runs the encoder on `query`; `None` when it has no letter or digit (or the model is
    /// off).
    pub fn embed(query: &str) -> Option<Self> {
        if !query.chars().any(char::is_alphanumeric) {
            return None;
        }
        Some(Self(quantise(&embed(query)?)))
    }
}

/// The skills' vectors, one contiguous row of `DIMS` int8 per skill (a query reads them
/// in one sweep).
#[derive(Debug, Default)]
pub struct SemanticIndex {
    /// Row `i` is skill `i`'s vector (zeros when it has none).
    pub(super) docs: Vec<[i8; DIMS]>,
    /// Whether skill `i` has a vector (the model is on).
    embedded: Vec<bool>,
    background: Vec<[i8; DIMS]>,
}

impl SemanticIndex {
    /// Embeds each skill's text (taking cached vectors; the others on every core).
    pub fn build<'a>(texts: impl Iterator<Item = SkillText<'a>>) -> Self {
        let texts: Vec<SkillText<'a>> = texts.collect();
        let keys: Vec<[u8; 32]> = texts.iter().map(|t| cache::key(*t)).collect();
        let mut docs: Vec<Option<cache::Vector>> = keys.iter().map(cache::get).collect();
        let missing: Vec<usize> = (0..texts.len()).filter(|&i| docs[i].is_none()).collect();
        let workers = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(missing.len());
        let embedded: Vec<(usize, Option<cache::Vector>)> = std::thread::scope(|s| {
            // No thread at all when every vector came from the cache.
            let handles: Vec<_> = (0..workers)
                .map(|w| {
                    let (missing, texts) = (&missing, &texts);
                    s.spawn(move || {
                        (missing.iter().skip(w).step_by(workers))
                            .map(|&i| (i, embed_skill(texts[i]).map(|v| quantise(&v).into())))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        });
        for (i, v) in embedded {
            if let Some(v) = &v {
                cache::put(keys[i], v.clone());
            }
            docs[i] = v;
        }
        let embedded = docs.iter().map(Option::is_some).collect();
        let docs = (docs.iter())
            .map(|d| d.as_deref().copied().unwrap_or([0; DIMS]))
            .collect();
        let background = model()
            .map(|m| m.network.background())
            .unwrap_or_default()
            .iter()
            .map(|v| *quantise(v))
            .collect();
        Self {
            docs,
            embedded,
            background,
        }
    }

    /// Every skill's similarity to `query`; `None` when the query has no letter or digit
    /// (or the model is off).
    pub fn search(&self, query: &str) -> Option<Scored> {
        self.score(&QueryVector::embed(query)?)
    }

    /// Every skill's similarity to an embedded query (the scoring alone).
    pub fn score(&self, query: &QueryVector) -> Option<Scored> {
        let mut sims = Vec::with_capacity(self.docs.len());
        dot::cosines(&query.0, &self.docs, &mut sims);
        for (s, &e) in sims.iter_mut().zip(&self.embedded) {
            if !e {
                *s = f32::NAN;
            }
        }
        let mut background = Vec::with_capacity(self.background.len());
        dot::cosines(&query.0, &self.background, &mut background);
        let (mut n, mut sum, mut sq) = (0f32, 0f32, 0f32);
        for s in (sims.iter().copied())
            .filter(|s| !s.is_nan())
            .chain(background)
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
