//! `skillbox up` (core + a local executor child) and `skillbox serve` (core alone, against
//! a configured executor URL): [`skillbox_core::app::App`] builds the core and serves it
//! until Ctrl-C or SIGTERM; this file reads the arguments and prints where things are.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use skillbox_core::app::{App, AppOptions};
use skillbox_core::state::Workspace;

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
    runtime.block_on(async move {
        let options = AppOptions {
            workspace: workspace(args.workspace.as_deref())?,
            listen: args.listen,
            embedded,
            insecure_no_sandbox: args.insecure_no_sandbox,
        };
        let app = App::build(options).await?;
        print!("{}", app.banner());
        app.serve(shutdown_signal()).await;
        println!("skillbox: shutting down");
        Ok(0)
    })
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
