//! The outcome of each skill's last dependency build (docs/sandbox.md, "Dependencies"):
//! one JSON file per skill in `<state>/deps/`, read at start, written after each build.
//! [`DepsRecords::problem`] is what makes a skill with unbuilt or failed dependencies
//! unavailable, with the reason and the command that fixes it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError, RwLock};

use serde::{Deserialize, Serialize};
use skillbox_protocol::methods::LockedPackage;
use skillbox_protocol::skill::Skill;

/// The folder of the records, in the state folder.
pub const DEPS_DIR: &str = "deps";
/// Lines of a failed build's log a reason quotes.
const REASON_LINES: usize = 3;

/// How one skill's last build ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepsRecord {
    /// The skill.
    pub skill: String,
    /// The environment built (or tried).
    pub digest: String,
    /// Whether every executor has it.
    pub ok: bool,
    /// The requirements asked for.
    pub requirements: Vec<String>,
    /// What it holds: the lock (exact packages with their SHA-256).
    pub packages: Vec<LockedPackage>,
    /// The installer's last lines (the failure's, when it failed).
    pub log_tail: String,
    /// The executors that built it (or the one that failed), by address.
    pub executors: Vec<String>,
    /// When it ended, Unix ms.
    pub finished_ms: i64,
    /// Every connection of the build the egress proxy refused (`host:port: reason`): a
    /// file host the index links to and `[deps] file_hosts` does not name shows here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress_refused: Vec<String>,
    /// Lines of the skill's requirement files that were not taken, each with why (an
    /// option, a URL, a path): never dropped silently.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_taken: Vec<String>,
    /// The URLs of the files the core's download cache served the build instead of the
    /// index (`[deps] cache_mb`): a package whose `url` is here was not downloaded again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from_cache: Vec<String>,
}

/// Every skill's last build, on disk and in memory, and which builds run now.
#[derive(Debug)]
pub struct DepsRecords {
    dir: PathBuf,
    records: RwLock<BTreeMap<String, DepsRecord>>,
    building: Mutex<BTreeSet<String>>,
    /// Skills a build on load will build, not started yet ([`DepsRecords::queue`]).
    queued: Mutex<BTreeSet<String>>,
    progress: Mutex<BTreeMap<String, BuildProgress>>,
}

/// What a build in progress has downloaded so far, as its egress proxy saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct BuildProgress {
    /// Bytes moved over its connections (both ways), live.
    pub bytes: u64,
    /// Its connections that ended (a download each, on an index that closes them).
    pub connections: u64,
    /// Package files the download cache answered.
    pub from_cache: u64,
    /// Index pages it read, about one per package resolved (while the download cache is
    /// on: the proxy reads a build's requests only then).
    pub pages: u64,
    /// Package files it asked for, from the cache or the index.
    pub files: u64,
    /// Seconds since it started.
    pub elapsed_s: u64,
}

