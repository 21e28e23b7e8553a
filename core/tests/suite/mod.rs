//! The core's integration tests.

mod harness;
mod install_archive;
mod install_publisher;
mod install_remove;
mod install_trust;
mod layers;
mod routing_eval;
