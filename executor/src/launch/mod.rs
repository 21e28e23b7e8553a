//! One launch for every process the executor starts for the core (docs/architecture.md,
//! "Inside the executor"). A tool call (`call.rs`), a command session (`session/`) and a
//! dependency build (`deps.rs`) are three [`Plan`]s, pure values made from the typed
//! request (`plan.rs`, the environment from `env.rs`), run through the one [`launch`]:
//!
//! 1. the network: a namespace of its own (and the listener of its proxy port for a
//!    network call) when the plan asks for one ([`Network`]);
//! 2. the sandbox prepared ([`Sandbox::prepare`]);
//! 3. the plan's scratch files written, owned by the call's user;
//! 4. the context's files laid out in the work folder ([`workdir::lay_out`]);
//! 5. the process spawned with the plan's stdio.
//!
//! A failure past step 2 ends what was made (the call's user id and scratch) before it is
//! returned. What comes back, [`Launched`], is conversed with in each job's own way (a
//! tool's jsonrpc or plain stdio, a session's pipe or terminal, an installer's log) while
//! [`relay_while`] carries the process's network connections to the core.

mod argv;
mod env;
mod plan;

use std::future::Future;
use std::path::PathBuf;

use crate::broker::{CallInfo, CapabilityBroker};
use crate::egress;
use crate::sandbox::netns::Proxy;
use crate::sandbox::{self, CallGuard, LaunchSpec, PreparedCall, Sandbox, SandboxChild};
use crate::workdir::{self, Baseline};

pub use argv::{absolutize_skill_paths, launch_argv};
pub use env::{may_receive, skill_env};
pub use plan::{Network, Plan, Work};

