//! Finding the executor's own cgroup in a hierarchy that can limit memory, from
//! `/proc/self/cgroup` and `/proc/self/mountinfo`.

use std::path::{Path, PathBuf};

use super::{MemcgError, Version};

/// Where the executor's cgroup is, in the hierarchy that can limit memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Found {
    pub(super) version: Version,
    /// The executor's cgroup folder.
    pub(super) own: PathBuf,
}

/// Finds the executor's cgroup in a hierarchy that can limit memory: v2 when its
/// `cgroup.controllers` lists `memory`, else a v1 `memory` hierarchy.
pub(super) fn find() -> Result<Found, MemcgError> {
    let read = |path: &'static str| {
        std::fs::read_to_string(path).map_err(|source| MemcgError::Proc { path, source })
    };
    let cgroups = read("/proc/self/cgroup")?;
    let mounts = read("/proc/self/mountinfo")?;
    let (v2_path, v1_path) = own_paths(&cgroups);
    let (v2_mount, v1_mount) = mount_points(&mounts);
    if let (Some(path), Some((mount, root))) = (&v2_path, &v2_mount) {
        let own = join_cgroup(mount, root, path);
        let controllers = std::fs::read_to_string(own.join("cgroup.controllers"));
        if controllers.is_ok_and(|c| c.split_whitespace().any(|c| c == "memory")) {
            return Ok(Found {
                version: Version::V2,
                own,
            });
        }
    }
    if let (Some(path), Some((mount, root))) = (&v1_path, &v1_mount) {
        let own = join_cgroup(mount, root, path);
        if own.join("memory.limit_in_bytes").exists() {
            return Ok(Found {
                version: Version::V1,
                own,
            });
        }
    }
    Err(MemcgError::NoHierarchy)
}

/// The executor's cgroup paths in `/proc/self/cgroup`: the unified hierarchy's (`0::`)
/// and the v1 memory hierarchy's.
pub(super) fn own_paths(text: &str) -> (Option<String>, Option<String>) {
    let (mut v2, mut v1) = (None, None);
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path.to_string());
        } else if controllers.split(',').any(|c| c == "memory") {
            v1 = Some(path.to_string());
        }
    }
    (v2, v1)
}

/// Where the unified hierarchy and the v1 memory hierarchy are mounted, each with the
/// mount's root inside its hierarchy, from `/proc/self/mountinfo`.
#[allow(clippy::type_complexity)]
pub(super) fn mount_points(text: &str) -> (Option<(PathBuf, String)>, Option<(PathBuf, String)>) {
    let (mut v2, mut v1) = (None, None);
    for line in text.lines() {
        // `id parent dev root mountpoint options [optional...] - fstype source superoptions`
        let Some((head, tail)) = line.split_once(" - ") else {
            continue;
        };
        let head: Vec<&str> = head.split(' ').collect();
        let tail: Vec<&str> = tail.split(' ').collect();
        let (Some(root), Some(point), Some(fstype)) = (head.get(3), head.get(4), tail.first())
        else {
            continue;
        };
        let entry = (PathBuf::from(unescape(point)), unescape(root));
        match *fstype {
            "cgroup2" if v2.is_none() => v2 = Some(entry),
            "cgroup"
                if v1.is_none()
                    && tail
                        .get(2)
                        .is_some_and(|o| o.split(',').any(|o| o == "memory")) =>
            {
                v1 = Some(entry)
            }
            _ => {}
        }
    }
    (v2, v1)
}

/// mountinfo escapes space, tab, newline and backslash as octal (`\040`).
pub(super) fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 4);
        match code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The folder of cgroup `path` (as `/proc/self/cgroup` names it) in a hierarchy mounted
/// at `mount` whose root is `root` in the hierarchy.
pub(super) fn join_cgroup(mount: &Path, root: &str, path: &str) -> PathBuf {
    let inside = match path.strip_prefix(root) {
        Some(rest) if root != "/" => rest,
        _ => path,
    };
    mount.join(inside.trim_start_matches('/'))
}
