//! What to launch, decided from the typed request alone: a [`Plan`] per job. No file is
//! touched here but the skill folder's listing (a context call's relative skill paths are
//! made absolute), so each rule a plan carries (the environment, the network, the limits)
//! is decided in one place and testable without a sandbox.

use std::path::{Path, PathBuf};

use skillbox_protocol::methods::{DepsBuildParams, ToolExecuteParams};
use skillbox_protocol::session::SessionExecParams;
use skillbox_protocol::skill::network::NetworkPattern;
use skillbox_protocol::skill::{Skill, Tool, ToolProtocol};
use skillbox_protocol::workdir::FileList;

use super::argv::{absolutize_skill_paths, launch_argv};
use super::env;
use crate::broker::CallInfo;
use crate::sandbox::limits::{DEFAULT_MAX_FILE_MB, DEPS_MAX_FILE_MB};
use crate::sandbox::ChildStdio;

/// Whether a process gets a network of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// None: no socket can be made.
    None,
    /// A namespace whose only way out is the core's egress proxy, where the executor can
    /// make one; elsewhere the process runs with no network (docs/sandbox.md).
    IfAvailable,
    /// A namespace, or the launch is refused naming this job (a dependency build reaches
    /// its index only so).
    Required(&'static str),
    /// A namespace with nothing but its loopback (no proxy, no way out), where the
    /// process's programs may listen and connect: a skill without network that asks for
    /// one (`execution.loopback`). Refused where no namespace can be made.
    Loopback,
}

/// A context's files, laid out in the work folder before the spawn.
#[derive(Debug, Clone)]
pub struct Work {
    /// The working directory inside the work folder (plain names; empty for the folder).
    pub sub: PathBuf,
    /// The context's files, shared with the request.
    pub files: std::sync::Arc<FileList>,
    /// The context, when the core named it: its folder may be kept between calls
    /// ([`crate::workdir::shelf`]).
    pub context_id: Option<String>,
}

/// One process to launch.
#[derive(Debug)]
pub struct Plan {
    /// Who the process acts for: call id, skill, tool and capability token.
    pub call: CallInfo,
    /// The skill folder (read-only); `None` for a session outside any skill and a build.
    pub skill_dir: Option<PathBuf>,
    /// The command.
    pub argv: Vec<String>,
    /// The per-call variables (`env.rs`), before the sandbox's base set.
    pub env: Vec<(String, String)>,
    /// Its network.
    pub network: Network,
    /// UNIX sockets, with a `/tmp` of the call's own ([`crate::sandbox::mntns`]): the
    /// skill's `execution.unix_sockets` or the operator's grant. Such a call has a
    /// namespace of its own (a loopback at least), so abstract sockets are its own too.
    pub unix_sockets: bool,
    /// The ports its skill's hosts name (declared, bound secrets', granted): the
    /// namespace of a network call takes connections made to them without the proxy too.
    pub ports: Vec<u16>,
    /// The skill's built dependencies.
    pub deps: Option<PathBuf>,
    /// Memory limit of its processes.
    pub memory_mb: u64,
    /// Largest file its programs may write, in MiB.
    pub max_file_mb: u64,
    /// Wall-clock limit (sets the CPU-time limit too).
    pub timeout_ms: u64,
    /// A `plain` tool's arguments, written to its arguments file.
    pub args: Option<String>,
    /// Pipes, one merged pipe, or a terminal.
    pub stdio: ChildStdio,
    /// Certificates the process's TLS clients trust beyond the system roots.
    pub trust_pem: Option<String>,
    /// A call in a context: its files and working directory.
    pub work: Option<Work>,
    /// Files written into the scratch folder before the spawn (name, bytes).
    pub scratch_files: Vec<(String, Vec<u8>)>,
}

/// Whether `skill`'s processes get a network: it declares hosts, or the operator granted
/// it some (a namespace behind the egress proxy, whose loopback is the call's own too);
/// else a loopback of their own when the skill asks for one. The core judges the hosts;
/// here only the namespace is decided.
fn skill_network(skill: Option<&Skill>, granted: &[String], unix_sockets: bool) -> Network {
    if skill.is_some_and(|s| s.permissions.is_network()) || !granted.is_empty() {
        Network::IfAvailable
    } else if unix_sockets || skill.is_some_and(|s| s.execution.loopback) {
        Network::Loopback
    } else {
        Network::None
    }
}

