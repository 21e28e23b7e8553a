//! The MCP protocol versions served: both eras (the handshake era and the stateless
//! revision), read by the era classifier and by the refusal of an unknown version.

/// The stateless revision.
pub const MODERN_VERSION: &str = "2026-07-28";
/// The handshake-era versions served, oldest first.
pub const HANDSHAKE_VERSIONS: [&str; 2] = ["2025-06-18", "2025-11-25"];
/// Every version served, oldest first (`server/discover`'s `supportedVersions` and the
/// `data.supported` of a version refusal).
pub const SUPPORTED_VERSIONS: [&str; 3] = ["2025-06-18", "2025-11-25", MODERN_VERSION];
