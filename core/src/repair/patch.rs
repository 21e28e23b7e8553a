//! The text side of a repair: applying a unified diff to a file's text in memory, and
//! measuring a change for the budget (hunks, words added).
//!
//! Diffs are applied strictly: every context and removed line must match exactly; a hunk
//! may sit at another line than its header says (the nearest exact match after the
//! previous hunk is taken), never over another hunk.

/// A file larger than this (bytes, before or after) is refused rather than diffed.
pub const MAX_FILE_BYTES: usize = 256 * 1024;

/// Lines compared at most when measuring a whole-content change (after the common start
/// and end are trimmed): the line diff is quadratic.
const MAX_DIFF_CELLS: usize = 4_000_000;

/// Why a diff does not apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The diff has no hunk.
    #[error("the diff has no hunk (`@@ -l,s +l,s @@`)")]
    NoHunk,
    /// A hunk header could not be read.
    #[error("hunk {hunk}: unreadable header {header:?}")]
    Header {
        /// The hunk, from 1.
        hunk: usize,
        /// The line.
        header: String,
    },
    /// A hunk's lines do not add up to its header's counts.
    #[error("hunk {hunk}: the lines do not match the header's counts")]
    Counts {
        /// The hunk, from 1.
        hunk: usize,
    },
    /// A line inside a hunk starts with none of ` `, `-`, `+`, `\`.
    #[error("hunk {hunk}: line {line:?} starts with none of ' ', '-', '+', '\\'")]
    Line {
        /// The hunk, from 1.
        hunk: usize,
        /// The line.
        line: String,
    },
    /// A hunk's context and removed lines are not in the file.
    #[error("hunk {hunk} does not apply: its context and removed lines are not in the file (after the previous hunk)")]
    Mismatch {
        /// The hunk, from 1.
        hunk: usize,
    },
}

/// One hunk: where it says it starts (1-based, 0 for an empty file) and its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hunk {
    old_start: usize,
    old: Vec<String>,
    new: Vec<String>,
    added: Vec<String>,
    /// `\ No newline at end of file` followed the last new-side line.
    new_no_eol: bool,
}

/// A parsed unified diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diff {
    hunks: Vec<Hunk>,
}

fn parse_range(s: &str) -> Option<(usize, usize)> {
    let (start, len) = match s.split_once(',') {
        Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
        None => (s.parse().ok()?, 1),
    };
    Some((start, len))
}

/// `@@ -a,b +c,d @@ …` → ((a, b), (c, d)).
fn parse_header(line: &str) -> Option<((usize, usize), (usize, usize))> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, _) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    Some((parse_range(old)?, parse_range(new)?))
}

impl Diff {
    /// Parses a unified diff; `---`/`+++`/`diff`/`index` lines before a hunk are skipped.
    pub fn parse(text: &str) -> Result<Self, PatchError> {
        let mut hunks = Vec::new();
        let mut lines = text.lines().peekable();
        while let Some(line) = lines.next() {
            if !line.starts_with("@@") {
                continue;
            }
            let n = hunks.len() + 1;
            let ((old_start, old_len), (_, new_len)) =
                parse_header(line).ok_or_else(|| PatchError::Header {
                    hunk: n,
                    header: line.to_string(),
                })?;
            let mut h = Hunk {
                old_start,
                old: Vec::new(),
                new: Vec::new(),
                added: Vec::new(),
                new_no_eol: false,
            };
            let mut last_was_new = false;
            while h.old.len() < old_len
                || h.new.len() < new_len
                || lines.peek().is_some_and(|l| l.starts_with('\\'))
            {
                let Some(l) = lines.next() else {
                    return Err(PatchError::Counts { hunk: n });
                };
                let mut chars = l.chars();
                let first = chars.next();
                let rest = chars.as_str().to_string();
                match first {
                    // A context line whose single space an editor stripped.
                    None | Some(' ') => {
                        h.old.push(rest.clone());
                        h.new.push(rest);
                        last_was_new = true;
                    }
                    Some('-') => {
                        h.old.push(rest);
                        last_was_new = false;
                    }
                    Some('+') => {
                        h.new.push(rest.clone());
                        h.added.push(rest);
                        last_was_new = true;
                    }
                    Some('\\') => h.new_no_eol |= last_was_new,
                    Some(_) => {
                        return Err(PatchError::Line {
                            hunk: n,
                            line: l.to_string(),
                        })
                    }
                }
            }
            if h.old.len() != old_len || h.new.len() != new_len {
                return Err(PatchError::Counts { hunk: n });
            }
            hunks.push(h);
        }
        if hunks.is_empty() {
            return Err(PatchError::NoHunk);
        }
        Ok(Self { hunks })
    }

    /// How many hunks.
    pub fn hunks(&self) -> usize {
        self.hunks.len()
    }

    /// Words on the added lines.
    pub fn added_words(&self) -> usize {
        self.hunks
            .iter()
            .flat_map(|h| &h.added)
            .map(|l| words(l))
            .sum()
    }

