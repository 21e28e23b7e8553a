//! One file per command surface.

mod add_cli;
mod cli_roots;
mod install_cli;
