//! One load of the skills and what goes with it ([`Loaded`]: the catalogue, the
//! configuration read with it, the stamps of the installed skills and the router over
//! them, swapped together), and the cell holding the current one ([`LoadCell`]), shared by
//! the call pipeline, the gateway and the reload that swaps it.

use std::sync::{Arc, PoisonError, RwLock};

use skillbox_protocol::skill::dependencies::DepsPolicy;
use skillbox_protocol::skill::{Catalog, Permissions, Skill};

use crate::router::Router;
use crate::skills::stamp::InstalledStamps;
use crate::state::config::grants::Grant;
use crate::state::config::Config;

/// What a load or reload produced, swapped as one: the catalogue, the configuration read
/// with it (once per load, never per request) and the router over both (built at its
/// first use and kept with them: no global cache).
#[derive(Debug)]
pub struct Loaded {
    /// The skills, each with its effective permissions (declared plus granted).
    pub catalog: Arc<Catalog>,
    /// The permissions each skill with a `[grants.<skill>]` declared itself, before the
    /// grant was added (what `GET /v1/skills/{name}` shows beside the grant).
    declared: std::collections::HashMap<String, Permissions>,
    /// `skillbox.toml` as it was at that load.
    pub config: Arc<Config>,
    /// Each skill of the catalogue, shared, by name: a call takes a reference to its skill
    /// instead of copying it.
    skills: std::collections::HashMap<String, Arc<Skill>>,
    /// The installed skills' files as they were verified (admission refuses a change).
    pub stamps: Arc<InstalledStamps>,
    /// The router over this catalogue with this `[routing]`.
    router: std::sync::OnceLock<Arc<Router>>,
    /// Every tool of this catalogue and the base tools ([`crate::contexts::all_tools`]):
    /// what a context that does not restrict its tools allows, made at its first use
    /// rather than per call.
    every_tool: std::sync::OnceLock<Arc<std::collections::BTreeSet<skillbox_protocol::Target>>>,
    /// Routers over some of the skills only (bots limited to them), by the skills' names,
    /// built at their first use: at most [`LIMITED_ROUTERS`] per load.
    limited: std::sync::Mutex<std::collections::HashMap<Vec<String>, Arc<Router>>>,
}

/// Routers over a subset of the skills one load keeps (one per distinct set of skills
/// that limited bots may use); past that, a subset's router is built per request.
pub const LIMITED_ROUTERS: usize = 64;

impl Loaded {
    /// The catalogue and the configuration of one load.
    pub fn new(mut catalog: Catalog, config: Arc<Config>) -> Self {
        let mut declared = std::collections::HashMap::new();
        for skill in &mut catalog.skills {
            let grant = config.grants.get(&skill.name);
            if let Some(grant) = grant.filter(|g| !g.is_empty()) {
                declared.insert(skill.name.clone(), skill.permissions.clone());
                grant.apply(&mut skill.permissions);
                // What the executor gets as `granted_unix_sockets`, in the core's copy of
                // the skill too, for its availability.
                skill.execution.unix_sockets |= grant.unix_sockets;
            }
            let mut constraints = config.deps.constraints.clone();
            constraints.extend(grant.iter().flat_map(|g| g.constraints.iter().cloned()));
            let policy = DepsPolicy {
                granted: grant.map_or(&[][..], |g| g.requirements.as_slice()),
                allow_source: grant.is_some_and(|g| g.allow_source_builds),
                index_url: &config.deps.index_url,
                allow_scripts: grant.is_some_and(|g| g.allow_install_scripts),
                npm_registry: &config.deps.npm_registry,
            };
            (skill.dependencies).complete(policy, constraints);
        }
        for name in config.grants.keys() {
            if catalog.get(name).is_none() {
                tracing::warn!(skill = %name, "[grants.{name}] names no loaded skill; it applies once one of that name loads");
            }
        }
        let skills = (catalog.skills.iter())
            .map(|s| (s.name.clone(), Arc::new(s.clone())))
            .collect();
        Self {
            catalog: Arc::new(catalog),
            declared,
            config,
            skills,
            stamps: Arc::default(),
            router: std::sync::OnceLock::new(),
            every_tool: std::sync::OnceLock::new(),
            limited: std::sync::Mutex::default(),
        }
    }

    /// Every tool of this load's catalogue and the base tools, made once.
    pub fn every_tool(&self) -> Arc<std::collections::BTreeSet<skillbox_protocol::Target>> {
        let every = self
            .every_tool
            .get_or_init(|| Arc::new(crate::contexts::all_tools(&self.catalog)));
        Arc::clone(every)
    }

    /// The router of this load.
    pub fn router(&self) -> Arc<Router> {
        Arc::clone(self.router.get_or_init(|| {
            Arc::new(Router::new(
                Arc::clone(&self.catalog),
                self.config.routing.clone(),
            ))
        }))
    }

