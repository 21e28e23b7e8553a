//! `skillbox.toml`: the core's configuration, read from the workspace. Every key has a
//! default; unknown keys are errors (a typo must not silently weaken a policy).
//!
//! ```toml
//! [gateway]                        # every bound: docs/http-api.md, "Limits"
//! listen = "127.0.0.1:7070"        # bots connect here (bearer token in <state>/api-token)
//! max_request_bytes = 1048576      # largest request body
//! header_timeout_ms = 10000        # longest wait for a request head
//! header_timeout_under_load_ms = 1000 # ... of a connection accepted past the high-water
//!                                  # mark, and of every health-reserve connection
//! body_timeout_ms = 30000          # longest wait for a whole body (408)
//! idle_timeout_ms = 5000           # a kept-alive connection with no request is closed
//! # max_connections = 16384        # default: half the open-file limit (raised to its hard
//!                                  # limit at start), at most 16384
//! # max_connections_per_peer = 1024 # default: 1024, or half max_connections if smaller;
//!                                  # past it a peer's new connection evicts its oldest one
//!                                  # with no request in progress (loopback is one peer)
//! # high_water_connections = 8192  # default: half max_connections
//! healthz_reserve_connections = 16 # past the cap, connections that may ask GET /healthz
//!
//! [executor]
//! url = ""                         # `skillbox serve`: the executor's https URL; `up` starts its own
//! urls = []                        # `serve`: more executor URLs. Every host name is resolved again
//!                                  # each health round: `executor` scaled to N containers is N executors
//! health_interval_ms = 2000        # each executor is asked `health` this often; calls skip unhealthy ones
//! listen = ""                      # `up`: where the executor it starts listens (default: a free
//!                                  # port on 127.0.0.1, so two `up` never collide)
//! callback_listen = ""             # where the core takes executor callbacks (fetch, sign, readFile);
//!                                  # default: `up` a free port on 127.0.0.1, `serve` 127.0.0.1:7072
//! callback_url = ""                # how the executor reaches that listener (default https://<callback_listen>)
//! call_timeout_ms = 300000         # a tool call's longest round trip through the channel
//! max_concurrent = 16              # calls the executor runs at once
//! scratch_tmpfs_mb = 512           # `up`: the executor's scratch dirs on a tmpfs of this size,
//!                                  # private to it (needs root); 0: on disk under TMPDIR
//! binary = ""                      # skillbox-executor to start (default: next to skillbox)
//! pki_export = ""                  # `serve`: also copy the executor's certificate, key and the
//!                                  # CA certificate here (a volume the executor mounts)
//! pki_dir = ""                     # `serve`: read ca.pem, skillbox-core.pem and skillbox-core.key
//!                                  # from here (orchestrator secrets made by `skillbox certs
//!                                  # channel --out DIR`) instead of making a PKI in <state>/pki
//!
//! [docker]                         # the Docker engine, when the core can reach one (crate::executors::docker)
//! socket = "auto"                  # "auto": /var/run/docker.sock if it answers; "off"; or a socket path
//! supervise = true                 # restart executor containers that exited or stopped answering
//! project = ""                     # their compose project (default: the core container's own)
//! service = "executor"             # their compose service
//! restart_after_ms = 10000         # an executor unhealthy this long is restarted
//! interval_ms = 3000               # how often the supervisor looks
//! executor_image = "skillbox-executor:latest" # image of `execution.sandbox: container` calls
//! skills_host_dir = ""             # the skills root as the engine's host sees it (default: found
//!                                  # from the core container's mounts, else the skills root)
//! container_memory_overhead_mb = 64 # added to the skill's memory_mb for the executor itself
//! container_pids = 128             # pids limit of a per-call container
//! container_cpus = 1.0             # CPU limit of a per-call container
//! max_containers = 8               # per-call containers at once; more calls are refused `unavailable`
//!
//! [fetch]
//! allow_private = []               # "host:port" pairs that may resolve to private addresses
//! max_request_bytes = 1048576     # largest request body a tool may send
//! max_response_bytes = 5242880
//! timeout_ms = 15000
//! max_redirects = 5
//!
//! [egress]                         # the network of every program in a sandbox (docs/sandbox.md)
//! max_bytes_per_call = 268435456   # bytes one call moves through the proxy, both ways together
//! max_connections_per_call = 64    # connections one call has open at once; one more is refused
//! connect_timeout_ms = 10000       # longest TCP connect to a server
//! idle_timeout_ms = 60000          # a connection carrying nothing either way this long is closed
//! resolve = {}                     # names pinned to addresses, as curl --resolve:
//!                                  # {"api.example.test" = "127.0.0.1"} (also for fetch); a private
//!                                  # address still needs host:port in [fetch] allow_private
//!
//! [read_file]
//! max_bytes = 1048576
//!
//! [approvals]
//! timeout_ms = 120000              # a write/sign call waits this long for a decision
//! auto_approve = []                # "skill:tool" or "skill:*" approved without asking
//! allow_max_minutes = 60           # longest "allow this tool for N minutes" an operator may set
//! allow_max_entries = 16           # such allowances at once (docs/console.md)
//! bots_confirm_write = false       # a bot may decide its own write calls' approvals (never sign)
//!
//! [files]                          # a context's working folder (docs/http-api.md)
//! max_file_bytes = 67108864        # largest file
//! max_total_bytes = 268435456      # all of one context's files together
//! max_files = 1000                 # files in one context
//! idle_days = 7                    # a context unwritten this long is removed (0: kept)
//!
//! [exec]                           # command sessions of a context (docs/sessions.md)
//! enabled = true                   # exec_command, write_stdin, close_context in every context
//! approval = "never"               # or "always": each command waits for an operator's approval
//! max_sessions_per_context = 4     # sessions running at once in one context
//! idle_timeout_ms = 600000         # a session nobody writes to or polls this long ends
//! lifetime_ms = 3600000            # a session ends this long after it started
//! output_kept_bytes = 1048576      # output kept between answers (head and tail)
//! max_output_bytes = 65536         # output in one answer unless the call asks for less
//! memory_mb = 512                  # memory of a session without a skill (a skill's own otherwise)
//! quiet_ms = 2                     # after write_stdin: quiet output before the answer, unless
//!                                  # the session is seen waiting for input sooner
//!
//! [grants.SKILL]                    # permissions granted to a skill beyond what it declares
//! network = []                     # as permissions.network, e.g. ["wttr.in"]
//! env = []                         # as permissions.env: names whose values the core supplies
//! workspace = { read = [] }        # as permissions.workspace.read
//! max_file_mb = 1024              # largest file its programs write, replacing the skill's
//!                                  # execution.max_file_mb (1 - 1048576)
//!
//! [console]                        # the operator console (docs/console.md)
//! session_minutes = 480            # a console session expires this long after sign-in
//! max_sessions = 32                # sessions at once; signing in beyond it ends the oldest
//! link_seconds = 600               # the one-time sign-in link `up` prints works this long
//!
//! [observe]                        # docs/observability.md
//! routes_kept = 1000               # routing decisions kept for GET /v1/routes
//! max_list_limit = 500             # largest ?limit= of GET /v1/calls and /v1/routes
//!
//! [log]
//! format = "text"                  # or "json": one JSON object per line, never colour codes
//!
//! [skills]                       # crate::skills::roots
//! roots = []                       # skills roots, highest precedence first (relative: to the
//!                                  # workspace; ~/: home); "skills" (installs) is always one
//! indexes = []                     # collection indexes `skill find` searches: paths (relative
//!                                  # to the workspace) or http(s) URLs (docs/skill-index.md)
//! git_host = "https://github.com"  # what `skill add owner/repo` fetches from
//! auto_update = false              # true: `skill update` applies updates that widen nothing
//!                                  # without --yes (widening ones always wait)
//!
//! [skills.fetch]                   # crate::skills::sources: one git fetch
//! max_bytes = 209715200            # pack bytes received
//! max_files = 20000                # files in the fetched tree
//! max_file_bytes = 52428800        # largest file of a chosen skill
//! timeout_secs = 300
//! allow_http = false               # plain http:// git URLs
//!
//! [skills.install_policy]          # checked on add, update and import
//! signed_only = false
//! sources = []                     # "owner/repo", "owner/*", "https://host/*"; empty: any
//! publishers = []                  # certificate publisher names; non-empty: signed only
//! max_permissions = {}             # security = "write", network = [..], env = [..],
//!                                  # secrets = [..], dependencies = false,
//!                                  # delegate = [..]
//!
//! [trust]
//! require_signed = false           # true: install and run only skills signed under a root in
//!                                  # <state>/trust (docs/signing-runbook.md); false: unsigned skills are
//!                                  # allowed under the trust label "local"
//!
//! [routing]                        # routing spec §6 (router::score explains each term)
//! threshold = 0.65                 # score a skill needs to be selected (forced skills skip it)
//! top_k = 3                        # semantic recall depth
//! intent_half = 0.5                # BM25 score (in rare-word IDFs) where intent_match = 0.5
//! cold_start_calls = 20            # calls before a skill's own success rate counts in full
//! max_parallel = 2                 # skills per parallel stage
//! max_fallback_skills = 2          # same-intent skills in a fallback chain
//! cross_lingual = true             # expand Chinese queries with the built-in lexicon
//! max_candidates = 64              # most candidates scored for one query
//! semantic = true                 # recall by meaning (sentence encoder compiled in)
//! semantic_z_floor = 2.5           # z-score of a skill's similarity where it starts to count
//! semantic_z_full = 4.0            # ... and where it counts in full as intent_match
//! max_delegate_depth = 2           # runSkill: how deep one skill's calls of another nest
//! max_delegated_calls = 8          # runSkill: calls one request's tree may delegate
//!
//! [routing.weights]
//! intent_match = 0.40
//! trigger_match = 0.20
//! success_rate = 0.15
//! context_readiness = 0.10
//! cost_penalty = 0.10
//! conflict_penalty = 0.05
//!
//! [repair]                         # routing spec §11–13 (crate::repair explains the checks)
//! attempts_per_run = 2             # repair attempts one run may make on one skill
//! files_per_attempt = 3            # files one attempt may change
//! hunks_per_attempt = 8            # hunks one attempt may contain
//! added_doc_tokens = 300           # words one attempt may add to SKILL.md and references/
//! min_task_progress = 0.70         # a repair needs the failed run this close to success
//! max_root_causes = 1              # ... and at most this many root causes (at least one)
//!
//! [mcp]                            # the MCP server on the gateway (docs/mcp.md)
//! allowed_origins = []             # browser origins allowed to call POST /mcp ("https://app.example");
//!                                  # a request without Origin is fine, any other Origin is refused 403
//! max_resource_bytes = 4194304     # largest context file resources/read returns
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The config file's name in a workspace.
pub use crate::state::workspace::CONFIG_FILE;
pub use gateway::GatewayConfig;

