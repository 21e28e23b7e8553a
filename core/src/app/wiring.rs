//! The steps of [`App::build`], each making one group of parts from those made before:
//! the channel's callback side (the callbacks, the egress proxy and their listener), the
//! parts of the core (pipeline, dependency builder, per-call containers, availability),
//! and the executors' start (the child of `up`, the containers' supervisor, the first
//! health answer and the health rounds).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use skillbox_channel::server::{self, ReloadingServerConfig, ServerOptions};
use skillbox_channel::stream::StreamHandler;

use super::channel_streams::ChannelStreams;
use skillbox_channel::TlsFiles;
use skillbox_channel::EXECUTOR_IDENTITY;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::egress_follow::FollowedEgress;
use super::executor_child::{executor_binary, supervise, ExecutorSpec};
use super::{wait_healthy, AppError, AppOptions};
use crate::approvals::Approvals;
use crate::calls::callbacks::Callbacks;
use crate::calls::transport::Containers;
use crate::calls::{
    Dispatcher, DispatcherParts, ExecutorTransport, InFlight, LoadCell, Transports,
};
use crate::contexts::files::ContextFiles;
use crate::deps::DepsBuilder;
use crate::executors::availability::SkillAvailability;
use crate::executors::docker::oneoff::ContainerRunner;
use crate::executors::docker::supervisor::Supervisor;
use crate::executors::docker::Engine;
use crate::executors::ExecutorPool;
use crate::gateway::CoreParts;
use crate::observe::log::LogFormat;
use crate::observe::Metrics;
use crate::proxy::egress::{DepsCache, EgressCalls, EgressTrust};
use crate::proxy::fetch::FetchProxy;
use crate::proxy::readfile::ReadFileProxy;
use crate::proxy::roots::{resolve_path, ExtraRoots};
use crate::proxy::sign::Signer;
use crate::state::config::Config;
use crate::state::deps::DepsRecords;
use crate::state::secrets::Secrets;
use crate::state::store::Store;
use crate::state::{pki, Workspace};

/// What every step reads: the options, the workspace, its configuration and state folder,
/// and the parts made first.
pub(super) struct Base<'a> {
    pub(super) options: &'a AppOptions,
    pub(super) ws: &'a Workspace,
    pub(super) config: &'a Config,
    pub(super) state_dir: &'a PathBuf,
    pub(super) store: &'a Store,
    pub(super) approvals: &'a Arc<Approvals>,
    pub(super) metrics: &'a Arc<Metrics>,
    pub(super) executor: &'a Arc<ExecutorPool>,
}

/// The callback side of the channel: the calls in flight the callbacks and the egress
/// proxy judge by, the egress CA and the callbacks.
pub(super) struct CallbackSide {
    in_flight: Arc<InFlight>,
    egress_trust: Arc<EgressTrust>,
    callbacks: Arc<Callbacks>,
    egress: Arc<FollowedEgress>,
}

