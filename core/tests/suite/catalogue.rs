//! The skills catalogue of a context's prompt over the real corpus (63 skills;
//! `$SKILLBOX_CORPUS`, else `../shared/corpus`, else reported skipped): within the default
//! budget every skill is listed in full, shortened, or counted, and an `always` skill comes
//! first.

use std::path::PathBuf;

use skillbox_core::contexts::{catalogue, CatalogueBudget};
use skillbox_core::router::RoutingConfig;
use skillbox_protocol::skill::{discover, DiscoveryOptions};

use super::corpus_dir::corpus_dir;

#[test]
fn catalogue_of_the_corpus_fits_the_budget_and_accounts_for_every_skill() {
    let Some(root) = corpus_dir("catalogue_of_the_corpus_fits_the_budget") else {
        return;
    };
    let extra = tempfile::tempdir().unwrap();
    let always = extra.path().join("house-rules");
    std::fs::create_dir_all(&always).unwrap();
    std::fs::write(
        always.join("SKILL.md"),
        "---\nname: house-rules\ndescription: Rules every answer follows.\nalways: true\n---\n",
    )
    .unwrap();
    let roots: Vec<PathBuf> = vec![
        extra.path().to_path_buf(),
        root.join("openclaw"),
        root.join("anthropic"),
    ];
    let catalog = discover(&roots, DiscoveryOptions::default());
    let n = catalog.skills.len();
    assert!(n >= 60, "{n} skills");
    let everything: usize = catalog
        .skills
        .iter()
        .map(|s| {
            s.name.len()
                + s.description
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
                    .len()
                + 5
        })
        .sum();
    let default = RoutingConfig::default().catalogue_budget_chars;
    for chars in [default, 3000] {
        let budget = CatalogueBudget {
            chars,
            uses: Default::default(),
        };
        let text = catalogue(&catalog, &|_| true, &budget);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("- house-rules: "), "{text}");
        let listed = lines
            .iter()
            .filter(|l| !l.contains("more skills are not listed"))
            .count();
        let omitted: usize = lines
            .iter()
            .find_map(|l| l.strip_prefix("- (")?.split(' ').next()?.parse().ok())
            .unwrap_or(0);
        assert_eq!(
            listed + omitted,
            n,
            "every skill listed or counted:\n{text}"
        );
        assert!(
            text.len() <= chars + 200,
            "{} chars for a budget of {chars}",
            text.len()
        );
        if chars == default {
            assert_eq!(omitted, 0, "the default lists the whole corpus:\n{text}");
        } else {
            assert!(omitted > 0, "a small budget counts some:\n{text}");
        }
        println!(
            "budget {chars}: catalogue of {n} skills in {} chars (all in full: {everything}), {listed} listed, {omitted} counted",
            text.len()
        );
    }
}
