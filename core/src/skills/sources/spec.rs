//! What a `skill add` SOURCE names: `owner/repo[/sub/folder]` on the configured host, a
//! git URL (https, ssh, `user@host:path`, `file://`), a host's web address of a folder
//! (`https://host/owner/repo/tree/REF/sub/folder`), a local repository, a local skill
//! folder or archive (the plain install), or a collection index (`*.json`).

use std::path::{Path, PathBuf};

use super::SourceError;

/// A parsed SOURCE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A git repository.
    Git {
        /// The URL fetched.
        url: String,
        /// A folder inside the repository the skills are looked for in.
        subfolder: Option<String>,
        /// A ref the source itself names (the `/tree/REF/` of a web address).
        reference: Option<String>,
    },
    /// A skill folder or a `.tar.gz` on this machine: installed as it is.
    Local(PathBuf),
    /// A collection index (local file or URL): its entries name git sources.
    Index(String),
}

impl Source {
    /// Reads `text` (relative paths from `base`); `git_host` is what `owner/repo` is on.
    pub fn parse(text: &str, git_host: &str, base: &Path) -> Result<Source, SourceError> {
        let text = text.trim();
        if text.is_empty() || text.starts_with('-') {
            return Err(SourceError::Spec {
                source_text: text.into(),
                reason: "empty, or starts with '-'".into(),
            });
        }
        if let Some((scheme, rest)) = text.split_once("://") {
            if (scheme == "https" || scheme == "http") && text.ends_with(".json") {
                return Ok(Source::Index(text.to_string()));
            }
            if scheme == "https" || scheme == "http" {
                if let Some(web) = web_tree(scheme, rest) {
                    return Ok(web);
                }
            }
            if scheme == "file" {
                return file_url(text, rest);
            }
            return Ok(Source::Git {
                url: text.to_string(),
                subfolder: None,
                reference: None,
            });
        }
        let path = base.join(text);
        if path.exists() || text.starts_with('.') || text.starts_with('/') {
            return local(&path, text);
        }
        if is_scp_like(text) {
            return Ok(Source::Git {
                url: text.to_string(),
                subfolder: None,
                reference: None,
            });
        }
        let parts: Vec<&str> = text.split('/').collect();
        if parts.len() >= 2 && parts.iter().all(|p| is_name_segment(p)) {
            let (owner, repo) = (parts[0], parts[1].trim_end_matches(".git"));
            let sub = parts[2..].join("/");
            return Ok(Source::Git {
                url: format!("{}/{owner}/{repo}.git", git_host.trim_end_matches('/')),
                subfolder: (!sub.is_empty()).then_some(sub),
                reference: None,
            });
        }
        Err(SourceError::Spec {
            source_text: text.into(),
            reason:
                "not owner/repo, a git URL, a local repository or skill folder, or an index .json"
                    .into(),
        })
    }
}

/// `https://host/owner/repo/tree/REF/sub/folder` → the repo's URL, REF and folder.
fn web_tree(scheme: &str, rest: &str) -> Option<Source> {
    let parts: Vec<&str> = rest.split('/').collect();
    if parts.len() < 5 || parts[3] != "tree" {
        return None;
    }
    let (host, owner, repo, reference) = (parts[0], parts[1], parts[2], parts[4]);
    let sub = parts[5..].join("/");
    Some(Source::Git {
        url: format!(
            "{scheme}://{host}/{owner}/{}.git",
            repo.trim_end_matches(".git")
        ),
        subfolder: (!sub.is_empty()).then_some(sub),
        reference: Some(reference.to_string()),
    })
}

/// The forms that name a folder inside a repository, for a refusal to point at.
const SUBFOLDER_FORMS: &str = "a folder inside a repository is named as owner/repo/path/to/folder, https://host/owner/repo/tree/REF/path/to/folder, or file:///path/to/repo/path/to/folder (a local repository followed by the folder)";

/// `file:///srv/repo[/sub/folder]`: the repository is the longest leading path that is
/// one (a work tree with `.git`, or a bare repository); what follows is the folder.
fn file_url(text: &str, path: &str) -> Result<Source, SourceError> {
    let full = Path::new(path);
    for repo in full.ancestors().filter(|p| p.is_absolute()) {
        if !is_repository(repo) {
            continue;
        }
        let sub = full
            .strip_prefix(repo)
            .map(|s| s.to_string_lossy().trim_matches('/').to_string())
            .unwrap_or_default();
        return Ok(Source::Git {
            url: format!("file://{}", repo.display()),
            subfolder: (!sub.is_empty()).then_some(sub),
            reference: None,
        });
    }
    Err(SourceError::Spec {
        source_text: text.into(),
        reason: format!(
            "{path} is not a git repository on this machine, nor a folder inside one; {SUBFOLDER_FORMS}"
        ),
    })
}

fn is_repository(path: &Path) -> bool {
    path.join(".git").exists() || (path.join("HEAD").is_file() && path.join("objects").is_dir())
}

/// A local path: a repository (fetched over `file://`), a skill folder or an archive.
fn local(path: &Path, text: &str) -> Result<Source, SourceError> {
    let missing = |reason: &str| SourceError::Spec {
        source_text: text.into(),
        reason: reason.into(),
    };
    let real = path
        .canonicalize()
        .map_err(|e| missing(&format!("{}: {e}", path.display())))?;
    if real.is_file() {
        if text.ends_with(".json") {
            return Ok(Source::Index(real.display().to_string()));
        }
        return Ok(Source::Local(real));
    }
    if is_repository(&real) {
        return Ok(Source::Git {
            url: format!("file://{}", real.display()),
            subfolder: None,
            reference: None,
        });
    }
    if real.join("SKILL.md").is_file()
        || real.join("skill.yaml").is_file()
        || real.join("package.json").is_file()
    {
        return Ok(Source::Local(real));
    }
    Err(missing(&format!(
        "a folder that is neither a git repository nor a skill folder; {SUBFOLDER_FORMS}"
    )))
}

fn is_scp_like(text: &str) -> bool {
    match text.split_once(':') {
        Some((user_host, path)) => {
            user_host.contains('@') && !user_host.contains('/') && !path.is_empty()
        }
        None => false,
    }
}

fn is_name_segment(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(url: &str, sub: Option<&str>, r: Option<&str>) -> Source {
        Source::Git {
            url: url.into(),
            subfolder: sub.map(Into::into),
            reference: r.map(Into::into),
        }
    }

    #[test]
    fn sources_parse_to_what_they_name() {
        let base = Path::new("/nonexistent-base");
        let host = "https://github.com";
        assert_eq!(
            Source::parse("anthropics/skills", host, base).unwrap(),
            git("https://github.com/anthropics/skills.git", None, None)
        );
        assert_eq!(
            Source::parse("anthropics/skills/skills/pdf", host, base).unwrap(),
            git(
                "https://github.com/anthropics/skills.git",
                Some("skills/pdf"),
                None
            )
        );
        assert_eq!(
            Source::parse("https://github.com/o/r/tree/v2/skills/x", host, base).unwrap(),
            git("https://github.com/o/r.git", Some("skills/x"), Some("v2"))
        );
        assert_eq!(
            Source::parse("git@example.com:o/r.git", host, base).unwrap(),
            git("git@example.com:o/r.git", None, None)
        );
        assert_eq!(
            Source::parse("https://example.com/index.json", host, base).unwrap(),
            Source::Index("https://example.com/index.json".into())
        );
        for bad in ["", "-uhoh", "just-a-word", "a/../b"] {
            assert!(Source::parse(bad, host, base).is_err(), "{bad}");
        }
    }
}