/// Serves the executors' callbacks and their programs' connections (`POST /egress`) on
/// `callback_listener`, with the core's identity `core_files`: that side, and the
/// listener's task.
pub(super) fn serve_callbacks(
    base: &Base<'_>,
    core_files: TlsFiles,
    callback_listener: TcpListener,
) -> Result<(CallbackSide, JoinHandle<()>), AppError> {
    let (config, ws, state_dir) = (base.config, base.ws, base.state_dir);
    let (approvals, metrics) = (base.approvals, base.metrics);
    let in_flight = Arc::new(InFlight::default());
    let extra_roots = ExtraRoots::read(
        &(config.egress.extra_roots.iter())
            .map(|p| resolve_path(ws.root(), p))
            .collect::<Vec<_>>(),
    )
    .map_err(|e| AppError::Egress(e.to_string()))?;
    let egress_trust = Arc::new(
        EgressTrust::open(state_dir, extra_roots.clone())
            .map_err(|e| AppError::Egress(e.to_string()))?,
    );
    let callbacks = Arc::new(Callbacks::new(
        Arc::clone(&in_flight),
        Arc::clone(approvals),
        FetchProxy::new(config.fetch.clone())
            .with_resolve(&config.egress.resolve)
            .with_extra_roots(&extra_roots)
            .with_secrets_in_body(config.egress.secrets_in_body)
            .with_metrics(Arc::clone(metrics)),
        ReadFileProxy::new(ws.root().to_path_buf(), config.read_file.max_bytes),
        Signer::open(ws.keys_dir())?,
    ));
    // The executor's programs reach the network through the callback listener too
    // (`POST /egress`), under the calls' identities.
    let egress = Arc::new(FollowedEgress::new(
        Arc::clone(&in_flight) as Arc<dyn EgressCalls>,
        Arc::clone(&egress_trust),
        DepsCache::open(state_dir, config.deps.cache_bytes()),
        (config.egress.clone(), config.fetch.allow_private.clone()),
    ));
    let tls = Arc::new(ReloadingServerConfig::new(core_files)?);
    let task = tokio::spawn(server::serve_with_streams(
        callback_listener,
        tls,
        ServerOptions {
            expected_peer: EXECUTOR_IDENTITY.to_string(),
            max_body_bytes: skillbox_protocol::jsonrpc::MAX_MESSAGE_BYTES,
        },
        Arc::clone(&callbacks) as Arc<dyn server::RpcHandler>,
        Some(Arc::new(ChannelStreams {
            egress: Arc::clone(&egress),
            in_flight: Arc::clone(&in_flight),
        }) as Arc<dyn StreamHandler>),
    ));
    let side = CallbackSide {
        in_flight,
        egress_trust,
        callbacks,
        egress,
    };
    Ok((side, task))
}

/// The parts of the core over the skills of `load`: per-call containers when `engine`
/// runs, availability, the contexts' files, the dependency builder (started on what the
/// load misses and on each executor's arrival) and the pipeline.
pub(super) async fn core_parts(
    base: &Base<'_>,
    engine: &Option<Engine>,
    load: Arc<LoadCell>,
    side: CallbackSide,
) -> Result<CoreParts, AppError> {
    let (config, ws, state_dir, store) = (base.config, base.ws, base.state_dir, base.store);
    let (approvals, metrics, executor) = (base.approvals, base.metrics, base.executor);
    let CallbackSide {
        in_flight,
        egress_trust,
        callbacks,
        egress,
    } = side;
    egress.follow(Arc::clone(&load));
    let containers = match &engine {
        Some(engine) => {
            let runner = Arc::new(ContainerRunner::new(
                engine.clone(),
                &ws.skills_dir(),
                state_dir,
                &config.docker,
                Arc::clone(&callbacks) as Arc<dyn server::RpcHandler>,
            ));
            runner.sweep().await;
            Some(Arc::new(Containers(runner)) as Arc<dyn ExecutorTransport>)
        }
        None => None,
    };
    let secrets = Secrets::load(state_dir).map_err(|source| AppError::Secrets {
        path: state_dir.clone(),
        source,
    })?;
    let availability = SkillAvailability::new(Arc::clone(executor), secrets)
        .with_deps(Arc::new(DepsRecords::open(state_dir)));
    let files = ContextFiles::new(state_dir, store.clone(), config.files.clone());
    let container_sandbox = containers.is_some();
    let deps = Arc::new(
        DepsBuilder::new(
            Arc::clone(&load),
            availability.deps().cloned(),
            Arc::clone(executor),
            Arc::clone(&in_flight),
        )
        .with_egress_trust(Arc::clone(&egress_trust)),
    );
    let pipeline = Arc::new(
        Dispatcher::new(DispatcherParts {
            load: Arc::clone(&load),
            availability: availability.clone(),
            transports: Transports::new(Arc::clone(executor), containers),
            approvals: Arc::clone(approvals),
            store: store.clone(),
            in_flight,
            call_timeout: Duration::from_millis(config.executor.call_timeout_ms),
            metrics: Arc::clone(metrics),
            files: files.clone(),
        })
        .with_egress_trust(egress_trust),
    );
    callbacks.set_dispatcher(&pipeline);
    deps.build_missing();
    deps.rebuild_on_arrival();
    Ok(CoreParts {
        pipeline,
        load,
        store: store.clone(),
        approvals: Arc::clone(approvals),
        metrics: Arc::clone(metrics),
        executors: Arc::clone(executor),
        availability,
        container_sandbox,
        files,
        deps,
    })
}

