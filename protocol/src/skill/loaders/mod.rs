//! The three manifest loaders. Each reads one file into a partial [`super::manifest::Manifest`];
//! merging and validation happen in [`super::load`].

pub(crate) mod package_json;
pub(crate) mod skill_md;
pub(crate) mod skill_yaml;
