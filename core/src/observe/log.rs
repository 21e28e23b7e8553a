//! `[log] format`: the core's log lines on stderr as `"text"` (default) or `"json"` (one
//! JSON object per line, for log shippers). The `skillbox` binary installs the subscriber
//! (skillbox-cli's `log` module); the executor `up` starts follows the same format. The
//! section itself is configuration data ([`crate::state::config::log`]).

pub use crate::state::config::log::{LogFormat, LogSection};
