//! The program's wiring: [`App::build`] makes every part of a running core from a
//! workspace (configuration, state, PKI, the store, the executors and their channel, the
//! callbacks and the egress proxy on the channel's callback listener, the call pipeline,
//! the bot tokens, the console, the gateway and its listener), each from the parts it
//! needs; [`App::serve`] runs them (the gateway, the reloads on SIGHUP and on changes of
//! the trust folder and the skills roots) until shutdown. `skillbox up` (with an
//! [`executor_child`]) and `skillbox serve` (against `[executor] url`) are this.

mod channel_streams;
mod egress_follow;
mod error;
pub mod executor_child;
mod open_files;
mod wiring;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use skillbox_protocol::skill::{discover, Catalog, DiscoveryOptions};
use tokio::net::TcpListener;
use tokio::signal::unix::Signal;
use tokio::task::JoinHandle;

pub use self::error::AppError;
use self::executor_child::free_addr;
use self::wiring::{
    bind_gateway, core_identity, core_parts, serve_callbacks, start_executors, Base,
};
use crate::approvals::Approvals;
use crate::auth::BotTokens;
use crate::calls::{LoadCell, Loaded};
use crate::executors::docker::Engine;
use crate::executors::ExecutorPool;
use crate::gateway::console::Console;
use crate::gateway::{self, Gateway};
use crate::observe::Metrics;
use crate::reload::{self, Reloader};
use crate::skills::install::{self, TrustPolicy};
use crate::skills::stamp::InstalledStamps;
use crate::state::config::Config;
use crate::state::store::Store;
use crate::state::Workspace;

/// How long `up` waits for the executor's first health answer.
pub const EXECUTOR_START_TIMEOUT: Duration = Duration::from_secs(30);

/// What to start.
#[derive(Debug, Clone)]
pub struct AppOptions {
    /// The workspace.
    pub workspace: Workspace,
    /// The gateway address, over `[gateway] listen`.
    pub listen: Option<String>,
    /// Start and supervise a local executor child (`up`) instead of using `[executor] url`
    /// (`serve`).
    pub embedded: bool,
    /// Start that child with `--insecure-no-sandbox`.
    pub insecure_no_sandbox: bool,
}

/// A built core, ready to serve.
#[derive(Debug)]
pub struct App {
    ws: Workspace,
    roots: Vec<PathBuf>,
    gateway: Arc<Gateway>,
    listener: TcpListener,
    addr: SocketAddr,
    store: Store,
    hangup: Signal,
    link: Option<(String, u64)>,
    /// The callback server, the health monitor and the containers' supervisor.
    background: Vec<JoinHandle<()>>,
    child: Option<JoinHandle<()>>,
}

/// The executors' addresses, the callback listener and the URL executors reach it at.
struct Channel {
    executor_url: String,
    executor_urls: Vec<String>,
    callback_listener: TcpListener,
    callback_url: String,
}

impl App {
    /// Makes every part of the core on `options.workspace`, starts the executor child and
    /// the channel's callback listener, waits for an executor to answer, and binds the
    /// gateway (writing its address to the state folder for the CLI).
    pub async fn build(options: AppOptions) -> Result<App, AppError> {
        // First: SIGHUP (reload skills and trust) would otherwise end the process.
        let hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(AppError::Hangup)?;
        // Before any listener or child: the gateway's default cap is a share of it.
        let fd_limit = open_files::raise_open_files_limit();
        let ws = options.workspace.clone();
        let state_dir = ws.ensure_state_dir().map_err(|source| AppError::StateDir {
            path: ws.state_dir(),
            source,
        })?;
        let config = Config::load(ws.root())?;
        let roots = config.skills_roots(ws.root())?;
        let core_files = core_identity(&state_dir, &config, options.embedded)?;
        let token = ws.ensure_token()?;
        let store = Store::open(&ws.db_file())?;
        let metrics = Arc::new(Metrics::new());
        let approvals = Arc::new(
            Approvals::new(store.clone(), config.approvals.clone())
                .with_metrics(Arc::clone(&metrics)),
        );
        let trust =
            TrustPolicy::for_workspace(&ws, config.trust.require_signed).with_roots(roots.clone());
        let (catalog, stamps) = first_load(trust.clone()).await?;

        let channel = Channel::bind(&config, options.embedded).await?;
        let executor = Arc::new(ExecutorPool::new(
            &channel.executor_urls,
            core_files.clone(),
        )?);
        let base = Base {
            options: &options,
            ws: &ws,
            config: &config,
            state_dir: &state_dir,
            store: &store,
            approvals: &approvals,
            metrics: &metrics,
            executor: &executor,
        };
        let (callbacks, task) = serve_callbacks(&base, core_files, channel.callback_listener)?;
        let mut background = vec![task];
        let engine = Engine::connect(&config.docker).await?;
        let load = Arc::new(LoadCell::new(
            Loaded::new(catalog, Arc::new(config.clone())).with_stamps(stamps),
        ));
        let core = core_parts(&base, &engine, load, callbacks).await?;
        let (supervisor, child) = start_executors(
            &base,
            &roots,
            (&channel.executor_url, &channel.callback_url),
            engine,
            &mut background,
        )
        .await?;

        let listen = options.listen.unwrap_or(config.gateway.listen.clone());
        let (listener, addr) = bind_gateway(&listen, &ws).await?;
        let console = Console::new(&config.console);
        let link = match console.sign_in_path() {
            Ok(path) => Some((path, config.console.link_seconds)),
            Err(e) => {
                tracing::warn!(error = %e, "no one-time console sign-in link");
                None
            }
        };
        let reloader = Arc::new(Reloader::new(core.reload_parts(), trust.clone()));
        let views = core.views();
        let gateway = Arc::new(Gateway {
            bots: Arc::new(BotTokens::load(store.clone())?),
            token,
            max_request_bytes: config.gateway.max_request_bytes,
            server_limits: gateway::ServerLimits::from_config(&config.gateway, fd_limit),
            skills_root: ws.skills_dir(),
            trust,
            reloader,
            supervisor,
            console,
            mcp_waiting: Default::default(),
            skills: views.skills,
            calls: views.calls,
            contexts: views.contexts,
            approvals: views.approvals,
            tokens: views.tokens,
            records: views.records,
        });
        Ok(App {
            ws,
            roots,
            gateway,
            listener,
            addr,
            store,
            hangup,
            link,
            background,
            child,
        })
    }

