//! Sends back what a call left in its work folder: walked without following a link
//! (every entry opened `O_NOFOLLOW` relative to its folder's descriptor, typed by `fstat`
//! of what was opened), regular files only, at most [`MAX_DEPTH`] deep and
//! [`MAX_WALK_ENTRIES`] entries; links, FIFOs, sockets and devices are skipped and
//! logged. A file is unchanged when its [`Stamp`] is the one last written or sent, or,
//! with the same size and exec bit, when its SHA-256 is (a `chmod +x` alone is a change:
//! the context keeps the bit, so the script runs in the next call). New and changed files
//! go to the core in
//! chunks (`core.contextFileWrite`), files of the baseline that are gone as
//! `core.contextFileDelete`, within the context's limits; what is not kept, and why, is
//! in the [`SyncReport`].

use std::collections::HashSet;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use base64::Engine;
use nix::dir::Dir;
use nix::fcntl::AtFlags;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fstat, fstatat, FileStat, Mode, SFlag};
use ring::digest;
use skillbox_protocol::jsonrpc::ErrorObject;
use skillbox_protocol::result::ErrorKind;
use skillbox_protocol::rpc::{CoreContextFileDelete, CoreContextFileWrite};
use skillbox_protocol::workdir::{
    ContextFileDeleteParams, ContextFileWriteParams, WorkDir, MAX_CHUNK_BYTES,
};

use super::layout::digest_of;
use super::{core_error_kind, hex, Baseline, Known, Stamp, MAX_DEPTH, MAX_WALK_ENTRIES};
use crate::broker::{core_call, CallInfo, CapabilityBroker};
use crate::sandbox::reaper::user_has_process;

/// What one sync did, and what it could not keep.
#[derive(Debug, Default)]
pub struct SyncReport {
    /// Files sent, by path.
    pub written: Vec<String>,
    /// Files reported removed.
    pub deleted: Vec<String>,
    /// Files not kept, with the reason (a limit of the context's folder).
    pub not_kept: Vec<(String, String)>,
    /// Files the core refused, with its error.
    pub refused: Vec<(String, ErrorObject)>,
    /// Whether no process of the folder's owner was left when the sync began: then none
    /// could change the folder during or after it, and what it recorded is the folder's
    /// final state. Only such a folder is kept for the context's next call.
    pub quiet: bool,
}

impl SyncReport {
    /// The failure the call reports for this sync, if any: the core's refusals first
    /// (its quota is `resource_limit`), then the files not kept (`resource_limit`).
    pub fn failure(&self) -> Option<(ErrorKind, String)> {
        let mut parts = Vec::new();
        let mut kind = None;
        for (path, e) in &self.refused {
            kind.get_or_insert(core_error_kind(e));
            parts.push(format!("{path}: {}", e.message));
        }
        for (path, why) in &self.not_kept {
            kind.get_or_insert(ErrorKind::ResourceLimit);
            parts.push(format!("{path}: {why}"));
        }
        let kind = kind?;
        Some((
            kind,
            format!(
                "the call's files were not all kept in the context: {}",
                parts.join("; ")
            ),
        ))
    }
}

/// A regular file found by the walk.
struct Found {
    path: String,
    file: File,
    stamp: Stamp,
    /// The owner's exec bit.
    executable: bool,
}

/// The walk's result: every regular file's path, the new or changed ones open (at most
/// `max_candidates`), and whether it saw the whole folder.
#[derive(Default)]
struct Walk {
    present: Vec<String>,
    files: Vec<Found>,
    max_candidates: usize,
    entries: usize,
    complete: bool,
    not_kept: Vec<(String, String)>,
    /// The user the folder belongs to ([`Baseline`]'s owner).
    owner: Option<u32>,
    /// Whether it saw anything a settled folder does not hold (see [`Baseline`]): a
    /// link, a special file, an empty folder, another mode or owner, a second link.
    unsettled: bool,
}

impl Walk {
    /// Takes a regular file: unchanged ones (same stamp, or same size and digest) only
    /// count as present; the others are kept open to be judged and sent.
    fn take(&mut self, mut found: Found, st: &FileStat, baseline: &mut Baseline) {
        self.present.push(found.path.clone());
        self.unsettled |= !settled_file(st, found.executable, self.owner);
        if let Some(known) = baseline.files.get_mut(&found.path) {
            if known.stamp == found.stamp {
                return;
            }
            if known.stamp.size == found.stamp.size
                && known.executable == found.executable
                && digest_of(&mut found.file).is_ok_and(|d| d == known.sha256)
            {
                known.stamp = found.stamp;
                return;
            }
        }
        if self.files.len() >= self.max_candidates {
            let why = format!(
                "the call left more than max_files ({}) new or changed files",
                self.max_candidates
            );
            self.not_kept.push((found.path, why));
            return;
        }
        self.files.push(found);
    }
}

