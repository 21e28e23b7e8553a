//! Skill folders built in temporary directories, loaded through the public API: every
//! loader, every validation rule (one valid and one invalid case each), precedence,
//! discovery, and the real-world corpus in `shared/corpus`.

mod common;
mod corpus;
mod discovery;
mod identity;
mod memory;
mod package_json;
mod permissions;
mod precedence;
mod skill_md;
mod skill_yaml;
mod tools;
mod validate;