    /// The gateway's address.
    pub fn address(&self) -> SocketAddr {
        self.addr
    }

    /// What `up` prints once the core is built: where the gateway, the token, the
    /// workspace, the skills roots, the executors and the console are.
    pub fn banner(&self) -> String {
        let addr = self.addr;
        let roots: Vec<String> = self.roots.iter().map(|r| r.display().to_string()).collect();
        let mut out = format!(
            "skillbox is up\n  gateway:   http://{addr}\n  token:     {}\n  workspace: {}\n  skills:    {}\n  executor:  {}\n  console:   http://{addr}/console/\n",
            self.ws.token_file().display(),
            self.ws.root().display(),
            roots.join(", "),
            self.gateway.skills.executors.describe(),
        );
        if let Some((path, seconds)) = &self.link {
            out.push_str(&format!(
                "  sign in:   http://{addr}{path}  (works once, for {seconds} s)\n"
            ));
        }
        out
    }

    /// Serves until `shutdown` completes, then stops every task and writes every finished
    /// call to the store.
    pub async fn serve(self, shutdown: impl std::future::Future<Output = ()>) {
        let reloader = Arc::clone(&self.gateway.reloader);
        let tasks = [
            tokio::spawn(reload::on_hangup(self.hangup, Arc::clone(&reloader))),
            tokio::spawn(reload::watch_trust(
                Arc::clone(&reloader),
                reload::TRUST_POLL_INTERVAL,
            )),
            tokio::spawn(reload::watch::watch_skills(reloader)),
            tokio::spawn(expire_idle_contexts(self.gateway.contexts.files.clone())),
            tokio::spawn(gateway::serve(self.listener, self.gateway)),
        ];
        shutdown.await;
        for t in tasks.iter().chain(&self.background) {
            t.abort();
        }
        // Calls are recorded off their path; write every finished one before exiting.
        self.store.flush_calls();
        if let Some(child) = self.child {
            child.abort();
            let _ = child.await;
        }
    }
}

impl Channel {
    /// The callback listener (a free port unless configured: two `up` on one machine then
    /// differ only in their gateway address) and the executors' addresses.
    async fn bind(config: &Config, embedded: bool) -> Result<Self, AppError> {
        let callback_listen = config.executor.callback_listen_for(embedded);
        let bind = |source| AppError::Bind {
            what: "callback listener",
            addr: callback_listen.to_string(),
            hint: "set [executor] callback_listen in skillbox.toml",
            source,
        };
        let callback_listener = TcpListener::bind(callback_listen).await.map_err(bind)?;
        let callback_url = if config.executor.callback_url.is_empty() {
            format!("https://{}", callback_listener.local_addr().map_err(bind)?)
        } else {
            config.executor.callback_url.clone()
        };
        let executor_url = if embedded {
            format!("https://{}", free_addr(config.executor.executor_listen())?)
        } else if config.executor.url.is_empty() && config.executor.urls.is_empty() {
            return Err(AppError::NoExecutorUrl);
        } else {
            config.executor.url.clone()
        };
        let mut executor_urls = vec![executor_url.clone()];
        if !embedded {
            executor_urls.extend(config.executor.urls.iter().cloned());
            executor_urls.retain(|u| !u.is_empty());
        }
        Ok(Channel {
            executor_url,
            executor_urls,
            callback_listener,
            callback_url,
        })
    }
}

/// How often idle contexts' files are looked for.
pub const IDLE_SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// Removes idle contexts' files now and every [`IDLE_SWEEP_EVERY`] (`[files] idle_days`).
async fn expire_idle_contexts(files: crate::contexts::files::ContextFiles) {
    loop {
        let sweep = files.clone();
        match tokio::task::spawn_blocking(move || {
            sweep.expire_idle(crate::state::store::unix_ms_now())
        })
        .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot remove idle contexts' files"),
            Err(e) => tracing::warn!(error = %e, "the idle contexts' sweep failed"),
        }
        tokio::time::sleep(IDLE_SWEEP_EVERY).await;
    }
}

/// The first load of the skills: discovered over the roots, stamped, then verified.
async fn first_load(policy: TrustPolicy) -> Result<(Catalog, InstalledStamps), AppError> {
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
    Ok((catalog, stamps))
}

/// Waits until an executor answers `health`, at most [`EXECUTOR_START_TIMEOUT`].
async fn wait_healthy(pool: &ExecutorPool) -> Result<(), AppError> {
    let deadline = tokio::time::Instant::now() + EXECUTOR_START_TIMEOUT;
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
            return Err(AppError::NoExecutor {
                at: pool.describe(),
                waited: EXECUTOR_START_TIMEOUT,
                why: if why.is_empty() {
                    "no address resolved".to_string()
                } else {
                    why.join("; ")
                },
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
