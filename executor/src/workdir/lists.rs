//! The last list of files of each context that a call carried whole, kept by the list's
//! SHA-256 (docs/sessions.md): a later call in the context whose list did not change
//! names it by the digest alone, so neither side encodes nor decodes it again. A call
//! naming a list not held is refused before anything runs
//! ([`code::UNKNOWN_FILE_LIST`]), and the core sends it again whole.

use std::sync::Arc;

use skillbox_protocol::jsonrpc::{code, ErrorObject};
use skillbox_protocol::workdir::{HeldLists, WorkDir};

/// The last list of each context, by digest (at most
/// [`skillbox_protocol::workdir::MAX_HELD_LISTS`] lists of
/// [`skillbox_protocol::workdir::MAX_HELD_FILES`] files in all).
#[derive(Debug, Default)]
pub struct ContextLists(HeldLists<String>);

impl ContextLists {
    /// Keeps the list `work` carries whole, or puts in its place the one it names by
    /// digest; refuses one named but not held.
    pub fn resolve(&self, work: &mut WorkDir) -> Result<(), ErrorObject> {
        let (Some(context), Some(digest)) = (&work.context_id, &work.list_sha256) else {
            return Ok(());
        };
        if !work.list_withheld {
            self.0.put(context, digest.clone(), Arc::clone(&work.files));
            return Ok(());
        }
        let Some(files) = self.0.get(context, digest) else {
            return Err(ErrorObject::new(
                code::UNKNOWN_FILE_LIST,
                format!(
                    "this executor does not hold the list of files {digest} of context \
                     {context:?}; send it whole"
                ),
            ));
        };
        work.files = files;
        work.list_withheld = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skillbox_protocol::workdir::WorkFile;

    fn work(context: &str, files: usize) -> WorkDir {
        let file = |i: usize| WorkFile {
            path: format!("f{i}"),
            size: 1,
            sha256: "ab".repeat(32),
            executable: false,
        };
        let mut w = WorkDir {
            files: Arc::new((0..files).map(file).collect()),
            context_id: Some(context.into()),
            ..WorkDir::default()
        };
        w.list_sha256 = Some(w.files.sha256().unwrap().to_string());
        w
    }

    /// As it arrives: the list without its files, named by digest.
    fn named(w: &WorkDir) -> WorkDir {
        WorkDir {
            files: Arc::default(),
            list_withheld: true,
            ..w.clone()
        }
    }

    /// A list carried whole is found by its digest in the same context, and only there;
    /// a list not held is refused with the code the core resends on.
    #[test]
    fn a_list_is_found_by_digest_in_its_context_only() {
        let lists = ContextLists::default();
        let whole = work("c1", 3);
        let mut unknown = named(&whole);
        let refused = lists.resolve(&mut unknown).unwrap_err();
        assert_eq!(refused.code, code::UNKNOWN_FILE_LIST);
        assert!(
            refused.message.contains("send it whole"),
            "{}",
            refused.message
        );
        lists.resolve(&mut whole.clone()).unwrap();
        let mut later = named(&whole);
        lists.resolve(&mut later).unwrap();
        assert!(!later.list_withheld);
        assert_eq!(later.files, whole.files);
        let mut elsewhere = named(&whole);
        elsewhere.context_id = Some("c2".into());
        assert!(lists.resolve(&mut elsewhere).is_err(), "kept per context");
    }

    /// A context's newer list takes the older one's place: the older digest is refused.
    #[test]
    fn a_newer_list_replaces_the_older() {
        let lists = ContextLists::default();
        let (old, new) = (work("c1", 1), work("c1", 2));
        lists.resolve(&mut old.clone()).unwrap();
        lists.resolve(&mut new.clone()).unwrap();
        assert!(lists.resolve(&mut named(&old)).is_err());
        let mut found = named(&new);
        lists.resolve(&mut found).unwrap();
        assert_eq!(found.files.len(), 2);
    }
}
