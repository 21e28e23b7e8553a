//! What the gateway's three protocols (REST, MCP, the console) share: a request as a
//! handler sees it, read within its bounds ([`request`]), an answer's body, whole or a
//! streamed file ([`body`]), the one mapping of an error to its HTTP status ([`error`]),
//! list parameters ([`list`]), percent-escapes in paths ([`pct`]), and the server that
//! accepts connections and bounds them ([`server`]).

pub mod body;
pub mod error;
pub mod list;
pub mod pct;
pub mod request;
pub mod server;
