//! The kill list: skills the trust policy disabled at the last load or reload
//! ([`super::verify::enforce`] moves them to the catalog's skipped list with a diagnostic on
//! the field [`FIELD`]). The gateway lists them as unavailable with the reason, and a call
//! of one of their tools is refused with it.

use std::path::PathBuf;

use serde::Serialize;
use skillbox_protocol::skill::Catalog;

/// The diagnostic field that marks a skill disabled by the trust policy.
pub const FIELD: &str = "trust";

/// A skill disabled by the trust policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Disabled {
    /// The skill (its folder's name).
    pub name: String,
    /// Its folder.
    pub dir: PathBuf,
    /// Why, and what to do.
    pub reason: String,
}

/// Every skill of `catalog` the trust policy disabled, in discovery order.
pub fn list(catalog: &Catalog) -> Vec<Disabled> {
    catalog
        .skipped
        .iter()
        .filter_map(|s| {
            let d = s.diagnostics.iter().find(|d| d.field == FIELD)?;
            let name = s.dir.file_name()?.to_string_lossy().into_owned();
            Some(Disabled {
                name,
                dir: s.dir.clone(),
                reason: d.message.clone(),
            })
        })
        .collect()
}

/// Why the skill `name` is disabled, when the trust policy disabled it.
pub fn reason(catalog: &Catalog, name: &str) -> Option<String> {
    list(catalog)
        .into_iter()
        .find(|d| d.name == name)
        .map(|d| d.reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use skillbox_protocol::skill::{Diagnostic, Skipped};

    #[test]
    fn list_holds_only_skills_skipped_by_the_trust_policy() {
        let mut catalog = Catalog::default();
        catalog.skipped.push(Skipped {
            dir: PathBuf::from("/s/revoked-one"),
            diagnostics: vec![Diagnostic::error(
                "/s/revoked-one",
                FIELD,
                "revocation: the certificate was revoked",
            )],
        });
        catalog.skipped.push(Skipped {
            dir: PathBuf::from("/s/broken"),
            diagnostics: vec![Diagnostic::error("/s/broken/skill.yaml", "tools", "bad")],
        });
        let list = list(&catalog);
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].name, "revoked-one");
        assert_eq!(
            reason(&catalog, "revoked-one").as_deref(),
            Some("revocation: the certificate was revoked")
        );
        assert_eq!(reason(&catalog, "broken"), None);
        assert_eq!(reason(&catalog, "absent"), None);
    }
}