impl DepsRecords {
    /// The records of `state` (none when the folder is missing; unreadable ones are
    /// logged and skipped: their skills build again).
    pub fn open(state: &Path) -> Self {
        let dir = state.join(DEPS_DIR);
        let mut records = BTreeMap::new();
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            match std::fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<DepsRecord>(&b).map_err(|e| e.to_string()))
            {
                Ok(r) => {
                    records.insert(r.skill.clone(), r);
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "dependency record skipped")
                }
            }
        }
        Self {
            dir,
            records: RwLock::new(records),
            building: Mutex::new(BTreeSet::new()),
            queued: Mutex::default(),
            progress: Mutex::default(),
        }
    }

    /// Skill `name`'s last build.
    pub fn get(&self, name: &str) -> Option<DepsRecord> {
        let records = self.records.read().unwrap_or_else(PoisonError::into_inner);
        records.get(name).cloned()
    }

    /// Every record.
    pub fn all(&self) -> Vec<DepsRecord> {
        let records = self.records.read().unwrap_or_else(PoisonError::into_inner);
        records.values().cloned().collect()
    }

    /// Keeps `record` (written through a temporary file and a rename).
    pub fn put(&self, record: DepsRecord) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.dir.join(format!("{}.json", record.skill));
        let bytes = serde_json::to_vec_pretty(&record).map_err(std::io::Error::other)?;
        skillbox_certs::write_atomic(&path, &bytes, 0o644)?;
        let mut records = self.records.write().unwrap_or_else(PoisonError::into_inner);
        records.insert(record.skill.clone(), record);
        Ok(())
    }

    /// Marks `name` as building; `false` when a build of it already runs.
    pub fn start(&self, name: &str) -> bool {
        let mut building = self.building.lock().unwrap_or_else(PoisonError::into_inner);
        building.insert(name.to_string())
    }

    /// Notes that `name` will be built shortly (a build on load, in the background): until
    /// [`DepsRecords::unqueue`], it is said to be being built, so that whoever asks right
    /// after a reload (`skill add --wait`) is not told that nothing builds it.
    pub fn queue(&self, name: &str) {
        (self.queued.lock().unwrap_or_else(PoisonError::into_inner)).insert(name.to_string());
    }

    /// `name` is no longer waiting for a build on load (it ran, or will not).
    pub fn unqueue(&self, name: &str) {
        (self.queued.lock().unwrap_or_else(PoisonError::into_inner)).remove(name);
    }

    /// Marks `name`'s build as over.
    pub fn finish(&self, name: &str) {
        let mut building = self.building.lock().unwrap_or_else(PoisonError::into_inner);
        building.remove(name);
        (self.progress.lock().unwrap_or_else(PoisonError::into_inner)).remove(name);
    }

    /// Notes how far `name`'s build has come (while it is building).
    pub fn set_progress(&self, name: &str, progress: BuildProgress) {
        let building = self.building.lock().unwrap_or_else(PoisonError::into_inner);
        if building.contains(name) {
            let mut all = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
            all.insert(name.to_string(), progress);
        }
    }

    /// How far `name`'s build has come, while it runs.
    pub fn progress(&self, name: &str) -> Option<BuildProgress> {
        (self.progress.lock().unwrap_or_else(PoisonError::into_inner))
            .get(name)
            .copied()
    }

    /// Why `skill` cannot run for want of its dependencies (`None`: it has none, or they
    /// are built for its current requirements).
    pub fn problem(&self, skill: &Skill) -> Option<String> {
        let digest = skill.dependencies.digest.as_deref()?;
        let name = &skill.name;
        let fix = format!("run `skillbox skill deps {name}`");
        let building = (self.building.lock())
            .unwrap_or_else(PoisonError::into_inner)
            .contains(name)
            || (self.queued.lock())
                .unwrap_or_else(PoisonError::into_inner)
                .contains(name);
        match self.get(name) {
            Some(r) if r.digest == digest && r.ok => None,
            _ if building => Some(format!(
                "its dependencies are being built; it is available when the build ends (`skillbox skill deps {name}` shows it)"
            )),
            Some(r) if r.digest == digest => {
                let lines: Vec<&str> = r.log_tail.lines().rev().take(REASON_LINES).collect();
                let last: Vec<&str> = lines.into_iter().rev().collect();
                Some(format!(
                    "its dependencies failed to build: {}; fix the requirements (or [deps] index_url) and {fix}",
                    last.join(" | ")
                ))
            }
            _ => Some(format!("its dependencies are not built: {fix}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(skill: &str, digest: &str, ok: bool) -> DepsRecord {
        DepsRecord {
            egress_refused: Vec::new(),
            from_cache: Vec::new(),
            not_taken: Vec::new(),
            skill: skill.into(),
            digest: digest.into(),
            ok,
            requirements: vec!["pypdf".into()],
            packages: Vec::new(),
            log_tail: "Collecting pypdf\nERROR: No matching distribution found for pypdf".into(),
            executors: vec!["127.0.0.1:1".into()],
            finished_ms: 1,
        }
    }

    #[test]
    fn records_survive_a_restart_and_say_what_is_missing() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("pdf");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            "---\nname: pdf\ndescription: PDFs\n---\n",
        )
        .unwrap();
        let skillbox_protocol::skill::LoadOutcome::Loaded(skill) =
            skillbox_protocol::skill::load_skill(&dir)
        else {
            panic!("the test skill loads");
        };
        let mut skill = *skill;
        skill.dependencies.digest = Some("d1".into());
        let records = DepsRecords::open(state.path());
        let why = records.problem(&skill).unwrap();
        assert!(
            why.contains("not built") && why.contains("skillbox skill deps pdf"),
            "{why}"
        );
        records.put(record("pdf", "d1", false)).unwrap();
        let records = DepsRecords::open(state.path());
        let why = records.problem(&skill).unwrap();
        assert!(
            why.contains("failed to build") && why.contains("No matching distribution"),
            "{why}"
        );
        records.put(record("pdf", "d1", true)).unwrap();
        assert_eq!(records.problem(&skill), None);
        skill.dependencies.digest = Some("d2".into());
        assert!(
            records.problem(&skill).unwrap().contains("not built"),
            "a changed requirement builds anew"
        );
        // A build on load is said to be coming before it starts, so that `skill add
        // --wait` right after the reload waits for it instead of giving up.
        records.queue("pdf");
        assert!(records.problem(&skill).unwrap().contains("being built"));
        records.unqueue("pdf");
        assert!(records.problem(&skill).unwrap().contains("not built"));
        assert!(records.start("pdf") && !records.start("pdf"));
        assert!(records.problem(&skill).unwrap().contains("being built"));
    }
}