/// Walks `work`, sends what changed, and updates `baseline` to what the core now holds,
/// settled when nothing of its owner runs and the folder holds only that (see
/// [`Baseline`]); a settled folder is then watched, and while the kernel saw no change in
/// it the next sync has nothing to walk ([`super::watch`]).
pub async fn sync_back<B: CapabilityBroker>(
    broker: &B,
    call: &CallInfo,
    work: &Path,
    limits: &WorkDir,
    baseline: &mut Baseline,
) -> SyncReport {
    let mut report = SyncReport::default();
    baseline.settled = false;
    // Checked before the walk: with no process of the owner left, none can start (only
    // the executor starts one, and the call still holds the id), so what the walk sees
    // is what the folder keeps.
    let quiet = baseline.owner.is_some_and(|uid| !user_has_process(uid));
    if !quiet {
        tracing::debug!(uid = ?baseline.owner, "a process of the call's user is left at the sync: the folder is not kept");
    }
    report.quiet = quiet;
    if quiet && baseline.tracked.as_ref().is_some_and(|t| t.unchanged()) {
        // Settled when it was armed or taken, and nothing changed in it since.
        baseline.settled = true;
        return report;
    }
    let Some(mut walk) = walk_work(work, limits, baseline) else {
        return report;
    };
    let tidy = quiet && walk.complete && !walk.unsettled;
    report.not_kept.append(&mut walk.not_kept);
    // The folder as the context holds it while the changes are judged.
    let present: HashSet<String> = std::mem::take(&mut walk.present).into_iter().collect();
    let send = judge_changes(walk.files, &present, limits, baseline, &mut report);
    if walk.complete {
        delete_gone(broker, call, &present, baseline, &mut report).await;
    }
    send_changes(broker, call, send, limits, baseline, &mut report).await;
    baseline.settled = tidy && report.failure().is_none();
    let tracked = baseline.tracked.take();
    baseline.tracked = match baseline.settled {
        true => super::watch::arm(tracked, work, &baseline.files),
        false => tracked.inspect(|t| t.touch()),
    };
    report
}

/// The new and changed files under `work`, sorted by path; `None` when `work` cannot be
/// opened (then nothing is sent back).
fn walk_work(work: &Path, limits: &WorkDir, baseline: &mut Baseline) -> Option<Walk> {
    let mut walk = Walk {
        complete: true,
        max_candidates: limits.max_files,
        owner: baseline.owner,
        ..Walk::default()
    };
    match openat(
        nix::fcntl::AT_FDCWD,
        work,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => {
            walk.unsettled |= !fstat(fd.as_fd()).is_ok_and(|st| settled_dir(&st, walk.owner));
            walk_dir(fd, "", 0, &mut walk, baseline);
        }
        Err(e) => {
            tracing::warn!(work = %work.display(), error = %e, "the work folder cannot be opened; nothing is sent back");
            return None;
        }
    }
    walk.files.sort_by(|a, b| a.path.cmp(&b.path));
    Some(walk)
}

/// The files to send, in order, each kept only while the context's folder stays within
/// `limits`; the others go to `report.not_kept` with the limit they would break.
fn judge_changes(
    files: Vec<Found>,
    present: &HashSet<String>,
    limits: &WorkDir,
    baseline: &Baseline,
    report: &mut SyncReport,
) -> Vec<Found> {
    let kept: Vec<&Known> = (baseline.files.iter())
        .filter(|(p, _)| present.contains(*p))
        .map(|(_, k)| k)
        .collect();
    let mut count = kept.len();
    let mut total: u64 = kept.iter().map(|k| k.stamp.size).sum();
    let mut send = Vec::new();
    for found in files {
        let old = baseline.files.get(&found.path).cloned();
        let size = found.stamp.size;
        let (new_count, new_total) = match &old {
            Some(k) => (count, total - k.stamp.size + size),
            None => (count + 1, total + size),
        };
        let refusal = if size > limits.max_file_bytes {
            Some(format!(
                "{size} bytes, larger than the context's max_file_bytes ({})",
                limits.max_file_bytes
            ))
        } else if new_count > limits.max_files {
            Some(format!(
                "the context's folder would hold more than max_files ({}) files",
                limits.max_files
            ))
        } else if new_total > limits.max_total_bytes {
            Some(format!(
                "the context's folder would hold more than max_total_bytes ({}) bytes",
                limits.max_total_bytes
            ))
        } else {
            None
        };
        match refusal {
            Some(why) => report.not_kept.push((found.path, why)),
            None => {
                (count, total) = (new_count, new_total);
                send.push(found);
            }
        }
    }
    send
}