/// A key's value and the range it allows, checked at load ([`Config::load`]): `(key, value,
/// low, high)`; integers as `f64` are exact at these sizes.
pub(crate) type KeyRange = (&'static str, f64, f64, f64);

pub mod approvals;
pub mod console;
pub mod deps;
pub mod egress;
pub mod exec;
pub mod fetch;
pub mod files;
pub mod gateway;
pub mod grants;
pub mod log;
pub mod observe;
pub mod repair;
pub mod routing;
pub mod skills;
pub mod sources;

mod sections;

pub use sections::{
    DockerSection, ExecutorConfig, McpSection, ReadFileSection, TrustSection,
    DEFAULT_SCRATCH_TMPFS_MB, SERVE_CALLBACK_LISTEN,
};

/// The whole configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Gateway settings.
    pub gateway: GatewayConfig,
    /// Executor and channel settings.
    pub executor: ExecutorConfig,
    /// The Docker engine: executor supervision and per-call containers.
    pub docker: DockerSection,
    /// Fetch proxy settings.
    pub fetch: fetch::FetchConfig,
    /// `[egress]`: the egress proxy's limits and pinned names.
    pub egress: egress::EgressConfig,
    /// `[deps]`: how skills' Python dependencies are built.
    pub deps: deps::DepsConfig,
    /// `[files]`: a context's working folder.
    pub files: files::FilesSection,
    /// `[exec]`: a context's command sessions.
    pub exec: exec::ExecSection,
    /// `[grants.<skill>]`: permissions the operator grants skills beyond their own.
    pub grants: grants::Grants,
    /// readFile proxy settings.
    pub read_file: ReadFileSection,
    /// Approval settings.
    pub approvals: approvals::ApprovalPolicy,
    /// Skills roots and their precedence.
    pub skills: skills::SkillsSection,
    /// Signed-skill policy.
    pub trust: TrustSection,
    /// Routing weights and threshold.
    pub routing: routing::RoutingConfig,
    /// Self-repair budget and eligibility.
    pub repair: repair::RepairConfig,
    /// The operator console's sessions and sign-in link.
    pub console: console::ConsoleSection,
    /// History kept for the observability routes.
    pub observe: observe::ObserveSection,
    /// The log format.
    pub log: log::LogSection,
    /// The MCP server on the gateway.
    pub mcp: McpSection,
}