/// Whether `skill`'s programs get UNIX sockets: it declares them, or the operator grants.
fn unix_sockets(skill: Option<&Skill>, envelope: &skillbox_protocol::envelope::Envelope) -> bool {
    skill.is_some_and(|s| s.execution.unix_sockets || envelope.granted_unix_sockets)
}

/// The ports of the hosts `skill` may reach (its own patterns and the operator's grants);
/// an invalid pattern names none (the core refuses it anyway).
fn host_ports(skill: Option<&Skill>, granted: &[String]) -> Vec<u16> {
    let own = skill.map(|s| s.permissions.reachable()).unwrap_or_default();
    let mut ports: Vec<u16> = (own.iter().chain(granted))
        .filter_map(|p| NetworkPattern::parse(p).ok())
        .map(|p| p.port())
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// The largest file `skill`'s programs may write: the operator's grant, else what the
/// skill declares (`execution.max_file_mb`, 1024 MiB by default).
pub fn max_file_mb(skill: &Skill, granted: Option<u64>) -> u64 {
    granted.unwrap_or(skill.execution.max_file_mb)
}

impl Plan {
    /// A tool call of `tool` (declared, or a `run_skill_script` tool) of `skill`; `deps`
    /// its built environment; `node_runner` the JavaScript runner of this executor.
    pub fn tool(
        p: &ToolExecuteParams,
        skill: &Skill,
        tool: &Tool,
        node_runner: &Path,
        deps: Option<PathBuf>,
    ) -> Self {
        let is_script = p.script.is_some();
        let mut argv = launch_argv(node_runner, skill, tool);
        if p.workdir.is_some() {
            absolutize_skill_paths(&mut argv, &skill.dir);
        }
        let mut vars = env::skill_env(skill, &tool.name, &p.call_id);
        vars.extend(env::declared_values(
            skill,
            &p.envelope.granted_env,
            &p.envelope.env,
        ));
        Self {
            call: CallInfo {
                call_id: p.call_id.clone(),
                skill: skill.name.clone(),
                tool: tool.name.clone(),
                capability_token: p.capability_token.clone(),
            },
            skill_dir: Some(skill.dir.clone()),
            argv,
            env: vars,
            network: skill_network(
                Some(skill),
                &p.envelope.granted_network,
                unix_sockets(Some(skill), &p.envelope),
            ),
            unix_sockets: unix_sockets(Some(skill), &p.envelope),
            ports: host_ports(Some(skill), &p.envelope.granted_network),
            deps,
            memory_mb: skill.execution.memory_mb,
            max_file_mb: max_file_mb(skill, p.envelope.granted_max_file_mb),
            timeout_ms: skill.timeout_ms(tool),
            // Arguments on stdin and in a file, never in the environment (whose strings
            // the kernel caps at 128 KiB); a script gets none.
            args: (tool.protocol == ToolProtocol::Plain && !is_script).then(|| p.args.to_string()),
            stdio: ChildStdio::Piped,
            trust_pem: p.envelope.trust_pem.clone(),
            work: p.workdir.as_ref().map(|w| Work {
                sub: PathBuf::new(),
                files: w.files.clone(),
                context_id: w.context_id.clone(),
            }),
            scratch_files: Vec::new(),
        }
    }

    /// A command session running `argv` in the context's folder `sub`, under `skill`'s
    /// envelope or none.
    pub fn session(
        p: &SessionExecParams,
        skill: Option<&Skill>,
        argv: Vec<String>,
        sub: PathBuf,
        stdio: ChildStdio,
        deps: Option<PathBuf>,
    ) -> Self {
        let mut vars = match skill {
            Some(skill) => {
                let mut vars = env::skill_env(skill, "exec_command", &p.call_id);
                vars.extend(env::declared_values(
                    skill,
                    &p.envelope.granted_env,
                    &p.envelope.env,
                ));
                vars
            }
            None => vec![("SKILLBOX_CALL_ID".to_string(), p.call_id.clone())],
        };
        if matches!(stdio, ChildStdio::Terminal(_)) {
            vars.push(("TERM".into(), "xterm".into()));
        }
        Self {
            call: CallInfo {
                call_id: p.call_id.clone(),
                skill: p.skill.clone().unwrap_or_default(),
                tool: "exec_command".into(),
                capability_token: p.capability_token.clone(),
            },
            skill_dir: skill.map(|s| s.dir.clone()),
            argv,
            env: vars,
            network: skill_network(
                skill,
                &p.envelope.granted_network,
                unix_sockets(skill, &p.envelope),
            ),
            unix_sockets: unix_sockets(skill, &p.envelope),
            ports: host_ports(skill, &p.envelope.granted_network),
            deps,
            memory_mb: p.limits.memory_mb,
            max_file_mb: match skill {
                Some(skill) => max_file_mb(skill, p.envelope.granted_max_file_mb),
                None => DEFAULT_MAX_FILE_MB,
            },
            timeout_ms: p.limits.lifetime_ms,
            args: None,
            stdio,
            trust_pem: p.envelope.trust_pem.clone(),
            work: Some(Work {
                sub,
                files: p.files.files.clone(),
                context_id: p.files.context_id.clone(),
            }),
            scratch_files: Vec::new(),
        }
    }

    /// A dependency build running pip as `argv` on the requirements of `p`: no skill
    /// folder, no value from the core, its index reached through a namespace only.
    pub fn deps_build(p: &DepsBuildParams, argv: Vec<String>) -> Self {
        let files = vec![
            (
                "requirements.txt".into(),
                p.requirements.join("\n").into_bytes(),
            ),
            // Empty when the operator pins nothing: pip then takes no pin from it.
            (
                "constraints.txt".into(),
                p.constraints.join("\n").into_bytes(),
            ),
        ];
        Self::installer(p, argv, env::installer_env(), files)
    }

    /// The Node part of the build `p`: npm run as `argv` with its environment `vars` on
    /// the `files` it starts from, under the same rules as pip.
    pub fn node_build(
        p: &DepsBuildParams,
        argv: Vec<String>,
        vars: Vec<(String, String)>,
        files: Vec<(String, Vec<u8>)>,
    ) -> Self {
        Self::installer(p, argv, vars, files)
    }

    /// One installer of the build `p`.
    fn installer(
        p: &DepsBuildParams,
        argv: Vec<String>,
        vars: Vec<(String, String)>,
        files: Vec<(String, Vec<u8>)>,
    ) -> Self {
        Self {
            call: CallInfo {
                call_id: p.call_id.clone(),
                skill: p.skill.clone(),
                tool: "deps.build".into(),
                capability_token: p.capability_token.clone(),
            },
            skill_dir: None,
            argv,
            env: vars,
            network: Network::Required("a dependency build"),
            unix_sockets: false,
            // The installer honours the proxy variables.
            ports: Vec::new(),
            deps: None,
            memory_mb: p.memory_mb,
            max_file_mb: DEPS_MAX_FILE_MB,
            timeout_ms: p.timeout_ms,
            args: None,
            stdio: ChildStdio::Merged,
            trust_pem: p.trust_pem.clone(),
            work: None,
            scratch_files: files,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use skillbox_protocol::skill::{discover, DiscoveryOptions};

    use super::*;

    /// A skill declaring `DECLARED` and one host, in a temporary folder.
    fn skill() -> (Skill, tempfile::TempDir) {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("netty");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("skill.yaml"),
            "name: netty\nversion: 0.1.0\ndescription: Reaches the network\npermissions:\n  \
             env: [DECLARED]\n  network: [api.test]\ntools:\n  - name: go\n    description: \
             Goes\n    command: [\"sh\", \"go.sh\"]\n    security: read\n",
        )
        .unwrap();
        let mut catalog = discover(&[root.path().to_path_buf()], DiscoveryOptions::default());
        assert_eq!(catalog.skills.len(), 1, "{:?}", catalog.skipped);
        (catalog.skills.remove(0), root)
    }

    /// What the core sends: a declared name, and one the skill never declared.
    fn supplied() -> serde_json::Value {
        json!({"DECLARED": "yes", "SMUGGLED": "no"})
    }

    fn names(plan: &Plan) -> Vec<&str> {
        plan.env.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn every_launcher_plans_the_same_envelope_from_one_rule() {
        let (skill, _root) = skill();
        let tool_params: ToolExecuteParams = serde_json::from_value(json!({
            "call_id": "c1", "capability_token": "t", "skill": "netty", "tool": "go",
            "args": {}, "envelope": {"env": supplied()},
        }))
        .unwrap();
        let session_params: SessionExecParams = serde_json::from_value(json!({
            "session_id": "s1", "call_id": "c2", "capability_token": "t", "skill": "netty",
            "cmd": "env", "files": {"files": [], "max_file_bytes": 1, "max_total_bytes": 1,
            "max_files": 1}, "envelope": {"env": supplied()}, "yield_ms": 10, "max_output_bytes": 10,
            "limits": {"idle_timeout_ms": 1, "lifetime_ms": 1, "output_kept_bytes": 1,
            "memory_mb": 64},
        }))
        .unwrap();
        let tool = skill.tool("go").unwrap();
        let plans = [
            Plan::tool(&tool_params, &skill, tool, Path::new("/runner"), None),
            Plan::session(
                &session_params,
                Some(&skill),
                vec!["env".into()],
                PathBuf::new(),
                ChildStdio::Merged,
                None,
            ),
        ];
        for plan in &plans {
            let names = names(plan);
            assert!(names.contains(&"DECLARED"), "{names:?}");
            assert!(
                !names.contains(&"SMUGGLED"),
                "an undeclared name passed: {names:?}"
            );
            assert_eq!(plan.network, Network::IfAvailable, "{:?}", plan.call);
            assert_eq!(plan.call.skill, "netty");
        }
        // The same session outside any skill: no value, no network, no skill folder.
        let mut bare = session_params.clone();
        bare.skill = None;
        let plan = Plan::session(
            &bare,
            None,
            vec!["env".into()],
            PathBuf::new(),
            ChildStdio::Merged,
            None,
        );
        assert_eq!(names(&plan), ["SKILLBOX_CALL_ID"]);
        assert_eq!((plan.network, plan.skill_dir), (Network::None, None));
        // A build gets the installer's names only, and a namespace or nothing.
        let build: DepsBuildParams = serde_json::from_value(json!({
            "call_id": "c3", "capability_token": "t", "skill": "netty", "digest": "d",
            "requirements": ["six==1.16.0"], "index_url": "https://pypi.test/simple/",
            "allow_source": false, "no_deps": false, "timeout_ms": 1, "memory_mb": 64,
        }))
        .unwrap();
        let plan = Plan::deps_build(&build, vec!["python3".into()]);
        assert!(
            names(&plan).iter().all(|n| n.starts_with("PIP_")),
            "{:?}",
            names(&plan)
        );
        assert_eq!(plan.network, Network::Required("a dependency build"));
        assert_eq!(plan.scratch_files[0].0, "requirements.txt");
        assert_eq!(plan.max_file_mb, DEPS_MAX_FILE_MB);
    }

    #[test]
    fn a_skill_asking_for_a_loopback_gets_one_and_a_network_skill_has_one_always() {
        let (mut skill, _root) = skill();
        assert_eq!(
            skill_network(Some(&skill), &[], false),
            Network::IfAvailable
        );
        skill.execution.loopback = true;
        assert_eq!(
            skill_network(Some(&skill), &[], false),
            Network::IfAvailable
        );
        skill.permissions.network.clear();
        assert_eq!(skill_network(Some(&skill), &[], false), Network::Loopback);
        assert_eq!(
            skill_network(Some(&skill), &["api.test".into()], false),
            Network::IfAvailable
        );
        skill.execution.loopback = false;
        assert_eq!(skill_network(Some(&skill), &[], false), Network::None);
        assert_eq!(skill_network(None, &[], false), Network::None);
        // UNIX sockets come with a namespace of the call's own: its abstract sockets too.
        assert_eq!(skill_network(Some(&skill), &[], true), Network::Loopback);
    }

    #[test]
    fn unix_sockets_are_the_skills_or_the_operators_and_never_a_sessions_without_skill() {
        let (mut skill, _root) = skill();
        let mut envelope = skillbox_protocol::envelope::Envelope::default();
        assert!(!unix_sockets(Some(&skill), &envelope));
        envelope.granted_unix_sockets = true;
        assert!(unix_sockets(Some(&skill), &envelope));
        assert!(!unix_sockets(None, &envelope));
        envelope.granted_unix_sockets = false;
        skill.execution.unix_sockets = true;
        assert!(unix_sockets(Some(&skill), &envelope));
    }

    #[test]
    fn the_operators_max_file_mb_replaces_the_skills_and_the_default_fits_media() {
        let (skill, _root) = skill();
        assert_eq!(max_file_mb(&skill, None), DEFAULT_MAX_FILE_MB);
        assert_eq!(max_file_mb(&skill, Some(8)), 8);
        assert_eq!(max_file_mb(&skill, Some(65_536)), 65_536);
        let params: ToolExecuteParams = serde_json::from_value(json!({
            "call_id": "c1", "capability_token": "t", "skill": "netty", "tool": "go",
            "args": {}, "envelope": {"granted_max_file_mb": 4096},
        }))
        .unwrap();
        let tool = skill.tool("go").unwrap();
        let plan = Plan::tool(&params, &skill, tool, Path::new("/runner"), None);
        assert_eq!(plan.max_file_mb, 4096);
    }
}
