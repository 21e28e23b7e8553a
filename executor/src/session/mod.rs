//! Command sessions (placeholder).
