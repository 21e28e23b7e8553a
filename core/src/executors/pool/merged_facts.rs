//! The sandbox facts of several executors merged once, not on every call: admission asks
//! for them on each call ([`super::ExecutorPool::sandbox_facts`]), and a merge copies the
//! first executor's facts whole (every program and every skill's script report). The
//! merge is kept with the facts it was made from and made again only when one of them is
//! not the same any more (each health check of an executor that answered makes new ones).

use std::sync::{Arc, Mutex};

use skillbox_protocol::status::SandboxFacts;

/// A merge and the facts it was made from, in the executors' order.
type Merge = (Vec<Arc<SandboxFacts>>, Arc<SandboxFacts>);

/// The last merge and what it was made from.
#[derive(Debug, Default)]
pub(super) struct MergedFacts {
    last: Mutex<Option<Merge>>,
}

impl MergedFacts {
    /// The facts of `parts` merged ([`SandboxFacts::merge`]): one part as it is, the kept
    /// merge when `parts` are the very ones it was made from (held here, so none of them
    /// can be freed and another take its address), else a new one, kept.
    pub(super) fn of(&self, parts: Vec<Arc<SandboxFacts>>) -> Option<Arc<SandboxFacts>> {
        let (first, rest) = parts.split_first()?;
        if rest.is_empty() {
            return Some(Arc::clone(first));
        }
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((from, merged)) = last.as_ref() {
            let same = from.len() == parts.len()
                && from.iter().zip(&parts).all(|(a, b)| Arc::ptr_eq(a, b));
            if same {
                return Some(Arc::clone(merged));
            }
        }
        let mut merged = SandboxFacts::clone(first);
        for part in rest {
            merged.merge(part);
        }
        let merged = Arc::new(merged);
        *last = Some((parts, Arc::clone(&merged)));
        Some(merged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(program: &str, present: bool) -> Arc<SandboxFacts> {
        let mut f = SandboxFacts::default();
        f.programs.insert(program.to_string(), present);
        f.network_namespaces = true;
        Arc::new(f)
    }

    #[test]
    fn the_merge_is_kept_while_its_parts_are_the_same_and_made_again_when_one_changes() {
        let kept = MergedFacts::default();
        assert!(kept.of(Vec::new()).is_none());
        let one = facts("jq", true);
        assert!(Arc::ptr_eq(&kept.of(vec![Arc::clone(&one)]).unwrap(), &one));

        let two = facts("jq", false);
        let first = kept.of(vec![Arc::clone(&one), Arc::clone(&two)]).unwrap();
        assert_eq!(first.programs.get("jq"), Some(&false));
        let again = kept.of(vec![Arc::clone(&one), Arc::clone(&two)]).unwrap();
        assert!(
            Arc::ptr_eq(&first, &again),
            "merged again with nothing changed"
        );

        // The second executor's next health check: equal facts, a new report.
        let fixed = facts("jq", true);
        let after = kept.of(vec![Arc::clone(&one), Arc::clone(&fixed)]).unwrap();
        assert!(!Arc::ptr_eq(&first, &after));
        assert_eq!(after.programs.get("jq"), Some(&true));
        // One executor gone: its facts no longer count.
        let alone = kept.of(vec![Arc::clone(&two)]).unwrap();
        assert_eq!(alone.programs.get("jq"), Some(&false));
        let back = kept.of(vec![one, fixed, two]).unwrap();
        assert_eq!(back.programs.get("jq"), Some(&false));
    }
}
