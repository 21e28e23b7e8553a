//! A cheap, linear pre-check of how deeply a manifest nests, run before any YAML or JSON
//! parser sees it. The YAML scanner slows down super-linearly with nesting long before it
//! reaches its own recursion limit (100,000 `[` in a 200 KB `skill.yaml` kept a reload busy
//! for minutes), so a manifest deeper than [`MAX_MANIFEST_DEPTH`] is refused here, in one
//! pass over its bytes.
//!
//! The scan is conservative: it may count a level a parser would not (a bracket inside a
//! quoted YAML string, an indented line of a block scalar), never fewer. A real manifest
//! nests a dozen levels at most; the limit leaves room for JSON schemas of tool parameters.

/// Deepest nesting a manifest may have: block indentation levels, `- ` sequence entries
/// on one line and flow `[`/`{` levels counted together.
pub const MAX_MANIFEST_DEPTH: usize = 64;

/// Why a manifest was refused before parsing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NestingError {
    /// The text nests deeper than the limit.
    #[error(
        "nests deeper than {max} levels (line {line}); manifests are refused past {max} levels \
         of nesting before parsing: flatten the manifest"
    )]
    TooDeep {
        /// The limit.
        max: usize,
        /// The line (from 1) where the limit was passed.
        line: usize,
    },
}

/// Refuses YAML text nesting deeper than `max` levels. Counts, per line, the open block
/// indentation levels, the `- `/`? ` entries that open the line, and the flow collections
/// (`[`, `{`) open so far, wherever they are (quotes and comments are not skipped, so a
/// bracket in a string counts too).
pub fn check_yaml(text: &str, max: usize) -> Result<(), NestingError> {
    let mut indents: Vec<usize> = Vec::new();
    let mut flow: usize = 0;
    for (n, line) in text.lines().enumerate() {
        let too_deep = || NestingError::TooDeep { max, line: n + 1 };
        let body = line.trim_start_matches([' ', '\t']);
        if body.is_empty() {
            continue;
        }
        let indent = line.len() - body.len();
        while indents.last().is_some_and(|&top| top >= indent) {
            indents.pop();
        }
        indents.push(indent);
        let mut depth = indents.len();
        let mut rest = body;
        while let Some(after) = rest
            .strip_prefix("- ")
            .or_else(|| rest.strip_prefix("? "))
            .or_else(|| rest.strip_prefix("-\t"))
        {
            depth += 1;
            rest = after.trim_start_matches([' ', '\t']);
        }
        if depth + flow > max {
            return Err(too_deep());
        }
        for b in rest.bytes() {
            match b {
                b'[' | b'{' => {
                    flow += 1;
                    if depth + flow > max {
                        return Err(too_deep());
                    }
                }
                b']' | b'}' => flow = flow.saturating_sub(1),
                _ => {}
            }
        }
    }
    Ok(())
}

/// Refuses JSON text nesting deeper than `max` arrays and objects (brackets inside
/// strings are skipped: JSON strings have one unambiguous syntax).
pub fn check_json(text: &str, max: usize) -> Result<(), NestingError> {
    let mut depth: usize = 0;
    let mut line = 1;
    let mut in_string = false;
    let mut escaped = false;
    for b in text.bytes() {
        if b == b'\n' {
            line += 1;
        }
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return Err(NestingError::TooDeep { max, line });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_yaml_refuses_100k_open_brackets() {
        let text = format!("name: deep\ntools: {}\n", "[".repeat(100_000));
        let err = check_yaml(&text, MAX_MANIFEST_DEPTH).unwrap_err();
        assert_eq!(err, NestingError::TooDeep { max: 64, line: 2 });
        assert!(err.to_string().contains("deeper than 64 levels"), "{err}");
    }

    #[test]
    fn check_yaml_refuses_deep_block_nesting_and_compact_sequences() {
        let mut text = String::new();
        for i in 0..70 {
            text.push_str(&format!("{}k{i}:\n", " ".repeat(i)));
        }
        assert!(check_yaml(&text, MAX_MANIFEST_DEPTH).is_err());
        let compact = format!("a:\n  {}x\n", "- ".repeat(70));
        assert!(check_yaml(&compact, MAX_MANIFEST_DEPTH).is_err());
    }

    #[test]
    fn check_yaml_passes_a_real_manifest() {
        let text = "name: notes\ntools:\n  - name: append\n    parameters:\n      type: object\n      properties:\n        text: {type: string, enum: [a, b]}\n    command: [\"python3\", \"x.py\"]\n";
        assert_eq!(check_yaml(text, MAX_MANIFEST_DEPTH), Ok(()));
        // Closing brackets bring the count back down.
        let flat = "a: [1]\n".repeat(10_000);
        assert_eq!(check_yaml(&flat, MAX_MANIFEST_DEPTH), Ok(()));
    }

    #[test]
    fn check_json_refuses_deep_nesting_and_skips_strings() {
        let deep = format!("{{\"skillbox\": {}", "[".repeat(100_000));
        assert_eq!(
            check_json(&deep, MAX_MANIFEST_DEPTH),
            Err(NestingError::TooDeep { max: 64, line: 1 })
        );
        let strings = format!("{{\"description\": \"{}\\\"\"}}", "[".repeat(1000));
        assert_eq!(check_json(&strings, MAX_MANIFEST_DEPTH), Ok(()));
    }
}
