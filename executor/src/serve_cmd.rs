//! `skillbox-executor serve` (a module of the binary, `main.rs`, not of the library): wait
//! for the channel PKI, start the sandbox and the mTLS server, and on SIGTERM drain —
//! refuse new calls, finish the held ones within `--drain-grace-ms` — before exiting.

use anyhow::Context;
use skillbox_channel::client::{RpcClient, StreamClient};
use skillbox_channel::{server, TlsFiles, CORE_IDENTITY, EXECUTOR_IDENTITY};
use skillbox_executor::sandbox::{Sandbox, SandboxConfig};
use skillbox_executor::server::{CoreBroker, ExecutorService};

use super::ServeArgs;

/// Runs the daemon until a stop signal and the drain that follows it.
pub(super) fn run_serve(a: ServeArgs) -> anyhow::Result<()> {
    let files = TlsFiles::in_dir(&a.pki, EXECUTOR_IDENTITY);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(a.wait_pki);
    while !(files.ca.exists() && files.cert.exists() && files.key.exists()) {
        if std::time::Instant::now() > deadline {
            anyhow::bail!(
                "PKI files missing in {} after {} s; start the core first (it creates them)",
                a.pki.display(),
                a.wait_pki
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let mut config = SandboxConfig {
        insecure_no_sandbox: a.insecure_no_sandbox,
        memory_cgroups: !a.no_memory_cgroups,
        max_concurrent_calls: a.max_concurrent,
        max_prestarted: a.max_prestarted,
        uid_base: a
            .uid_base
            .unwrap_or_else(skillbox_executor::sandbox::reaper::default_uid_base),
        blob_cache_bytes: blob_cache_mb(a.blob_cache_mb, a.scratch_tmpfs_mb) << 20,
        ..SandboxConfig::default()
    };
    if let Some(root) = a.scratch_root.clone() {
        config.scratch_root = root;
    }
    // Held until the process exits: the slot is this executor's while it runs.
    let mut slot_lock = None;
    if let Some(volume) = &a.scratch_volume {
        let (slot, lock) = claim_scratch_slot(volume)?;
        tracing::info!(root = %slot.display(), "scratch root in a slot of the scratch volume; dependency environments built there are kept");
        config.scratch_root = slot;
        slot_lock = Some(lock);
    }
    if a.scratch_tmpfs_mb > 0 {
        mount_scratch(&config.scratch_root, a.scratch_tmpfs_mb)?;
    }
    // After the last mount, before any thread: the mount API and the rest of
    // policies/seccomp/executor.json are refused to every thread and child from here on.
    super::self_filter::apply()?;
    skillbox_executor::sandbox::drop_own_bounding_set();
    // Threads start only from here on (the scratch mount above needs none running).
    skillbox_executor::sandbox::run_adopting_orphans(move || {
        let served = serve(a, files, config);
        drop(slot_lock);
        served
    })
}

/// Most executors sharing one scratch volume.
const MAX_SCRATCH_SLOTS: u32 = 64;

/// Takes the first slot of `volume` no running executor holds: `volume/<n>`, held by an
/// exclusive lock on `volume/<n>.lock` (released by the kernel when this process ends,
/// however it ends). What an earlier holder left in the slot (its calls' folders, the file
/// cache, the trash) is removed; its dependency environments (`.deps`) are kept, so a
/// restarted executor still holds what it built.
fn claim_scratch_slot(
    volume: &std::path::Path,
) -> anyhow::Result<(std::path::PathBuf, nix::fcntl::Flock<std::fs::File>)> {
    use nix::fcntl::{Flock, FlockArg};
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o711)
        .create(volume)
        .with_context(|| format!("creating the scratch volume folder {}", volume.display()))?;
    for n in 0..MAX_SCRATCH_SLOTS {
        let lock_path = volume.join(format!("{n}.lock"));
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .with_context(|| format!("opening {}", lock_path.display()))?;
        let lock = match Flock::lock(lock, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => lock,
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => continue,
            Err((_, e)) => {
                return Err(e).with_context(|| format!("locking {}", lock_path.display()))
            }
        };
        let slot = volume.join(n.to_string());
        sweep_slot(&slot)?;
        return Ok((slot, lock));
    }
    anyhow::bail!(
        "every one of the {MAX_SCRATCH_SLOTS} scratch slots of {} is held by a running executor; \
         give this executor a volume of its own",
        volume.display()
    )
}

/// Removes everything in `slot` but the dependency environments.
fn sweep_slot(slot: &std::path::Path) -> anyhow::Result<()> {
    let entries = match std::fs::read_dir(slot) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", slot.display())),
    };
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", slot.display()))?;
        if entry.file_name() == skillbox_executor::deps::DEPS_DIR {
            continue;
        }
        let path = entry.path();
        let removed = match entry.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
        removed
            .with_context(|| format!("removing {} left by an earlier executor", path.display()))?;
    }
    Ok(())
}

