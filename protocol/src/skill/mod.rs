//! The skill model and how it is built: three manifest loaders (`SKILL.md`, `skill.yaml`,
//! `package.json`), merged by precedence, validated leniently or strictly, and discovered
//! over several roots. Bodies stay on disk until asked for. The package format's
//! [`digest`] and the install [`lock`] live here too, so the executor can check installed
//! skills without linking the code-signing crate.

pub mod dependencies;
pub mod deps;
mod diagnostics;
pub mod digest;
mod discovery;
pub mod frontmatter;
mod load;
mod loaders;
pub mod lock;
mod manifest;
mod model;
pub mod nesting;
pub mod network;
pub mod node_deps;
pub mod script_uses;
pub mod validate;

pub use diagnostics::{Diagnostic, Severity};
pub use digest::{package_digest, DigestError, PackageDigest, SIGNATURE_FILE};
pub use discovery::{
    discover, standard_roots, Catalog, DiscoveryOptions, Refused, Shadowed, Withheld,
    DEFAULT_MAX_DEPTH, DEFAULT_MAX_FOLDERS,
};
pub use load::{load_skill, manifest_files, validate_skill, LoadOutcome, Skipped, Validation};
pub use loaders::skill_md::{ROUTING_KEYS, SPEC_KEYS};
pub use lock::{InstallLock, LockedSkill, SkillOrigin, Trust, LOCK_FILE};
pub use model::*;
