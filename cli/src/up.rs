//! `skillbox up` (core + a local executor child) and `skillbox serve` (core alone, against
//! a configured executor URL): start the channel, the callback listener and the gateway;
//! supervise the executor; reload skills and trust on SIGHUP, when `<state>/trust/`
//! changes ([`skillbox_core::reload`]) or when the skills root changes ([`skillbox_core::reload::watch`]); shut
//! down cleanly on Ctrl-C or SIGTERM.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use skillbox_channel::server::{self, ReloadingServerConfig, ServerOptions};
use skillbox_channel::{CORE_IDENTITY, EXECUTOR_IDENTITY};
use skillbox_protocol::skill::{discover, DiscoveryOptions};
use tokio::net::TcpListener;

use skillbox_core::approvals::Approvals;
use skillbox_core::calls::callbacks::Callbacks;
use skillbox_core::calls::transport::Containers;
use skillbox_core::calls::{Dispatcher, DispatcherParts, ExecutorTransport, InFlight, Transports};
use skillbox_core::executors::docker::oneoff::ContainerRunner;
use skillbox_core::executors::docker::supervisor::Supervisor;
use skillbox_core::executors::ExecutorPool;
use skillbox_core::gateway::console::Console;
use skillbox_core::gateway::{self, Gateway};
use skillbox_core::observe::Metrics;
use skillbox_core::proxy::fetch::FetchProxy;
use skillbox_core::proxy::readfile::ReadFileProxy;
use skillbox_core::proxy::sign::Signer;
use skillbox_core::reload::{self, Reloader};
use skillbox_core::skills::install::{self, TrustPolicy};
use skillbox_core::skills::stamp::InstalledStamps;
use skillbox_core::state::config::Config;
use skillbox_core::state::secrets::Secrets;
use skillbox_core::state::store::Store;
use skillbox_core::state::{pki, Workspace};

/// How long `up` waits for the executor's first health answer.
pub const EXECUTOR_START_TIMEOUT: Duration = Duration::from_secs(30);

/// `skillbox up` / `skillbox serve` arguments.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// The workspace: skills in DIR/skills (and the `[skills] roots` of its config), state
    /// in DIR/.skillbox, config DIR/skillbox.toml. Default: examples/workspace when it
    /// exists, else the current folder.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Gateway address (overrides [gateway] listen).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Pass --insecure-no-sandbox to the executor (kernels without Landlock/seccomp). Unsafe.
    #[arg(long)]
    pub insecure_no_sandbox: bool,
}

/// Resolves the workspace folder.
pub fn workspace(arg: Option<&Path>) -> anyhow::Result<Workspace> {
    let dir = match arg {
        Some(d) => d.to_path_buf(),
        None if Path::new("examples/workspace").is_dir() => PathBuf::from("examples/workspace"),
        None => std::env::current_dir()?,
    };
    let root = dir.canonicalize().with_context(|| {
        format!(
            "workspace {} does not exist; pass --workspace DIR",
            dir.display()
        )
    })?;
    Ok(Workspace::new(root))
}

/// Runs the core; with `embedded`, also starts and supervises a local executor.
pub fn run(args: UpArgs, embedded: bool) -> anyhow::Result<u8> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run_async(args, embedded))
}