/// Starts the executors' side: the containers' supervisor (when `engine` runs and the
/// core supervises), the executor child of `up`, waits for a first health answer, and
/// pushes the health rounds on `background`; the child reaches the executor URL and the
/// core's callback URL given. The supervisor and the child.
pub(super) async fn start_executors(
    base: &Base<'_>,
    roots: &[PathBuf],
    (executor_url, callback_url): (&str, &str),
    engine: Option<Engine>,
    background: &mut Vec<JoinHandle<()>>,
) -> Result<(Option<Arc<Supervisor>>, Option<JoinHandle<()>>), AppError> {
    let (config, ws, options, executor) = (base.config, base.ws, base.options, base.executor);
    let supervisor = match engine {
        Some(engine) if config.docker.supervise && !options.embedded => {
            let s = Supervisor::new(engine, Arc::clone(executor), &config.docker);
            if s.is_none() {
                tracing::info!("the core is not in a compose project and [docker] project is empty: no executor supervision");
            }
            s.map(Arc::new)
        }
        _ => None,
    };
    let child = match options.embedded {
        true => {
            let spec = ExecutorSpec {
                binary: executor_binary(&config.executor.binary)?,
                skills: roots.to_vec(),
                listen: executor_url.trim_start_matches("https://").to_string(),
                pki: ws.pki_dir(),
                core_url: callback_url.to_string(),
                max_concurrent: config.executor.max_concurrent,
                scratch_tmpfs_mb: config.executor.scratch_tmpfs_mb,
                blob_cache_mb: config.executor.blob_cache_mb,
                insecure: options.insecure_no_sandbox,
                log_json: config.log.format == LogFormat::Json,
            };
            Some(tokio::spawn(supervise(spec)))
        }
        false => None,
    };
    // Before the wait: an executor container that was killed is started by the
    // supervisor, not waited for.
    if let Some(s) = &supervisor {
        background.push(tokio::spawn(Arc::clone(s).run()));
    }
    wait_healthy(executor).await?;
    background.push(tokio::spawn(Arc::clone(executor).monitor(
        Duration::from_millis(config.executor.health_interval_ms.max(100)),
    )));
    Ok((supervisor, child))
}

/// The core's identity on the channel (its certificate and key, from the state folder or
/// `[executor] pki_dir`), after exporting the executor's when `[executor] pki_export`
/// asks; a `pki_dir` is refused for `up` and beside an export.
pub(super) fn core_identity(
    state_dir: &Path,
    config: &Config,
    embedded: bool,
) -> Result<TlsFiles, AppError> {
    let pki_export = !config.executor.pki_export.is_empty();
    if !config.executor.pki_dir.is_empty() && (embedded || pki_export) {
        return Err(AppError::PkiDirConflict);
    }
    let core_files = pki::configured_core_files(state_dir, &config.executor.pki_dir)?;
    if pki_export {
        pki::export_executor(state_dir, Path::new(&config.executor.pki_export))?;
    }
    Ok(core_files)
}

/// The gateway's listener on `listen`, its address written to the state folder of `ws`
/// for the CLI.
pub(super) async fn bind_gateway(
    listen: &str,
    ws: &Workspace,
) -> Result<(TcpListener, SocketAddr), AppError> {
    let bind = |source| AppError::Bind {
        what: "gateway",
        addr: listen.to_string(),
        hint: "pass --listen ADDR",
        source,
    };
    let listener = crate::gateway::web::server::bind(listen)
        .await
        .map_err(bind)?;
    let addr = listener.local_addr().map_err(bind)?;
    ws.write_gateway_addr(&addr.to_string())?;
    Ok((listener, addr))
}
