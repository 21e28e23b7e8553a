//! The REST API (docs/http-api.md): one file per resource, each a set of handlers the
//! route table names; `api.rs` holds every request and response body.

pub mod api;
pub mod approvals;
pub mod contexts;
pub mod deps;
pub mod files;
pub mod health;
pub mod install;
pub mod observe;
pub mod reload;
pub mod repairs;
pub mod route;
pub mod route_execute;
pub mod route_plan;
pub mod skills;
pub mod tokens;
pub mod tools;