/// Why a plan could not be launched.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The sandbox could not be prepared (a busy pool, a missing program, ...).
    #[error(transparent)]
    Sandbox(#[from] sandbox::SandboxError),
    /// The plan needs a network namespace and this executor cannot make one.
    #[error(
        "this executor cannot make network namespaces, and {0} needs one \
         (docs/sandbox.md, \"Network calls\")"
    )]
    NoNamespace(&'static str),
    /// The proxy port of the namespace could not be served.
    #[error("cannot serve the call's proxy port: {0}")]
    ProxyPort(std::io::Error),
    /// A scratch file of the plan could not be written.
    #[error("writing {name} into the call's scratch folder failed: {source}")]
    Scratch {
        /// The file.
        name: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The context's files could not be laid out.
    #[error(transparent)]
    Layout(#[from] workdir::WorkDirError),
    /// The working directory asked for is not a folder of the context.
    #[error("workdir {0:?} is not a folder of the context")]
    NotAFolder(PathBuf),
    /// The process could not start.
    #[error("{0}")]
    Spawn(std::io::Error),
}

/// How a refused loopback call names its job ([`LaunchError::NoNamespace`]).
const LOOPBACK_JOB: &str = "a skill that asks for a loopback of its own (execution.loopback) or for UNIX sockets (execution.unix_sockets)";

/// A process started from a plan, and what its job needs to converse with it and end it.
#[derive(Debug)]
pub struct Launched {
    /// The process.
    pub child: SandboxChild,
    /// What ends the call (its user id, its scratch folder).
    pub guard: CallGuard,
    /// The listeners of its namespace (the proxy port, the ports taken without the proxy,
    /// the name server), for [`relay_while`]; `None` without network.
    pub listener: Option<egress::Listeners>,
    /// The context's files as laid out, for the sync back; `None` outside a context.
    pub baseline: Option<Baseline>,
    /// The work folder (`<scratch>/work`) of a call in a context.
    pub work: Option<PathBuf>,
}

/// Launches `plan` (see the module docs).
pub async fn launch<B: CapabilityBroker>(
    sandbox: &Sandbox,
    broker: &B,
    plan: Plan,
) -> Result<Launched, LaunchError> {
    let (namespace, listener) = match plan.network {
        Network::None => (None, None),
        wanted => {
            let proxy = match wanted {
                Network::Loopback => Proxy::None,
                _ => Proxy::Egress,
            };
            match sandbox.call_network(proxy, &plan.ports).await? {
                Some(net) => {
                    let listeners =
                        egress::Listeners::from_std(net.listener, net.transparent, net.resolver)
                            .map_err(LaunchError::ProxyPort)?;
                    (Some((net.namespace, proxy)), listeners)
                }
                None => match wanted {
                    Network::Required(what) => return Err(LaunchError::NoNamespace(what)),
                    Network::Loopback => return Err(LaunchError::NoNamespace(LOOPBACK_JOB)),
                    // The process runs with no network at all (no socket can be made).
                    _ => (None, None),
                },
            }
        }
    };
    // A context's next call runs as the user its kept folder belongs to, when free.
    let kept_uid = (plan.work.as_ref())
        .and_then(|w| w.context_id.as_deref())
        .and_then(|c| workdir::WorkShelf::of(sandbox.blobs())?.uid_of(c));
    let spec = LaunchSpec {
        deps: plan.deps.as_deref(),
        skill_dir: plan.skill_dir.as_deref(),
        work: plan.work.as_ref().map(|w| w.sub.as_path()),
        argv: &plan.argv,
        env: plan.env,
        memory_mb: plan.memory_mb,
        max_file_mb: plan.max_file_mb,
        timeout_ms: plan.timeout_ms,
        args_file: match &plan.args {
            Some(args) => sandbox::ArgsFile::Write(args.as_bytes()),
            None => sandbox::ArgsFile::None,
        },
        network: namespace,
        unix_sockets: plan.unix_sockets,
        trust_pem: plan.trust_pem.as_deref(),
    };
    let PreparedCall { launch, guard, .. } = sandbox.prepare_as(spec, kept_uid)?;
    let made = async {
        for (name, bytes) in &plan.scratch_files {
            let path = guard.scratch().join(name);
            sandbox::room::when_room(|| sandbox::scratch::write_owned(&path, bytes, guard.uid()))
                .map_err(|source| LaunchError::Scratch {
                name: name.clone(),
                source,
            })?;
        }
        let (work, baseline) = match &plan.work {
            Some(w) => {
                let (work, laid) = lay_out_work(sandbox, broker, &plan.call, &guard, w).await?;
                (Some(work), Some(laid))
            }
            None => (None, None),
        };
        let child = sandbox
            .spawn_async(launch.with_stdio(plan.stdio))
            .await
            .map_err(LaunchError::Spawn)?;
        Ok((child, work, baseline))
    };
    match made.await {
        Ok((child, work, baseline)) => Ok(Launched {
            child,
            guard,
            listener,
            baseline,
            work,
        }),
        Err(e) => {
            guard.finish(None);
            Err(e)
        }
    }
}

/// Lays the context's files out in the call's work folder: from the folder an earlier
/// call of the context left on this executor where there is one (kept only for calls with
/// a user of their own, whose end kills every process that could still write it), else
/// anew. Returns the folder and what was laid out.
async fn lay_out_work<B: CapabilityBroker>(
    sandbox: &Sandbox,
    broker: &B,
    call: &CallInfo,
    guard: &sandbox::CallGuard,
    w: &Work,
) -> Result<(PathBuf, workdir::Baseline), LaunchError> {
    let work = guard.scratch().join(sandbox::WORK_DIR);
    let blobs = sandbox.blobs();
    let kept = (w.context_id.as_deref())
        .filter(|_| guard.uid().is_some())
        .and_then(|c| workdir::WorkShelf::of(blobs)?.take(c));
    let from_kept = kept.is_some();
    let laid = workdir::lay_out(broker, call, blobs, &work, guard.uid(), &w.files, kept).await?;
    if from_kept {
        // The kept folder replaced the one the preparation made, with the working folder.
        let cwd = work.join(&w.sub);
        sandbox::scratch::make_owned_dirs(guard.scratch(), &cwd, guard.uid()).map_err(
            |source| workdir::WorkDirError::Write {
                path: w.sub.display().to_string(),
                source,
            },
        )?;
    }
    if !work.join(&w.sub).is_dir() {
        return Err(LaunchError::NotAFolder(w.sub.clone()));
    }
    Ok((work, laid))
}

/// Runs `job` while the connections of `listener` (a launched process's namespace) are
/// carried to the core for `call`; the relay ends with the job.
pub async fn relay_while<B: CapabilityBroker, F: Future>(
    listener: Option<egress::Listeners>,
    broker: &B,
    call: &CallInfo,
    job: F,
) -> F::Output {
    let relay = async {
        match listener {
            Some(listener) => egress::relay(listener, broker, call).await,
            None => std::future::pending::<std::convert::Infallible>().await,
        }
    };
    tokio::select! {
        out = job => out,
        never = relay => match never {},
    }
}
