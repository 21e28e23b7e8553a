//! Phase 1 helpers: explicit requests for a skill (`forced`) and trigger matching
//! (`rule`). Latin triggers match as whole words, CJK triggers as substrings, both
//! case-insensitively; a trigger index keyed by the first word (or first CJK character)
//! keeps rule recall independent of the number of skills.

use std::collections::HashMap;

use super::index::is_cjk;

/// Skill names the query asks for explicitly: `$name`, `use [the] name skill`,
/// `使用 name skill` (also `用` and without the space). Lowercased, in order.
pub fn forced_names(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |n: &str| {
        let n = n.trim_matches(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'));
        let n = n.to_lowercase();
        if !n.is_empty() && !out.contains(&n) {
            out.push(n);
        }
    };
    let mut rest = query;
    while let Some(i) = rest.find('$') {
        rest = &rest[i + 1..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(rest.len());
        push(&rest[..end]);
    }
    let words: Vec<&str> = query.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        let lw = w.to_lowercase();
        let lw = lw.trim_end_matches(|c: char| c.is_ascii_punctuation() || !c.is_ascii());
        if lw != "skill" || i == 0 {
            continue;
        }
        let name = words[i - 1];
        let before = |k: usize| words.get(i.wrapping_sub(k)).map(|s| s.to_lowercase());
        let verb = |s: &str| matches!(s, "use" | "using" | "使用" | "用" | "调用");
        if let Some(stripped) = ["使用", "调用", "用"]
            .iter()
            .find_map(|p| name.strip_prefix(p))
            .filter(|s| !s.is_empty())
        {
            push(stripped);
        } else if before(2).is_some_and(|s| verb(&s))
            || (before(2).as_deref() == Some("the") && before(3).is_some_and(|s| verb(&s)))
            || before(2).is_some_and(|s| s.ends_with("使用") || s.ends_with("用"))
        {
            push(name);
        }
    }
    out
}

/// Whether `phrase` occurs in `query_lower` (already lowercased): as a substring when
/// the phrase holds CJK text, else as whole words.
pub fn phrase_in(query_lower: &str, phrase: &str) -> bool {
    let phrase = phrase.trim().to_lowercase();
    if phrase.is_empty() {
        return false;
    }
    if phrase.chars().any(is_cjk) {
        return query_lower.contains(&phrase);
    }
    let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
    query_lower.match_indices(&phrase).any(|(i, m)| {
        boundary(query_lower[..i].chars().next_back())
            && boundary(query_lower[i + m.len()..].chars().next())
    })
}

/// The lookup key of a phrase: its first Latin word, or its first CJK character.
fn key_of(phrase_lower: &str) -> Option<String> {
    let first = phrase_lower.chars().find(|c| c.is_alphanumeric())?;
    if is_cjk(first) {
        return Some(first.to_string());
    }
    let word: String = phrase_lower
        .chars()
        .skip_while(|c| !c.is_alphanumeric())
        .take_while(|c| c.is_alphanumeric() && !is_cjk(*c))
        .collect();
    Some(word)
}

/// The keys a query offers: every Latin word and every CJK character.
fn query_keys(query_lower: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut word = String::new();
    for c in query_lower.chars() {
        if is_cjk(c) {
            keys.push(c.to_string());
        }
        if c.is_alphanumeric() && !is_cjk(c) {
            word.push(c);
        } else if !word.is_empty() {
            keys.push(std::mem::take(&mut word));
        }
    }
    if !word.is_empty() {
        keys.push(word);
    }
    keys.sort();
    keys.dedup();
    keys
}

/// Triggers of every skill by key: (skill number, trigger).
#[derive(Debug, Clone, Default)]
pub struct TriggerIndex {
    by_key: HashMap<String, Vec<(usize, String)>>,
}

impl TriggerIndex {
    /// Indexes `(skill number, triggers)`.
    pub fn build<'a>(skills: impl Iterator<Item = (usize, &'a [String])>) -> Self {
        let mut by_key: HashMap<String, Vec<(usize, String)>> = HashMap::new();
        for (i, triggers) in skills {
            for t in triggers {
                let lower = t.trim().to_lowercase();
                if let Some(k) = key_of(&lower) {
                    by_key.entry(k).or_default().push((i, t.clone()));
                }
            }
        }
        Self { by_key }
    }

    /// Skills with a trigger in the query, with the triggers hit, by skill number (the
    /// triggers borrowed: a trigger thousands of skills share allocates nothing per skill).
    pub fn hits(&self, query_lower: &str) -> Vec<(usize, Vec<&str>)> {
        let mut by_skill: HashMap<usize, Vec<&str>> = HashMap::new();
        for key in query_keys(query_lower) {
            for (skill, trigger) in self.by_key.get(&key).into_iter().flatten() {
                if !phrase_in(query_lower, trigger) {
                    continue;
                }
                let ts = by_skill.entry(*skill).or_default();
                if !ts.contains(&trigger.as_str()) {
                    ts.push(trigger);
                }
            }
        }
        let mut out: Vec<(usize, Vec<&str>)> = by_skill.into_iter().collect();
        out.sort_by_key(|(s, _)| *s);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forced_names_reads_dollar_and_use_x_skill_forms() {
        assert_eq!(forced_names("run $weather now"), vec!["weather"]);
        assert_eq!(
            forced_names("Please use the apple-notes skill."),
            vec!["apple-notes"]
        );
        assert_eq!(
            forced_names("使用 nano-pdf skill 编辑文件"),
            vec!["nano-pdf"]
        );
        assert_eq!(forced_names("使用nano-pdf skill"), vec!["nano-pdf"]);
        assert!(forced_names("this skill is great").is_empty());
    }

    #[test]
    fn phrase_in_matches_latin_as_whole_words_and_cjk_as_substrings() {
        assert!(phrase_in("what is the price of btc", "price"));
        assert!(!phrase_in("a priceless thing", "price"));
        assert!(phrase_in("open a pull request", "Pull Request"));
        assert!(phrase_in("比特币价格多少", "价格"));
    }

    #[test]
    fn trigger_index_finds_hits_by_key() {
        let a = vec!["price".to_string(), "价格".to_string()];
        let b = vec!["pull request".to_string()];
        let idx = TriggerIndex::build([(0, a.as_slice()), (1, b.as_slice())].into_iter());
        assert_eq!(idx.hits("btc price?"), vec![(0, vec!["price"])]);
        assert_eq!(idx.hits("比特币价格"), vec![(0, vec!["价格"])]);
        assert_eq!(
            idx.hits("open a pull request"),
            vec![(1, vec!["pull request"])]
        );
        assert!(idx.hits("pull the lever").is_empty());
    }
}
