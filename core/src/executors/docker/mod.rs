//! The Docker engine as the core uses it (bollard over the unix socket, `[docker]` in
//! skillbox.toml): the [`supervisor`] of the executor containers, and one-off containers
//! for the calls of skills with `execution.sandbox: container` ([`oneoff`]). Nothing here
//! runs when no engine answers; the executor's kernel sandbox never depends on it.

pub mod oneoff;
pub mod supervisor;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bollard::Docker;

use crate::state::config::DockerSection;

/// Where the engine listens when `[docker] socket = "auto"`.
pub const DEFAULT_SOCKET: &str = "/var/run/docker.sock";
/// Seconds bollard waits for one engine request.
const REQUEST_TIMEOUT_SECS: u64 = 30;

/// Why the engine cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    /// The configured socket is not there or does not answer.
    #[error("Docker engine at {socket}: {source}; start the engine, mount its socket, or set [docker] socket = \"off\"")]
    Connect {
        /// The socket path.
        socket: String,
        /// bollard's error.
        source: bollard::errors::Error,
    },
    /// An engine request failed.
    #[error("Docker {step}: {source}")]
    Api {
        /// What the core asked the engine.
        step: &'static str,
        /// bollard's error.
        source: bollard::errors::Error,
    },
}

/// The core's own container, when it runs in one.
#[derive(Debug, Clone)]
pub struct OwnContainer {
    /// Container id.
    pub id: String,
    /// Its labels (`com.docker.compose.project`, ...).
    pub labels: HashMap<String, String>,
    /// Its mounts as (host source, destination in the container).
    pub mounts: Vec<(String, String)>,
}

/// A connected engine.
#[derive(Debug, Clone)]
pub struct Engine {
    /// The client.
    pub docker: Docker,
    /// The socket it came from.
    pub socket: String,
    /// The container the core runs in, if any.
    pub own: Option<OwnContainer>,
}

