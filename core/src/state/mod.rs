//! The core's state and configuration: the [`workspace`] and every path in its state folder
//! `.skillbox`, `skillbox.toml` ([`config`], loaded once and swapped with the catalogue),
//! the channel's [`pki`], the [`secrets`] skills may use through the proxies, and the
//! SQLite [`store`].

pub mod config;
pub mod deps;
pub mod pki;
pub mod protected;
pub mod secrets;
pub mod store;
pub mod workspace;

pub use workspace::*;
