//! The validation rules: names, tool entries, environment names, paths and globs.

use super::*;

#[test]
fn spec_names() {
    for ok in [
        "a",
        "pdf",
        "web-artifacts-builder",
        "a1-b2",
        &"a".repeat(64),
    ] {
        assert!(is_spec_skill_name(ok), "{ok}");
    }
    for bad in ["", "-a", "a-", "a--b", "A", "a_b", "a.b", &"a".repeat(65)] {
        assert!(!is_spec_skill_name(bad), "{bad}");
    }
}

#[test]
fn usable_names_exclude_path_and_separator_characters() {
    assert!(is_usable_skill_name("My_Skill"));
    for bad in ["", ".", "..", "a/b", "a\\b", "a:b", "a b", "a\nb"] {
        assert!(!is_usable_skill_name(bad), "{bad:?}");
    }
}

#[test]
fn tool_and_env_names() {
    assert!(is_tool_name("get_price") && !is_tool_name("getPrice") && !is_tool_name(""));
    assert!(
        is_env_name("API_KEY") && is_env_name("_x") && !is_env_name("1A") && !is_env_name("A-B")
    );
    assert!(
        is_reserved_env("LD_PRELOAD")
            && is_reserved_env("PATH")
            && is_reserved_env("SKILLBOX_CALL_ID")
    );
    assert!(!is_reserved_env("COINGECKO_API_KEY"));
}

#[test]
fn proxy_env_names_are_reserved_for_the_executor() {
    for name in [
        "HTTP_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "no_proxy",
        "NODE_USE_ENV_PROXY",
    ] {
        assert!(is_reserved_env(name), "{name} must be reserved");
    }
}

#[test]
fn workspace_globs_that_cover_everything() {
    let whole =
        |g: &[&str]| covers_whole_workspace(&g.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    for g in [
        "**",
        "**/*",
        "*/**",
        "./**",
        ".//**",
        "**/**",
        "{notes,*}/**",
        "**/{*,}",
    ] {
        assert!(whole(&[g]), "{g} should cover the whole workspace");
    }
    assert!(whole(&["*/*", "*/*/**"]), "together");
    for g in [
        "notes/**",
        "*.md",
        "*/*",
        "**/*.md",
        "skills/x/**",
        "*",
        ".skillbox/**",
    ] {
        assert!(!whole(&[g]), "{g} should not cover the whole workspace");
    }
}

#[test]
fn relative_paths() {
    assert_eq!(relative_path_problem("scripts/a.py"), None);
    assert!(relative_path_problem("../a").is_some());
    assert!(relative_path_problem("a/../../b").is_some());
    assert!(relative_path_problem("/etc/passwd").is_some());
    assert!(relative_path_problem("").is_some());
}