    /// Applies the diff to `old` (empty for a new file).
    pub fn apply(&self, old: &str) -> Result<String, PatchError> {
        let lines: Vec<&str> = old.lines().collect();
        let mut eol = old.is_empty() || old.ends_with('\n');
        let mut out: Vec<&str> = Vec::new();
        let mut cursor = 0;
        for (i, h) in self.hunks.iter().enumerate() {
            let want = h.old_start.saturating_sub(1).max(cursor);
            let pos = find_block(&lines, &h.old, cursor, want)
                .ok_or(PatchError::Mismatch { hunk: i + 1 })?;
            out.extend_from_slice(lines.get(cursor..pos).unwrap_or_default());
            out.extend(h.new.iter().map(String::as_str));
            cursor = pos + h.old.len();
            if cursor >= lines.len() {
                eol = !h.new_no_eol;
            }
        }
        out.extend_from_slice(lines.get(cursor..).unwrap_or_default());
        let mut text = out.join("\n");
        if eol && !text.is_empty() {
            text.push('\n');
        }
        Ok(text)
    }
}

/// The start of `block` in `lines` at or after `from`, nearest to `want`.
fn find_block(lines: &[&str], block: &[String], from: usize, want: usize) -> Option<usize> {
    let fits = |p: usize| {
        lines
            .get(p..p + block.len())
            .is_some_and(|w| w.iter().zip(block).all(|(a, b)| *a == b.as_str()))
    };
    let last = lines.len().checked_sub(block.len())?;
    (0..=last.saturating_sub(from))
        .flat_map(|d| [want.checked_add(d), want.checked_sub(d)])
        .flatten()
        .filter(|&p| p >= from && p <= last)
        .find(|&p| fits(p))
}

/// Whitespace-separated words: the budget's token estimate.
pub fn words(text: &str) -> usize {
    text.split_whitespace().count()
}

/// What a whole-content change amounts to: hunks (maximal runs of changed lines) and words
/// on the added lines. `None` when the files are too large to compare.
pub fn measure(old: &str, new: &str) -> Option<(usize, usize)> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let (a, b) = (&a[prefix..], &b[prefix..]);
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (a, b) = (&a[..a.len() - suffix], &b[..b.len() - suffix]);
    if a.len().saturating_mul(b.len()) > MAX_DIFF_CELLS {
        return None;
    }
    // Longest common subsequence, then walk it: a hunk is a run of unmatched lines.
    let (n, m) = (a.len(), b.len());
    let mut table = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            table[at(i, j)] = if a[i] == b[j] {
                table[at(i + 1, j + 1)] + 1
            } else {
                table[at(i + 1, j)].max(table[at(i, j + 1)])
            };
        }
    }
    let (mut i, mut j, mut hunks, mut added, mut in_hunk) = (0, 0, 0, 0, false);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            in_hunk = false;
            i += 1;
            j += 1;
            continue;
        }
        if !in_hunk {
            hunks += 1;
            in_hunk = true;
        }
        if j < m && (i == n || table[at(i, j + 1)] >= table[at(i + 1, j)]) {
            added += words(b[j]);
            j += 1;
        } else {
            i += 1;
        }
    }
    Some((hunks, added))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_applies_with_offset_and_counts() {
        let old = "a\nb\nc\nd\ne\n";
        let d = Diff::parse("--- a/x\n+++ b/x\n@@ -3,2 +3,3 @@\n b\n-c\n+C one\n+C two\n").unwrap();
        assert_eq!(
            d.apply(old).unwrap(),
            "a\nb\nC one\nC two\nd\ne\n",
            "offset by one"
        );
        let short = Diff::parse("@@ -1,2 +1,1 @@\n-a\n").unwrap_err();
        assert_eq!(short, PatchError::Counts { hunk: 1 });
        let d = Diff::parse("@@ -1,2 +1,3 @@\n c\n-d\n+D one\n+D two\n").unwrap();
        assert_eq!(d.apply(old).unwrap(), "a\nb\nc\nD one\nD two\ne\n");
        assert_eq!((d.hunks(), d.added_words()), (1, 4));
    }

    #[test]
    fn diff_refuses_a_hunk_whose_context_is_missing() {
        let d = Diff::parse("@@ -1,1 +1,1 @@\n-zzz\n+y\n").unwrap();
        assert_eq!(d.apply("a\n"), Err(PatchError::Mismatch { hunk: 1 }));
    }

    #[test]
    fn diff_creates_a_new_file_and_honours_no_newline() {
        let d = Diff::parse(
            "--- /dev/null\n+++ b/x\n@@ -0,0 +1,2 @@\n+one\n+two\n\\ No newline at end of file\n",
        )
        .unwrap();
        assert_eq!(d.apply("").unwrap(), "one\ntwo");
    }

    #[test]
    fn measure_counts_runs_and_added_words() {
        assert_eq!(measure("a\nb\nc\n", "a\nb\nc\n"), Some((0, 0)));
        assert_eq!(measure("a\nb\nc\nd\n", "a\nX y\nc\nZ\n"), Some((2, 3)));
        assert_eq!(measure("", "one two three\n"), Some((1, 3)));
    }
}