impl Engine {
    /// Connects as `[docker] socket` says: `off` → none; `auto` → the default socket when
    /// it exists and answers, else none; a path → that socket, which must answer.
    pub async fn connect(config: &DockerSection) -> Result<Option<Engine>, DockerError> {
        let (socket, explicit) = match config.socket.as_str() {
            "off" | "" => return Ok(None),
            "auto" => (DEFAULT_SOCKET.to_string(), false),
            path => (path.trim_start_matches("unix://").to_string(), true),
        };
        if !explicit && !Path::new(&socket).exists() {
            tracing::info!(socket = %socket, "no Docker socket: executor supervision and container sandboxes are off");
            return Ok(None);
        }
        match Self::connect_at(&socket).await {
            Ok(engine) => Ok(Some(engine)),
            Err(e) if !explicit => {
                tracing::warn!(error = %e, "Docker socket present but unusable: executor supervision and container sandboxes are off");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    async fn connect_at(socket: &str) -> Result<Engine, DockerError> {
        let connect_err = |source| DockerError::Connect {
            socket: socket.to_string(),
            source,
        };
        let docker =
            Docker::connect_with_unix(socket, REQUEST_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION)
                .map_err(connect_err)?
                // The engine may speak an older API than bollard's default (1.41 on Docker 20.10).
                .negotiate_version()
                .await
                .map_err(connect_err)?;
        docker.ping().await.map_err(connect_err)?;
        let own = own_container(&docker).await;
        tracing::info!(
            socket,
            in_container = own.as_ref().map(|o| o.id.as_str()),
            "Docker engine connected"
        );
        Ok(Engine {
            docker,
            socket: socket.to_string(),
            own,
        })
    }

    /// The compose project the core's container belongs to.
    pub fn own_project(&self) -> Option<&str> {
        self.own
            .as_ref()
            .and_then(|o| o.labels.get("com.docker.compose.project"))
            .map(String::as_str)
    }

    /// Where `path` (inside the core's container) comes from on the engine's host: the
    /// source of the mount that holds it, or `path` itself when the core is not in a
    /// container.
    pub fn host_path(&self, path: &Path) -> Option<PathBuf> {
        host_path(self.own.as_ref(), path)
    }
}

/// [`Engine::host_path`] for the container `own` (or none).
fn host_path(own: Option<&OwnContainer>, path: &Path) -> Option<PathBuf> {
    let Some(own) = own else {
        return Some(path.to_path_buf());
    };
    own.mounts
        .iter()
        .filter_map(|(source, dest)| {
            path.strip_prefix(dest)
                .ok()
                .map(|rest| (dest.len(), Path::new(source).join(rest)))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, p)| p)
}

/// The container this process runs in: the id in the source of its `/etc/hostname`
/// mount (Docker bind-mounts `/var/lib/docker/containers/<id>/hostname`), else the host
/// name (Docker names a container's host after its short id unless `hostname:` is set).
/// Not found means not in a container of this engine.
async fn own_container(docker: &Docker) -> Option<OwnContainer> {
    let from_mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .and_then(|m| container_id_from_mountinfo(&m));
    let hostname = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .ok();
    let mut found = None;
    for candidate in from_mounts.into_iter().chain(hostname) {
        if let Ok(c) = docker.inspect_container(&candidate, None).await {
            found = Some(c);
            break;
        }
    }
    let c = found?;
    Some(OwnContainer {
        id: c.id.unwrap_or_default(),
        labels: c.config.and_then(|c| c.labels).unwrap_or_default(),
        mounts: c
            .mounts
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| Some((m.source?, m.destination?)))
            .collect(),
    })
}

/// The container id in the mount source of `/etc/hostname`, from `/proc/self/mountinfo`.
fn container_id_from_mountinfo(mountinfo: &str) -> Option<String> {
    mountinfo
        .lines()
        .filter(|line| line.split_whitespace().nth(4) == Some("/etc/hostname"))
        .find_map(|line| {
            line.split_whitespace().nth(3)?.split('/').find_map(|part| {
                (part.len() == 64 && part.bytes().all(|b| b.is_ascii_hexdigit()))
                    .then(|| part.to_string())
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_id_is_read_from_the_hostname_mount() {
        let id = "42295b4f0a0017969a24b67df35f91a1c41fad815a33356af7d370ff27d4f732";
        let mountinfo = format!(
            "69 1 0:50 / / ro,relatime - overlay overlay rw\n\
             87 69 254:0 /var/lib/docker/containers/{id}/hostname /etc/hostname rw,relatime - ext4 /dev/vda rw\n"
        );
        assert_eq!(
            container_id_from_mountinfo(&mountinfo),
            Some(id.to_string())
        );
        assert_eq!(
            container_id_from_mountinfo("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"),
            None
        );
    }

    fn engine_in(mounts: &[(&str, &str)]) -> Option<OwnContainer> {
        Some(OwnContainer {
            id: "c".into(),
            labels: HashMap::new(),
            mounts: mounts
                .iter()
                .map(|(s, d)| (s.to_string(), d.to_string()))
                .collect(),
        })
    }

    #[test]
    fn host_path_follows_the_deepest_mount() {
        let own = engine_in(&[
            ("/var/lib/docker/volumes/s/_data", "/workspace/.skillbox"),
            ("/home/op/ws", "/workspace"),
            ("/home/op/skills", "/workspace/skills"),
        ]);
        assert_eq!(
            host_path(own.as_ref(), Path::new("/workspace/skills/probe")),
            Some(PathBuf::from("/home/op/skills/probe"))
        );
        assert_eq!(
            host_path(own.as_ref(), Path::new("/workspace/notes")),
            Some(PathBuf::from("/home/op/ws/notes"))
        );
        assert_eq!(host_path(own.as_ref(), Path::new("/etc/passwd")), None);
        assert_eq!(
            host_path(None, Path::new("/ws/skills")),
            Some(PathBuf::from("/ws/skills"))
        );
    }

    #[tokio::test]
    async fn connect_is_off_when_asked_and_fails_closed_on_a_configured_socket() {
        let off = DockerSection {
            socket: "off".into(),
            ..DockerSection::default()
        };
        assert!(Engine::connect(&off).await.unwrap().is_none());
        let missing = DockerSection {
            socket: "/nonexistent/docker.sock".into(),
            ..DockerSection::default()
        };
        let err = Engine::connect(&missing).await.unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/docker.sock"),
            "{err}"
        );
        assert!(err.to_string().contains("socket = \"off\""), "{err}");
    }
}
