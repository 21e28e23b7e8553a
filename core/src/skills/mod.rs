//! The skill store: what is installed and how it changes. Verified [`install`] and removal
//! of signed packages (with the kill list of skills the trust policy disabled), the skills
//! [`roots`] the catalogue is read from, the one [`reload`] of skills and trust, and the
//! [`watch`] that triggers it when a root or the trust folder changes.

pub mod install;
pub mod reload;
pub mod roots;
pub mod stamp;
pub mod tree_watch;
pub mod watch;
