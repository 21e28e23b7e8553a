//! The kill list: skills the trust policy disabled at the last load or reload
//! ([`super::verify::enforce`] moves them from the catalogue's skills to its typed
//! [`Catalog::withheld`] list). The gateway lists them as unavailable with the reason, and
//! a call of one of their tools is refused with it.

use skillbox_protocol::skill::{Catalog, Diagnostic, Withheld};

/// A skill disabled by the trust policy.
pub type Disabled = Withheld;

/// Every skill of `catalog` the trust policy disabled, in discovery order.
pub fn list(catalog: &Catalog) -> &[Disabled] {
    &catalog.withheld
}

/// Why the skill `name` is disabled, when the trust policy disabled it.
pub fn reason(catalog: &Catalog, name: &str) -> Option<String> {
    list(catalog)
        .iter()
        .find(|d| d.name == name)
        .map(|d| d.reason.clone())
}

/// The line a reload reports for a disabled skill among the skipped folders, in the form
/// of a folder's diagnostic (`error: <dir>: trust: <reason>`).
pub fn report_line(disabled: &Disabled) -> String {
    Diagnostic::error(&disabled.dir, "trust", &disabled.reason).to_string()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use skillbox_protocol::skill::Skipped;

    #[test]
    fn list_holds_only_skills_withheld_by_the_trust_policy() {
        let mut catalog = Catalog::default();
        catalog.withheld.push(Withheld {
            name: "revoked-one".into(),
            dir: PathBuf::from("/s/revoked-one"),
            reason: "revocation: the certificate was revoked".into(),
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
        assert_eq!(
            report_line(&list[0]),
            "error: /s/revoked-one: trust: revocation: the certificate was revoked"
        );
    }
}