/// Asks the core to delete each file of `baseline` that is no longer in the work folder.
async fn delete_gone<B: CapabilityBroker>(
    broker: &B,
    call: &CallInfo,
    present: &HashSet<String>,
    baseline: &mut Baseline,
    report: &mut SyncReport,
) {
    let gone: Vec<String> = baseline
        .files
        .keys()
        .filter(|p| !present.contains(*p))
        .cloned()
        .collect();
    for path in gone {
        let request = ContextFileDeleteParams { path: path.clone() };
        match core_call::<CoreContextFileDelete, _, _>(broker, call, request).await {
            Ok(_) => {
                baseline.files.remove(&path);
                report.deleted.push(path);
            }
            Err(e) => report.refused.push((path, e)),
        }
    }
}

/// Sends each judged file to the core and records in `baseline` what it now holds.
async fn send_changes<B: CapabilityBroker>(
    broker: &B,
    call: &CallInfo,
    send: Vec<Found>,
    limits: &WorkDir,
    baseline: &mut Baseline,
    report: &mut SyncReport,
) {
    for mut found in send {
        let sent = Sending {
            path: &found.path,
            executable: found.executable,
            max_bytes: limits.max_file_bytes,
        };
        match send_file(broker, call, &sent, &mut found.file).await {
            Ok(sha256) => {
                let stamp = fstat(found.file.as_fd())
                    .map(|s| Stamp::of(&s))
                    .unwrap_or(found.stamp);
                let known = Known {
                    stamp,
                    sha256,
                    executable: found.executable,
                };
                baseline.files.insert(found.path.clone(), known);
                report.written.push(found.path);
            }
            Err(e) => report.refused.push((found.path, e)),
        }
    }
}

/// Adds the regular files under the folder open as `fd` to `walk`.
fn walk_dir(fd: OwnedFd, prefix: &str, depth: usize, walk: &mut Walk, baseline: &mut Baseline) {
    let Ok(mut dir) = Dir::from_fd(fd) else {
        return;
    };
    let names: Vec<std::ffi::CString> = dir
        .iter()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_owned())
        .filter(|n| n.as_bytes() != b"." && n.as_bytes() != b"..")
        .collect();
    for name in names {
        walk.entries += 1;
        if walk.entries > MAX_WALK_ENTRIES {
            if walk.complete {
                walk.not_kept.push((
                    prefix.to_string(),
                    format!("the folder holds more than {MAX_WALK_ENTRIES} entries; the rest was not looked at"),
                ));
            }
            walk.complete = false;
            return;
        }
        let Ok(text) = name.to_str() else {
            walk.unsettled = true;
            let shown = format!("{prefix}{}", String::from_utf8_lossy(name.as_bytes()));
            walk.not_kept
                .push((shown, "its name is not valid UTF-8".into()));
            continue;
        };
        let path = format!("{prefix}{text}");
        // A file whose stamp is the one laid out or synced last is unchanged: no need to
        // open it (the call's processes are gone, nothing changes it under the walk).
        let stat = fstatat(dir.as_fd(), name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW);
        if let Ok(st) = stat {
            let regular =
                SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFREG;
            let known = baseline.files.get(&path).filter(|_| regular);
            if let Some(known) = known.filter(|k| k.stamp == Stamp::of(&st)) {
                walk.unsettled |= !settled_file(&st, known.executable, walk.owner);
                walk.present.push(path);
                continue;
            }
        }
        // O_NONBLOCK: opening a FIFO must not wait for a writer.
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let opened = match openat(dir.as_fd(), name.as_c_str(), flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(nix::errno::Errno::ELOOP) => {
                tracing::info!(path = %path, "a link in the work folder is not kept");
                walk.unsettled = true;
                continue;
            }
            Err(e) => {
                tracing::info!(path = %path, error = %e, "an entry of the work folder cannot be opened; not kept");
                walk.unsettled = true;
                continue;
            }
        };
        let Ok(st) = fstat(opened.as_fd()) else {
            walk.unsettled = true;
            continue;
        };
        match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
            SFlag::S_IFREG => {
                let found = Found {
                    path,
                    file: File::from(opened),
                    stamp: Stamp::of(&st),
                    executable: st.st_mode & 0o100 != 0,
                };
                walk.take(found, &st, baseline);
            }
            SFlag::S_IFDIR if depth + 1 < MAX_DEPTH => {
                let before = walk.present.len();
                walk_dir(opened, &format!("{path}/"), depth + 1, walk, baseline);
                // An empty folder, or one of another mode or owner, is not kept as it is.
                walk.unsettled |= walk.present.len() == before || !settled_dir(&st, walk.owner);
            }
            SFlag::S_IFDIR => {
                walk.complete = false;
                walk.not_kept
                    .push((path, format!("deeper than {MAX_DEPTH} folders")));
            }
            _ => {
                tracing::info!(path = %path, "a special file in the work folder is not kept");
                walk.unsettled = true;
            }
        }
    }
}

