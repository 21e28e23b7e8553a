//! An abbreviated commit id as `--ref`: a remote answers for refs only, so its branches
//! and tags are fetched (whole, under the same byte and time limits) and the commit is
//! the one fetched commit whose id starts with the prefix.

use std::path::Path;

use super::{run_out, GitRunner};
use crate::skills::sources::SourceError;

/// Most commits an ambiguous prefix lists.
const AMBIGUOUS_SHOWN: usize = 5;

impl GitRunner {
    /// Fetches every branch and tag of `url` and points `refs/skillbox/fetched` at the one
    /// commit starting with `prefix`.
    pub(super) fn fetch_short_commit(
        &self,
        repo: &Path,
        url: &str,
        prefix: &str,
    ) -> Result<String, SourceError> {
        self.fetch_refspecs(
            repo,
            url,
            &[
                "+refs/heads/*:refs/skillbox/heads/*",
                "+refs/tags/*:refs/skillbox/tags/*",
            ],
            false,
        )?;
        let all = run_out(self.command(Some(repo)), &["rev-list", "--all"])?;
        let prefix = prefix.to_ascii_lowercase();
        let matches: Vec<&str> = all.lines().filter(|c| c.starts_with(&prefix)).collect();
        match matches.as_slice() {
            [] => Err(SourceError::CommitNotFound {
                reference: prefix,
                url: url.into(),
            }),
            [one] => {
                let mut cmd = self.command(Some(repo));
                cmd.args(["update-ref", "refs/skillbox/fetched", one]);
                super::run(cmd, "update-ref", std::time::Duration::from_secs(30))?;
                Ok((*one).to_string())
            }
            many => Err(SourceError::CommitAmbiguous {
                reference: prefix,
                commits: many
                    .iter()
                    .take(AMBIGUOUS_SHOWN)
                    .map(|c| c.to_string())
                    .collect(),
            }),
        }
    }
}
