//! `skillbox skill find QUERY`: searching collection indexes ([`index`], docs/skill-index.md,
//! fetched over the network by [`fetch`]) and the installed skills. Every word of the
//! query, case-insensitive, must appear in an entry's name, description or tags; entries
//! whose name holds more of the words come first, an exact name first of all.
//!
//! [`load_index`] is the one reader of an index, for `find` and for whatever resolves an
//! entry to its `source`, `path` and `ref`.

pub mod fetch;
pub mod index;

use serde::Serialize;
use skillbox_protocol::skill::{InstallLock, Skill};

pub use index::{load_index, parse_index, Index, IndexEntry, IndexError, INDEX_VERSION};

/// Where a match was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FoundIn {
    /// In a collection index.
    Index {
        /// The index's `name`.
        name: String,
        /// Where the index was read from.
        location: String,
    },
    /// Among the skills discovered in the workspace's roots.
    Installed,
}

impl FoundIn {
    /// The index's name, or `installed`.
    pub fn label(&self) -> &str {
        match self {
            FoundIn::Index { name, .. } => name,
            FoundIn::Installed => "installed",
        }
    }
}

/// One skill that matches the query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Match {
    /// The skill's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Where it comes from: `source[/path][@ref]` for an index entry, the folder for an
    /// installed skill.
    pub source: String,
    /// Where it was found.
    pub found_in: FoundIn,
    /// The index entry, for whoever installs it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<IndexEntry>,
    /// How many words of the query are in the name (the rank).
    #[serde(skip)]
    name_hits: usize,
    /// Whether the name is the whole query.
    #[serde(skip)]
    exact: bool,
}

/// An index and where it was read from.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The location as configured or given.
    pub location: String,
    /// The index.
    pub index: Index,
}

/// The skills of `indexes` and `installed` matching `query`, best first. An empty query
/// matches everything.
pub fn search(query: &str, indexes: &[Loaded], installed: &[Skill]) -> Vec<Match> {
    let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
    let whole = words.join(" ");
    let mut out = Vec::new();
    let mut locks: std::collections::HashMap<std::path::PathBuf, Option<InstallLock>> =
        std::collections::HashMap::new();
    for skill in installed {
        // A skill added from git is found by its source too (`skill find acme`).
        let origin = skill.dir.parent().and_then(|root| {
            locks
                .entry(root.to_path_buf())
                .or_insert_with(|| InstallLock::read(root).ok().flatten())
                .as_ref()?
                .get(&skill.name)?
                .origin
                .clone()
        });
        let source = match &origin {
            Some(o) => {
                let folder = if o.subfolder.is_empty() {
                    String::new()
                } else {
                    format!("/{}", o.subfolder)
                };
                format!(
                    "{}{folder}@{}",
                    o.source,
                    o.commit.get(..12).unwrap_or(&o.commit)
                )
            }
            None => skill.dir.display().to_string(),
        };
        let source_words = if origin.is_some() {
            vec![source.clone()]
        } else {
            Vec::new()
        };
        if let Some(name_hits) = hits(&words, &skill.name, &skill.description, &source_words) {
            out.push(Match {
                name: skill.name.clone(),
                description: skill.description.clone(),
                source,
                found_in: FoundIn::Installed,
                entry: None,
                name_hits,
                exact: skill.name.to_lowercase() == whole,
            });
        }
    }
    for loaded in indexes {
        for entry in &loaded.index.skills {
            if let Some(name_hits) = hits(&words, &entry.name, &entry.description, &entry.tags) {
                out.push(Match {
                    name: entry.name.clone(),
                    description: entry.description.clone(),
                    source: entry.location(),
                    found_in: FoundIn::Index {
                        name: loaded.index.name.clone(),
                        location: loaded.location.clone(),
                    },
                    entry: Some(entry.clone()),
                    name_hits,
                    exact: entry.name == whole,
                });
            }
        }
    }
    // Stable: installed before indexes, indexes in the order given, at equal rank.
    out.sort_by(|a, b| {
        b.exact
            .cmp(&a.exact)
            .then(b.name_hits.cmp(&a.name_hits))
            .then_with(|| a.name.cmp(&b.name))
    });
    out
}

/// How many `words` are in `name`, when every word is in the name, the description or a
/// tag; `None` when one is in none of them.
fn hits(words: &[String], name: &str, description: &str, tags: &[String]) -> Option<usize> {
    let name = name.to_lowercase();
    let description = description.to_lowercase();
    let tags: Vec<String> = tags.iter().map(|t| t.to_lowercase()).collect();
    let mut in_name = 0;
    for w in words {
        if name.contains(w.as_str()) {
            in_name += 1;
        } else if !description.contains(w.as_str()) && !tags.iter().any(|t| t.contains(w.as_str()))
        {
            return None;
        }
    }
    Some(in_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, description: &str, tags: &[&str]) -> IndexEntry {
        IndexEntry {
            name: name.into(),
            description: description.into(),
            source: "acme/skills".into(),
            path: Some(format!("skills/{name}")),
            git_ref: None,
            tags: tags.iter().map(ToString::to_string).collect(),
        }
    }

    fn loaded(entries: Vec<IndexEntry>) -> Vec<Loaded> {
        vec![Loaded {
            location: "index.json".into(),
            index: Index {
                version: INDEX_VERSION,
                name: "Acme".into(),
                skills: entries,
            },
        }]
    }

    #[test]
    fn search_needs_every_word_and_ranks_name_hits_first() {
        let idx = loaded(vec![
            entry("forms", "Fill PDF forms", &[]),
            entry("pdf", "Read and fill PDF forms", &["documents"]),
            entry("pdf-forms", "Forms in PDF files", &[]),
            entry("xlsx", "Spreadsheets", &["documents"]),
        ]);
        let names =
            |q: &str| -> Vec<String> { search(q, &idx, &[]).into_iter().map(|m| m.name).collect() };
        assert_eq!(names("PDF forms"), ["pdf-forms", "forms", "pdf"]);
        assert_eq!(names("pdf"), ["pdf", "pdf-forms", "forms"]);
        assert_eq!(names("documents"), ["pdf", "xlsx"]);
        assert!(names("pdf spreadsheet").is_empty());
        assert_eq!(names("").len(), 4);
    }

    #[test]
    fn entry_location_joins_source_path_and_ref() {
        let mut e = entry("pdf", "d", &[]);
        assert_eq!(e.location(), "acme/skills/skills/pdf");
        e.git_ref = Some("v1".into());
        e.path = None;
        assert_eq!(e.location(), "acme/skills@v1");
    }
}