/// Whether `st` is a file as a settled folder holds it: one link, `owner`'s, 0755 when
/// the context holds it `executable`, else 0644.
fn settled_file(st: &FileStat, executable: bool, owner: Option<u32>) -> bool {
    let mode = if executable { 0o755 } else { 0o644 };
    st.st_nlink == 1 && st.st_mode & 0o7777 == mode && owned_by(st, owner)
}

/// Whether `st` is a folder as a settled folder holds it: 0700, `owner`'s.
fn settled_dir(st: &FileStat, owner: Option<u32>) -> bool {
    st.st_mode & 0o7777 == 0o700 && owned_by(st, owner)
}

/// Whether `st`'s user and group are `owner` (never without one).
fn owned_by(st: &FileStat, owner: Option<u32>) -> bool {
    owner.is_some_and(|id| st.st_uid == id && st.st_gid == id)
}

/// A file on its way to the core.
struct Sending<'a> {
    path: &'a str,
    executable: bool,
    max_bytes: u64,
}

/// Sends `file` in order from offset 0, the last chunk with the whole file's digest and
/// its exec bit; returns the digest.
async fn send_file<B: CapabilityBroker>(
    broker: &B,
    call: &CallInfo,
    sending: &Sending<'_>,
    file: &mut File,
) -> Result<String, ErrorObject> {
    let (path, max_bytes) = (sending.path, sending.max_bytes);
    let io = |e: std::io::Error| {
        ErrorObject::new(
            skillbox_protocol::jsonrpc::code::INTERNAL_ERROR,
            format!("reading it failed: {e}"),
        )
    };
    use std::io::Seek;
    file.rewind().map_err(io)?;
    let mut hash = digest::Context::new(&digest::SHA256);
    let mut offset = 0u64;
    let mut current = read_chunk(file).map_err(io)?;
    loop {
        let next = if current.len() == MAX_CHUNK_BYTES {
            read_chunk(file).map_err(io)?
        } else {
            Vec::new()
        };
        let last = next.is_empty();
        if offset + current.len() as u64 > max_bytes {
            return Err(ErrorObject::new(
                skillbox_protocol::jsonrpc::code::RESOURCE_LIMIT,
                format!("it grew beyond max_file_bytes ({max_bytes}) while it was sent"),
            ));
        }
        hash.update(&current);
        let sha256 = last.then(|| hex(hash.clone().finish().as_ref()));
        let request = ContextFileWriteParams {
            path: path.to_string(),
            offset,
            data: base64::engine::general_purpose::STANDARD.encode(&current),
            last,
            sha256: sha256.clone(),
            executable: last && sending.executable,
        };
        core_call::<CoreContextFileWrite, _, _>(broker, call, request).await?;
        offset += current.len() as u64;
        if let Some(sha256) = sha256 {
            return Ok(sha256);
        }
        current = next;
    }
}

/// Up to [`MAX_CHUNK_BYTES`] from `file`'s position (fewer only at its end).
fn read_chunk(file: &mut File) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(MAX_CHUNK_BYTES);
    file.by_ref()
        .take(MAX_CHUNK_BYTES as u64)
        .read_to_end(&mut buf)?;
    Ok(buf)
}