async fn run_async(args: UpArgs, embedded: bool) -> anyhow::Result<u8> {
    // First: SIGHUP (reload skills and trust) would otherwise end the process.
    let hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("installing the SIGHUP handler")?;
    let ws = workspace(args.workspace.as_deref())?;
    let state_dir = ws.ensure_state_dir()?;
    let config = Config::load(ws.root())?;
    let skills_root = ws.skills_dir();
    let roots = config.skills_roots(ws.root())?;
    if !config.executor.pki_dir.is_empty() && (embedded || !config.executor.pki_export.is_empty()) {
        anyhow::bail!(
            "[executor] pki_dir is for `skillbox serve` with executors that get their own files \
             (orchestrator secrets); `up` and [executor] pki_export need the PKI the core makes \
             in its state: remove pki_dir, or remove pki_export and use `skillbox serve`"
        );
    }
    let core_files = pki::configured_core_files(&state_dir, &config.executor.pki_dir)?;
    if !config.executor.pki_export.is_empty() {
        pki::export_executor(&state_dir, Path::new(&config.executor.pki_export))?;
    }
    let token = ws.ensure_token()?;

    let store = Store::open(&ws.db_file())?;
    let metrics = Arc::new(Metrics::new());
    let approvals = Arc::new(
        Approvals::new(store.clone(), config.approvals.clone()).with_metrics(Arc::clone(&metrics)),
    );
    let trust =
        TrustPolicy::for_workspace(&ws, config.trust.require_signed).with_roots(roots.clone());
    let policy = trust.clone();
    let (catalog, stamps) = tokio::task::spawn_blocking(move || {
        let mut catalog = discover(&policy.roots, DiscoveryOptions::default());
        // Stamped before hashing: a change while the files are hashed is seen too.
        let stamps = InstalledStamps::read(&catalog, &policy);
        install::verify::enforce(&mut catalog, &policy, std::time::SystemTime::now());
        (catalog, stamps)
    })
    .await?;
    for s in &catalog.skipped {
        tracing::warn!(dir = %s.dir.display(), reason = %s.reason(), "skill skipped");
    }
    for s in &catalog.shadowed {
        tracing::info!(skill = %s.name, kept = %s.kept.display(), hidden = %s.hidden.display(), "skill shadowed by a root of higher precedence");
    }

    // `up`'s internal listeners take free ports unless configured: two `up` on one machine
    // then differ only in their gateway address (`--listen`).
    let callback_listen = config.executor.callback_listen_for(embedded);
    let callback_listener = TcpListener::bind(callback_listen)
        .await
        .with_context(|| {
            format!(
                "binding the callback listener {callback_listen}; set [executor] callback_listen in skillbox.toml"
            )
        })?;
    let callback_url = if config.executor.callback_url.is_empty() {
        format!("https://{}", callback_listener.local_addr()?)
    } else {
        config.executor.callback_url.clone()
    };
    let executor_url = if embedded {
        format!("https://{}", free_addr(config.executor.executor_listen())?)
    } else if config.executor.url.is_empty() && config.executor.urls.is_empty() {
        anyhow::bail!("`skillbox serve` needs [executor] url in skillbox.toml (the executor's https://host:port)");
    } else {
        config.executor.url.clone()
    };
    let mut executor_urls = vec![executor_url.clone()];
    if !embedded {
        executor_urls.extend(config.executor.urls.iter().cloned());
        executor_urls.retain(|u| !u.is_empty());
    }
    let executor = Arc::new(ExecutorPool::new(&executor_urls, core_files.clone())?);
    let in_flight = Arc::new(InFlight::default());
    let callbacks = Arc::new(Callbacks::new(
        Arc::clone(&in_flight),
        Arc::clone(&approvals),
        FetchProxy::new(config.fetch.clone()).with_metrics(Arc::clone(&metrics)),
        ReadFileProxy::new(ws.root().to_path_buf(), config.read_file.max_bytes),
        Signer::open(ws.keys_dir())?,
    ));
    let tls = Arc::new(ReloadingServerConfig::new(core_files.clone())?);
    let callback_task = tokio::spawn(server::serve(
        callback_listener,
        tls,
        ServerOptions {
            expected_peer: EXECUTOR_IDENTITY.to_string(),
            max_body_bytes: skillbox_protocol::jsonrpc::MAX_MESSAGE_BYTES,
        },
        Arc::clone(&callbacks) as Arc<dyn server::RpcHandler>,
    ));
    let engine = skillbox_core::executors::docker::Engine::connect(&config.docker).await?;
    let mut containers: Option<Arc<dyn ExecutorTransport>> = None;
    if let Some(engine) = &engine {
        let runner = Arc::new(ContainerRunner::new(
            engine.clone(),
            &skills_root,
            &state_dir,
            &config.docker,
            Arc::clone(&callbacks) as Arc<dyn server::RpcHandler>,
        ));
        runner.sweep().await;
        containers = Some(Arc::new(Containers(runner)));
    }
    let dispatcher = Arc::new(
        Dispatcher::new(DispatcherParts {
            catalog,
            stamps,
            config: config.clone(),
            transports: Transports::new(Arc::clone(&executor), containers),
            secrets: Secrets::load(&state_dir)?,
            approvals,
            store: store.clone(),
            in_flight,
            call_timeout: Duration::from_millis(config.executor.call_timeout_ms),
        })
        .with_metrics(metrics),
    );
    let mut supervisor = None;
    if let Some(engine) = engine {
        if config.docker.supervise && !embedded {
            supervisor = Supervisor::new(engine, Arc::clone(dispatcher.executor()), &config.docker)
                .map(Arc::new);
            if supervisor.is_none() {
                tracing::info!("the core is not in a compose project and [docker] project is empty: no executor supervision");
            }
        }
    }

    let child_supervisor = if embedded {
        let spec = ExecutorSpec {
            binary: executor_binary(&config.executor.binary)?,
            skills: roots.clone(),
            listen: executor_url.trim_start_matches("https://").to_string(),
            pki: ws.pki_dir(),
            core_url: callback_url.clone(),
            max_concurrent: config.executor.max_concurrent,
            scratch_tmpfs_mb: config.executor.scratch_tmpfs_mb,
            insecure: args.insecure_no_sandbox,
            log_json: config.log.format == skillbox_core::observe::log::LogFormat::Json,
        };
        Some(tokio::spawn(supervise(spec)))
    } else {
        None
    };
    // Before the wait: an executor container that was killed is started by the
    // supervisor, not waited for.
    let supervisor_task = supervisor
        .as_ref()
        .map(|s| tokio::spawn(Arc::clone(s).run()));
    wait_healthy(&dispatcher).await?;
    let monitor_task = tokio::spawn(Arc::clone(dispatcher.executor()).monitor(
        Duration::from_millis(config.executor.health_interval_ms.max(100)),
    ));

    let listen = args.listen.unwrap_or(config.gateway.listen.clone());
    let gateway_listener = TcpListener::bind(&listen)
        .await
        .with_context(|| format!("binding the gateway {listen}; pass --listen ADDR"))?;
    let addr = gateway_listener.local_addr()?;
    ws.write_gateway_addr(&addr.to_string())?;
    println!("skillbox is up");
    println!("  gateway:   http://{addr}");
    println!("  token:     {}", ws.token_file().display());
    println!("  workspace: {}", ws.root().display());
    println!(
        "  skills:    {}",
        roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("  executor:  {}", dispatcher.executor().describe());
    let console = Console::new(&config.console);
    println!("  console:   http://{addr}/console/");
    match console.sign_in_path() {
        Ok(path) => println!(
            "  sign in:   http://{addr}{path}  (works once, for {} s)",
            config.console.link_seconds
        ),
        Err(e) => tracing::warn!(error = %e, "no one-time console sign-in link"),
    }
    let reloader = Arc::new(Reloader::new(Arc::clone(&dispatcher), trust.clone()));
    let hangup_task = tokio::spawn(reload::on_hangup(hangup, Arc::clone(&reloader)));
    let watch_task = tokio::spawn(reload::watch_trust(
        Arc::clone(&reloader),
        reload::TRUST_POLL_INTERVAL,
    ));
    let skills_watch_task = tokio::spawn(skillbox_core::reload::watch::watch_skills(Arc::clone(
        &reloader,
    )));
    let bots = Arc::new(skillbox_core::auth::BotTokens::load(store.clone())?);
    let gateway = Arc::new(Gateway {
        dispatcher,
        bots,
        token,
        token_file: ws.token_file(),
        max_request_bytes: config.gateway.max_request_bytes,
        server_limits: gateway::ServerLimits::from_config(&config.gateway),
        skills_root,
        trust,
        reloader,
        supervisor: supervisor.clone(),
        console,
        mcp_waiting: Default::default(),
    });
    let gateway_task = tokio::spawn(gateway::serve(gateway_listener, gateway));
    shutdown_signal().await;
    println!("skillbox: shutting down");
    hangup_task.abort();
    watch_task.abort();
    skills_watch_task.abort();
    gateway_task.abort();
    callback_task.abort();
    monitor_task.abort();
    // Calls are recorded off their path; write every finished one before exiting.
    store.flush_calls();
    if let Some(s) = supervisor_task {
        s.abort();
    }
    if let Some(s) = child_supervisor {
        s.abort();
        let _ = s.await;
    }
    Ok(0)
}

async fn wait_healthy(dispatcher: &Dispatcher) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + EXECUTOR_START_TIMEOUT;
    let pool = dispatcher.executor();
    loop {
        pool.refresh().await;
        if pool.health().is_some() {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            let why: Vec<String> = pool
                .status()
                .into_iter()
                .map(|s| format!("{}: {}", s.address, s.error.unwrap_or_default()))
                .collect();
            anyhow::bail!(
                "no executor at {} answered within {EXECUTOR_START_TIMEOUT:?} ({})",
                pool.describe(),
                if why.is_empty() {
                    "no address resolved".to_string()
                } else {
                    why.join("; ")
                }
            )
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `host:port` with a concrete port: port 0 is replaced by a free one.
fn free_addr(listen: &str) -> anyhow::Result<String> {
    let l = std::net::TcpListener::bind(listen)
        .with_context(|| format!("executor listen address {listen}"))?;
    Ok(l.local_addr()?.to_string())
}

/// The executor binary: `[executor] binary`, else `skillbox-executor` next to this binary.
pub(super) fn executor_binary(configured: &str) -> anyhow::Result<PathBuf> {
    if !configured.is_empty() {
        return Ok(PathBuf::from(configured));
    }
    let me = std::env::current_exe()?;
    let sibling = me.with_file_name("skillbox-executor");
    if sibling.is_file() {
        return Ok(sibling);
    }
    anyhow::bail!(
        "skillbox-executor not found next to {}; build it (cargo build -p skillbox-executor) or set [executor] binary",
        me.display()
    )
}

#[derive(Debug, Clone)]
struct ExecutorSpec {
    binary: PathBuf,
    /// Every skills root, highest precedence first (one `--skills` each).
    skills: Vec<PathBuf>,
    listen: String,
    pki: PathBuf,
    core_url: String,
    max_concurrent: usize,
    /// `--scratch-tmpfs-mb` (0: scratch on disk).
    scratch_tmpfs_mb: u64,
    insecure: bool,
    /// `[log] format = "json"`: the executor logs JSON lines too.
    log_json: bool,
}

/// Starts the executor and restarts it whenever it exits, with a growing pause.
async fn supervise(spec: ExecutorSpec) {
    let mut backoff = Duration::from_millis(200);
    loop {
        let mut cmd = tokio::process::Command::new(&spec.binary);
        cmd.arg("serve");
        for root in &spec.skills {
            cmd.arg("--skills").arg(root);
        }
        cmd.arg("--listen")
            .arg(&spec.listen)
            .arg("--pki")
            .arg(&spec.pki)
            .arg("--core-url")
            .arg(&spec.core_url)
            .arg("--max-concurrent")
            .arg(spec.max_concurrent.to_string())
            // The executor holds no secrets: it gets no environment from the core.
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .kill_on_drop(true);
        if spec.insecure {
            cmd.arg("--insecure-no-sandbox");
        }
        if spec.scratch_tmpfs_mb > 0 {
            cmd.arg("--scratch-tmpfs-mb")
                .arg(spec.scratch_tmpfs_mb.to_string());
        }
        if spec.log_json {
            cmd.env("SKILLBOX_LOG_FORMAT", "json");
        }
        let started = tokio::time::Instant::now();
        match cmd.spawn() {
            Ok(mut child) => {
                tracing::info!(pid = child.id(), "executor started");
                let status = child.wait().await;
                tracing::warn!(?status, "executor exited; restarting");
            }
            Err(e) => {
                tracing::error!(binary = %spec.binary.display(), error = %e, "cannot start the executor")
            }
        }
        if started.elapsed() > Duration::from_secs(10) {
            backoff = Duration::from_millis(200);
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

#[allow(dead_code)]
const _IDENTITIES: [&str; 2] = [CORE_IDENTITY, EXECUTOR_IDENTITY];
