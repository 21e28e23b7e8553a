//! The skill model and how it is built: three manifest loaders (`SKILL.md`, `skill.yaml`,
//! `package.json`), merged by precedence, validated leniently or strictly, and discovered
//! over several roots. Bodies stay on disk until asked for.

mod diagnostics;
mod discovery;
pub mod frontmatter;
mod load;
mod loaders;
mod manifest;
mod model;
pub mod network;
pub mod validate;

pub use diagnostics::{Diagnostic, Severity};
pub use discovery::{
    discover, standard_roots, Catalog, DiscoveryOptions, Refused, Shadowed, DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_FOLDERS,
};
pub use load::{load_skill, manifest_files, validate_skill, LoadOutcome, Skipped, Validation};
pub use loaders::skill_md::{ROUTING_KEYS, SPEC_KEYS};
pub use model::*;
