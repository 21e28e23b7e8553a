//! One file per command surface.

mod cli_roots;
mod install_cli;