/// Serves calls until a shutdown signal.
/// MiB the blob cache (and the kept work folders) may hold: `asked`, else 512, or a
/// quarter of the scratch tmpfs when that is less (the cache lives on it, beside what
/// calls write).
fn blob_cache_mb(asked: Option<u64>, scratch_tmpfs_mb: u64) -> u64 {
    let default = skillbox_executor::blobs::DEFAULT_CAP_BYTES >> 20;
    asked.unwrap_or(match scratch_tmpfs_mb {
        0 => default,
        tmpfs => default.min((tmpfs / 4).max(1)),
    })
}

fn serve(a: ServeArgs, files: TlsFiles, config: SandboxConfig) -> anyhow::Result<()> {
    let mut sandbox = Sandbox::new(config)?;
    sandbox.keep_ready(a.ready_slots);
    let tls = std::sync::Arc::new(
        server::ReloadingServerConfig::new(files.clone())
            .context("loading the executor certificate")?,
    );
    let client =
        RpcClient::new(&a.core_url, CORE_IDENTITY, &files).context("core callback client")?;
    let streams = StreamClient::new(&a.core_url, CORE_IDENTITY, &files)
        .context("core egress stream client")?;
    let service = ExecutorService::new(
        sandbox,
        a.skills,
        CoreBroker::new(client).with_streams(streams),
        a.max_concurrent,
        a.max_queue,
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&a.listen)
            .await
            .with_context(|| format!("binding {}", a.listen))?;
        tracing::info!(listen = %listener.local_addr()?, "executor serving");
        let options = server::ServerOptions {
            expected_peer: CORE_IDENTITY.to_string(),
            max_body_bytes: skillbox_protocol::jsonrpc::MAX_MESSAGE_BYTES,
        };
        let service = std::sync::Arc::new(service);
        service.prestart();
        let serving = server::serve(listener, tls, options, std::sync::Arc::clone(&service) as std::sync::Arc<dyn server::RpcHandler>);
        tokio::pin!(serving);
        tokio::select! {
            _ = &mut serving => {}
            _ = shutdown_signal() => {
                let grace = std::time::Duration::from_millis(a.drain_grace_ms);
                let linger = std::time::Duration::from_millis(a.drain_linger_ms);
                tracing::info!(grace_ms = a.drain_grace_ms, "executor draining: new calls are refused, held calls finish");
                // The listener keeps serving while the drain runs: held calls answer on
                // their connections and new ones get the draining refusal.
                tokio::select! {
                    outcome = service.drain(grace, linger) => {
                        if outcome.abandoned == 0 {
                            tracing::info!(took_ms = u64::try_from(outcome.took.as_millis()).unwrap_or(u64::MAX), "executor drained; shutting down");
                        } else {
                            tracing::warn!(abandoned = outcome.abandoned, grace_ms = a.drain_grace_ms, "drain grace period over; shutting down with calls still running");
                        }
                    }
                    _ = &mut serving => {}
                    _ = shutdown_signal() => tracing::warn!("second stop signal: shutting down without waiting for held calls"),
                }
            }
        }
        service.stop_prestarted();
        anyhow::Ok(())
    })?;
    // Ended calls' users and scratch dirs are released on threads of their own.
    skillbox_executor::sandbox::wait_idle();
    Ok(())
}

/// Mounts the scratch tmpfs (still one thread: the runtime and the sandbox's threads start
/// after it). Without the privilege for it the scratch stays on disk, with a warning: the
/// tmpfs makes calls cheaper and bounds what tools write, it confines nothing.
fn mount_scratch(root: &std::path::Path, size_mb: u64) -> anyhow::Result<()> {
    use skillbox_executor::sandbox::scratch_mount::mount_private_tmpfs;
    match mount_private_tmpfs(root, size_mb) {
        Ok(()) => {
            tracing::info!(root = %root.display(), size_mb, "scratch root on a private tmpfs");
            Ok(())
        }
        Err(e) if e.is_permission() => {
            tracing::warn!(root = %root.display(), error = %e, "scratch root stays on disk");
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::blob_cache_mb;

    #[test]
    fn the_blob_cache_takes_at_most_a_quarter_of_a_scratch_tmpfs_unless_asked() {
        assert_eq!(blob_cache_mb(None, 0), 512);
        assert_eq!(blob_cache_mb(None, 512), 128);
        assert_eq!(blob_cache_mb(None, 8192), 512);
        assert_eq!(blob_cache_mb(None, 2), 1);
        assert_eq!(blob_cache_mb(Some(2048), 512), 2048);
    }
}
