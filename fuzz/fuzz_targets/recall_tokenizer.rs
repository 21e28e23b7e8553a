//! Any query text through recall by meaning: the model's normaliser and SentencePiece
//! tokenizer (`router::meaning::token_ids`) and the encoder (`router::meaning::embed`).
//! None panics; the ids are `<s>` … `</s>` around at least one piece of the vocabulary,
//! and the vector is finite and of unit length.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillbox_core::router::meaning::{embed, token_ids, DIMS};

// The model (128,000 pieces, the normaliser's tables, the weights) is parsed once, before
// the first input: in this unoptimised, instrumented build that takes tens of seconds,
// which would count against the first input's `-timeout`.
fuzz_target!(init: { assert!(embed("warm").is_some(), "the compiled-in model parses") }, |text: &str| {
    let ids = token_ids(text);
    assert!(ids.len() >= 3, "{ids:?}");
    assert_eq!(ids.first(), Some(&1));
    assert_eq!(ids.last(), Some(&2));
    assert!(ids.iter().all(|&id| id < 128_000), "{ids:?}");
    let v = embed(text).expect("the compiled-in model parses");
    assert_eq!(v.len(), DIMS);
    assert!(v.iter().all(|x| x.is_finite()));
    let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-3, "{norm}");
});
