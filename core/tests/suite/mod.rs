//! The core's integration tests.

mod catalogue;
#[path = "../../../protocol/tests/support/corpus_dir.rs"]
mod corpus_dir;
mod find;
#[path = "../support/git_repo.rs"]
mod git_repo;
mod harness;
mod import;
mod install_archive;
mod install_publisher;
mod install_remove;
mod install_trust;
mod layers;
mod layers_graph;
mod routing_eval;
mod routing_paraphrases;
mod source_edges;
mod sources;
