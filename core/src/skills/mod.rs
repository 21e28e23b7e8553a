//! The skill store: what is installed and how it changes. Verified [`install`] and removal
//! of signed packages (with the kill list of skills the trust policy disabled), the skills
//! [`roots`] the catalogue is read from, the [`stamp`]s that tell an installed skill edited
//! since it was verified, the [`tree_watch`] of the roots, and the git [`sources`] skills
//! are added and updated from. [`import`] brings in the skills other agents keep (copied
//! through the verified install, or their folder added as a root); [`find`] searches
//! collection indexes and the installed skills. The one reload of skills and trust that
//! swaps what calls see is [`crate::reload`], above the call pipeline.

pub mod find;
pub mod import;
pub mod install;
pub mod roots;
pub mod sources;
pub mod stamp;
pub mod stamp_watch;
pub mod tree_watch;