    /// The router over the skills `may_use` allows only (a bot limited to some skills: its
    /// plans never name another), kept with the load for the next request with the same
    /// skills: building one reads and embeds the skills' bodies.
    pub fn router_limited_to(&self, may_use: impl Fn(&str) -> bool) -> Arc<Router> {
        let skills: Vec<Skill> = (self.catalog.skills.iter())
            .filter(|s| may_use(&s.name))
            .cloned()
            .collect();
        let names: Vec<String> = skills.iter().map(|s| s.name.clone()).collect();
        let mut limited = self.limited.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(router) = limited.get(&names) {
            return Arc::clone(router);
        }
        let catalog = Catalog {
            skills,
            ..Catalog::default()
        };
        let router = Arc::new(Router::new(Arc::new(catalog), self.config.routing.clone()));
        if limited.len() < LIMITED_ROUTERS {
            limited.insert(names, Arc::clone(&router));
        }
        router
    }

    /// The same load with the installed skills' stamps taken before they were verified.
    pub fn with_stamps(mut self, stamps: InstalledStamps) -> Self {
        self.stamps = Arc::new(stamps);
        self
    }

    /// What skill `name` declared itself and what `[grants.<name>]` adds, when the
    /// operator grants it anything.
    pub fn grant_of(&self, name: &str) -> Option<(&Permissions, &Grant)> {
        let declared = self.declared.get(name)?;
        Some((declared, self.config.grants.get(name)?))
    }

    /// The skill `name`, shared.
    pub fn skill(&self, name: &str) -> Option<Arc<Skill>> {
        self.skills.get(name).map(Arc::clone)
    }
}

/// Builds `loaded`'s router on a thread of its own when recall by meaning is on: embedding
/// the skills that are not cached yet takes seconds (about 1.6 s for 62 skills with their
/// bodies), which the first route would otherwise wait for. A route that comes first
/// waits for this build instead of starting another.
fn warm(loaded: &Arc<Loaded>) {
    if !loaded.config.routing.semantic || loaded.catalog.skills.is_empty() {
        return;
    }
    let loaded = Arc::clone(loaded);
    let spawned = std::thread::Builder::new()
        .name("router-warm".into())
        .spawn(move || drop(loaded.router()));
    if let Err(e) = spawned {
        tracing::warn!("the router is built on the first route: {e}");
    }
}

/// The current load; a reload swaps it whole, and what a request read stays as it was.
#[derive(Debug)]
pub struct LoadCell {
    current: RwLock<Arc<Loaded>>,
}

impl LoadCell {
    /// A cell holding `loaded`.
    pub fn new(loaded: Loaded) -> Self {
        let loaded = Arc::new(loaded);
        warm(&loaded);
        Self {
            current: RwLock::new(loaded),
        }
    }

    /// The current load.
    pub fn current(&self) -> Arc<Loaded> {
        let guard = self.current.read().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(&guard)
    }

    /// The skills the core knows.
    pub fn catalog(&self) -> Arc<Catalog> {
        Arc::clone(&self.current().catalog)
    }

    /// The configuration of the current load.
    pub fn config(&self) -> Arc<Config> {
        Arc::clone(&self.current().config)
    }

    /// Replaces the catalogue with the stamps of its installed skills, and the
    /// configuration when a new one was read (a reload).
    pub fn swap(&self, catalog: Catalog, config: Option<Config>, stamps: InstalledStamps) {
        let config = config.map_or_else(|| self.config(), Arc::new);
        let next = Arc::new(Loaded::new(catalog, config).with_stamps(stamps));
        warm(&next);
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = next;
    }

    /// Replaces the catalogue (and the configuration when given), with no stamps.
    pub fn set_catalog(&self, catalog: Catalog, config: Option<Config>) {
        self.swap(catalog, config, InstalledStamps::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skillbox_protocol::skill::{discover, DiscoveryOptions};

    /// A load of skills `a`, `b` and `c` (routing by words: what is tested is which router
    /// is kept, not how it routes).
    fn three_skills() -> (tempfile::TempDir, Loaded) {
        let root = tempfile::tempdir().unwrap();
        for name in ["a", "b", "c"] {
            let dir = root.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            let md = format!("---\nname: {name}\ndescription: Skill {name}.\n---\nBody.\n");
            std::fs::write(dir.join("SKILL.md"), md).unwrap();
        }
        let catalog = discover(&[root.path().to_path_buf()], DiscoveryOptions::default());
        let mut config = Config::default();
        config.routing.semantic = false;
        (root, Loaded::new(catalog, Arc::new(config)))
    }

    #[test]
    fn a_limited_router_holds_only_the_allowed_skills_and_is_kept_per_set_of_skills() {
        let (_root, loaded) = three_skills();
        let names = |r: &Router| -> Vec<String> {
            r.catalog().skills.iter().map(|s| s.name.clone()).collect()
        };
        let ab = loaded.router_limited_to(|n| n != "c");
        assert_eq!(names(&ab), ["a", "b"]);
        let again = loaded.router_limited_to(|n| n == "a" || n == "b");
        assert!(Arc::ptr_eq(&ab, &again), "the same skills: the kept router");
        let c = loaded.router_limited_to(|n| n == "c");
        assert_eq!(names(&c), ["c"]);
        assert!(!Arc::ptr_eq(&ab, &c));
        assert_eq!(names(&loaded.router()), ["a", "b", "c"]);
    }
}
