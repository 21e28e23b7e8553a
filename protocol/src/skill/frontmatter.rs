//! Splits a `SKILL.md` into its YAML frontmatter and the byte offset of its Markdown body.

/// Largest frontmatter accepted; a bigger one is refused before YAML parsing.
pub const MAX_FRONTMATTER_BYTES: usize = 64 * 1024;

/// Why the frontmatter could not be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontmatterError {
    /// The file does not start with a `---` line.
    #[error("the file must start with a line \"---\", then YAML, then a line \"---\"")]
    Missing,
    /// No closing `---` line.
    #[error("the frontmatter has no closing \"---\" line")]
    Unterminated,
    /// Frontmatter larger than [`MAX_FRONTMATTER_BYTES`].
    #[error("the frontmatter is larger than {max} bytes")]
    TooLarge {
        /// The limit.
        max: usize,
    },
}

/// The parts of a `SKILL.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split<'a> {
    /// The YAML between the fences.
    pub yaml: &'a str,
    /// Byte offset of the body (just after the closing fence's line).
    pub body_offset: usize,
}

/// Finds the frontmatter: a first line `---` (a UTF-8 BOM and trailing spaces allowed),
/// YAML, and a line `---` (or `...`). CRLF line ends are accepted.
pub fn split(text: &str) -> Result<Split<'_>, FrontmatterError> {
    let start = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let rest = &text[start..];
    let first_end = rest.find('\n').ok_or(FrontmatterError::Missing)?;
    if rest[..first_end].trim_end() != "---" {
        return Err(FrontmatterError::Missing);
    }
    let yaml_start = start + first_end + 1;
    let mut pos = yaml_start;
    loop {
        if pos - yaml_start > MAX_FRONTMATTER_BYTES {
            return Err(FrontmatterError::TooLarge {
                max: MAX_FRONTMATTER_BYTES,
            });
        }
        let line_end = text[pos..].find('\n').map(|i| pos + i);
        let line = &text[pos..line_end.unwrap_or(text.len())];
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed == "..." {
            let body_offset = line_end.map_or(text.len(), |e| e + 1);
            return Ok(Split {
                yaml: &text[yaml_start..pos],
                body_offset,
            });
        }
        match line_end {
            Some(e) => pos = e + 1,
            None => return Err(FrontmatterError::Unterminated),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn split_finds_yaml_and_body() {
        let s = split("---\nname: a\n---\n# Body\n").unwrap();
        assert_eq!(s.yaml, "name: a\n");
        assert_eq!(&"---\nname: a\n---\n# Body\n"[s.body_offset..], "# Body\n");
    }

    #[test]
    fn split_accepts_crlf_bom_and_no_body() {
        let t = "\u{feff}---\r\nname: a\r\n---\r\n";
        let s = split(t).unwrap();
        assert_eq!(s.yaml, "name: a\r\n");
        assert_eq!(s.body_offset, t.len());
        let t = "---\nname: a\n---";
        assert_eq!(split(t).unwrap().body_offset, t.len());
    }

    #[test]
    fn split_rejects_missing_and_unterminated() {
        assert_eq!(split("# no frontmatter\n"), Err(FrontmatterError::Missing));
        assert_eq!(split(""), Err(FrontmatterError::Missing));
        assert_eq!(split("---\nname: a\n"), Err(FrontmatterError::Unterminated));
    }

    #[test]
    fn split_rejects_oversize_frontmatter() {
        let t = format!("---\n{}---\n", "a: b\n".repeat(MAX_FRONTMATTER_BYTES / 4));
        assert_eq!(
            split(&t),
            Err(FrontmatterError::TooLarge {
                max: MAX_FRONTMATTER_BYTES
            })
        );
    }

    #[test]
    fn split_empty_frontmatter() {
        let s = split("---\n---\nbody").unwrap();
        assert_eq!(s.yaml, "");
    }

    proptest! {
        #[test]
        fn split_never_panics_and_offsets_are_in_bounds(text in "\\PC{0,200}") {
            if let Ok(s) = split(&text) {
                prop_assert!(s.body_offset <= text.len());
                prop_assert!(text.is_char_boundary(s.body_offset));
            }
        }

        #[test]
        fn split_round_trips_generated_documents(yaml in "([a-z]{1,8}: [a-z0-9 ]{0,12}\n){0,6}", body in "[^\u{0}]{0,100}") {
            let doc = format!("---\n{yaml}---\n{body}");
            let s = split(&doc).unwrap();
            prop_assert_eq!(s.yaml, yaml.as_str());
            prop_assert_eq!(&doc[s.body_offset..], body.as_str());
        }
    }
}