/// Why the config could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The file is not valid.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: std::path::PathBuf,
        /// Cause (names the key).
        source: toml::de::Error,
    },
    /// A `[grants.<skill>]` entry that is not a valid permission.
    #[error("{path}: [grants.{skill}] {problems}")]
    BadGrant {
        /// The file.
        path: std::path::PathBuf,
        /// The skill.
        skill: String,
        /// What is wrong, key by key.
        problems: String,
    },
    /// `[deps]` that cannot be used.
    #[error("{path}: [deps] {problem}")]
    BadDeps {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A value outside the range the key allows.
    #[error("{path}: {key} = {value} is out of range; use {range}")]
    OutOfRange {
        /// The file.
        path: std::path::PathBuf,
        /// The key, `section.key`.
        key: &'static str,
        /// The value given.
        value: String,
        /// The range allowed.
        range: String,
    },
}

impl Config {
    /// Reads `<workspace>/skillbox.toml`, or the defaults when there is none.
    pub fn load(workspace: &Path) -> Result<Self, ConfigError> {
        let path = workspace.join(CONFIG_FILE);
        if !path.exists() {
            return Ok(Self::default());
        }
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        let config: Self = toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.clone(),
            source,
        })?;
        config.check_ranges(&path)?;
        if let Some(problem) = config.deps.problems().into_iter().next() {
            return Err(ConfigError::BadDeps { path, problem });
        }
        for (skill, grant) in &config.grants {
            let problems = grant.problems();
            if !problems.is_empty() {
                return Err(ConfigError::BadGrant {
                    path,
                    skill: skill.clone(),
                    problems: problems.join("; "),
                });
            }
        }
        Ok(config)
    }

    /// Refuses limits that would make the gateway, the executors or the supervisor
    /// misbehave (a zero interval spins, a negative CPU share is an engine error at the
    /// first call, a zero timeout or connection cap serves nobody).
    fn check_ranges(&self, path: &Path) -> Result<(), ConfigError> {
        let ranges = [
            self.egress.ranges(),
            self.gateway.ranges(),
            self.executor.ranges(),
            self.docker.ranges(),
            self.exec.ranges(),
        ]
        .concat();
        match ranges
            .into_iter()
            .find(|(_, v, lo, hi)| !(*v >= *lo && *v <= *hi))
        {
            None => Ok(()),
            Some((key, value, lo, hi)) => Err(ConfigError::OutOfRange {
                path: path.to_path_buf(),
                key,
                value: value.to_string(),
                range: format!("{lo}..={hi}"),
            }),
        }
    }
}

#[cfg(test)]
mod tests;
