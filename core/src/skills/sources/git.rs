//! The `git` program, run so that nothing a repository holds can act: a fresh bare repo
//! that is never checked out (no working tree, so no filters, smudge or checkout hooks),
//! no system or global config, hooks pointed at `/dev/null`, only the transports we name
//! (never `ext::`), no submodule recursion, objects checked on receipt, and a watchdog
//! that stops a fetch past its byte or time limit.
//!
//! Why the `git` program rather than a crate: it is the implementation every host that
//! serves skills (GitHub, Gitea, `git http-backend`) is tested against, shallow fetches
//! and every transport (https with the host's proxies and credentials helpers, ssh with
//! the operator's keys) work as the operator's own `git` does, and it adds no build time.
//! A host without `git` gets an error saying to install it.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::SourceError;

mod fetch_dir;
mod process;
mod short_commit;

pub use self::fetch_dir::FetchDir;
use self::process::{dir_bytes, git_io, last_lines, piped, run, run_out, spawn_error, stop};

/// How often the fetch watchdog looks at the bytes received.
const WATCH_INTERVAL: Duration = Duration::from_millis(50);

/// The transports a URL may use, and the limits of one fetch.
#[derive(Debug, Clone)]
pub struct GitRunner {
    /// Allow `http://` (off: https, ssh and file only).
    pub allow_http: bool,
    /// Bytes a fetch may receive.
    pub max_bytes: u64,
    /// How long a fetch or ls-remote may run.
    pub timeout: Duration,
}

/// One entry of a fetched tree (`git ls-tree -r --long`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// Octal mode: `100644`, `100755`, `120000` (link), `160000` (submodule).
    pub mode: u32,
    /// The object id.
    pub oid: String,
    /// Size in bytes (0 for a submodule).
    pub size: u64,
    /// The path from the repository's top, `/`-separated.
    pub path: String,
}

/// Mode of a folder (tree) in a git tree.
pub const MODE_TREE: u32 = 0o040000;
/// Mode of a symbolic link in a git tree.
pub const MODE_LINK: u32 = 0o120000;
/// Mode of a submodule (gitlink) in a git tree.
pub const MODE_SUBMODULE: u32 = 0o160000;

impl GitRunner {
    /// `git` with the hardened environment and options, in `dir`.
    fn command(&self, dir: Option<&Path>) -> Command {
        let mut cmd = Command::new("git");
        cmd.env_clear();
        for key in [
            "PATH",
            "HOME",
            "SSH_AUTH_SOCK",
            "https_proxy",
            "HTTPS_PROXY",
            "no_proxy",
            "NO_PROXY",
        ] {
            if let Some(v) = std::env::var_os(key) {
                cmd.env(key, v);
            }
        }
        cmd.env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_PROTOCOL_FROM_USER", "0")
            .env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
            .env("LC_ALL", "C");
        let http = if self.allow_http { "always" } else { "never" };
        for opt in [
            "core.hooksPath=/dev/null".to_string(),
            "protocol.allow=never".into(),
            "protocol.https.allow=always".into(),
            format!("protocol.http.allow={http}"),
            "protocol.ssh.allow=always".into(),
            "protocol.file.allow=always".into(),
            "transfer.fsckObjects=true".into(),
            "fetch.recurseSubmodules=false".into(),
            "submodule.recurse=false".into(),
            "core.fsmonitor=false".into(),
            "gc.auto=0".into(),
            "maintenance.auto=false".into(),
            "init.defaultBranch=main".into(),
        ] {
            cmd.arg("-c").arg(opt);
        }
        if let Some(d) = dir {
            cmd.arg("--git-dir").arg(d);
        }
        cmd.stdin(Stdio::null());
        // Its own process group, so a stop reaches the transport helpers git starts
        // (`git-remote-http`, `ssh`), which would otherwise hold its pipes open.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        cmd
    }

    /// Checks the URL's transport before anything runs.
    pub fn check_url(&self, url: &str) -> Result<(), SourceError> {
        let scheme = url.split_once("://").map(|(s, _)| s);
        let ok = match scheme {
            Some("https" | "ssh" | "file") => true,
            Some("http") => self.allow_http,
            Some(_) => false,
            // scp-like `user@host:path` is ssh.
            None => url.contains('@') && url.contains(':') && !url.starts_with('-'),
        };
        if ok && !url.starts_with('-') {
            Ok(())
        } else if scheme == Some("http") {
            Err(SourceError::Url {
                url: url.into(),
                reason: "plain http is off; use https, or set [skills.fetch] allow_http = true for a server you trust on your network".into(),
            })
        } else {
            Err(SourceError::Url {
                url: url.into(),
                reason: "only https://, ssh://, user@host:path, file:// and local repositories are fetched".into(),
            })
        }
    }

    /// Makes an empty bare repository at `repo` to fetch into.
    pub fn init(&self, repo: &Path) -> Result<(), SourceError> {
        let mut cmd = self.command(None);
        cmd.args(["init", "--bare", "--quiet", "--template="])
            .arg(repo);
        run(cmd, "init", Duration::from_secs(30)).map(|_| ())
    }

    /// Fetches `reference` (default: the remote's HEAD) of `url` into `repo`, one commit
    /// deep, and returns the commit it resolved to.
    pub fn fetch(
        &self,
        repo: &Path,
        url: &str,
        reference: Option<&str>,
    ) -> Result<String, SourceError> {
        self.check_url(url)?;
        if let Some(r) = reference {
            check_ref(r)?;
        }
        let refspec = format!("{}:refs/skillbox/fetched", reference.unwrap_or("HEAD"));
        match self.fetch_refspecs(repo, url, &[refspec.as_str()], true) {
            Ok(()) => {}
            // A remote names refs only: an abbreviated commit is looked for among the
            // commits of its branches and tags.
            Err(SourceError::Git { .. }) if reference.is_some_and(is_short_commit) => {
                return self.fetch_short_commit(repo, url, reference.unwrap_or_default());
            }
            Err(e) => return Err(e),
        }
        let out = run_out(
            self.command(Some(repo)),
            &["rev-parse", "--verify", "refs/skillbox/fetched^{commit}"],
        )?;
        Ok(out.trim().to_string())
    }

    /// `git fetch URL REFSPECS` into `repo` (one commit deep when `shallow`), watched.
    fn fetch_refspecs(
        &self,
        repo: &Path,
        url: &str,
        refspecs: &[&str],
        shallow: bool,
    ) -> Result<(), SourceError> {
        let mut cmd = self.command(Some(repo));
        cmd.args(["fetch", "--quiet"]);
        if shallow {
            cmd.arg("--depth=1");
        }
        cmd.args([
            "--no-tags",
            "--no-recurse-submodules",
            "--no-write-fetch-head",
            "--",
            url,
        ]);
        cmd.args(refspecs);
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        let child = cmd.spawn().map_err(spawn_error)?;
        self.watch_fetch(child, &repo.join("objects"))
    }

    /// Waits for a fetch, stopping it past the byte or time limit.
    fn watch_fetch(&self, mut child: Child, objects: &Path) -> Result<(), SourceError> {
        let stderr = child.stderr.take();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut e) = stderr {
                let _ = e.by_ref().take(64 * 1024).read_to_string(&mut text);
            }
            text
        });
        let started = Instant::now();
        let outcome = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) => {}
                Err(e) => {
                    break Err(SourceError::Git {
                        step: "fetch",
                        message: e.to_string(),
                    })
                }
            }
            let received = dir_bytes(objects);
            if received > self.max_bytes {
                stop(&mut child);
                let _ = child.wait();
                break Err(SourceError::TooLarge {
                    what: format!("the fetch received over {} bytes", self.max_bytes),
                    limit: "[skills.fetch] max_bytes",
                });
            }
            if started.elapsed() > self.timeout {
                stop(&mut child);
                let _ = child.wait();
                break Err(SourceError::Timeout {
                    secs: self.timeout.as_secs(),
                });
            }
            std::thread::sleep(WATCH_INTERVAL);
        };
        let text = reader.join().unwrap_or_default();
        let status = outcome?;
        // A fetch quicker than the watchdog's look is measured once it is done.
        if dir_bytes(objects) > self.max_bytes {
            return Err(SourceError::TooLarge {
                what: format!("the fetch received over {} bytes", self.max_bytes),
                limit: "[skills.fetch] max_bytes",
            });
        }
        if status.success() {
            Ok(())
        } else {
            Err(SourceError::Git {
                step: "fetch",
                message: last_lines(&text),
            })
        }
    }

    /// The commit `reference` (default: HEAD) of `url` points at now, without fetching.
    pub fn ls_remote(&self, url: &str, reference: Option<&str>) -> Result<String, SourceError> {
        self.check_url(url)?;
        let r = reference.unwrap_or("HEAD");
        check_ref(r)?;
        if is_commit_id(r) {
            return Ok(r.to_string());
        }
        let mut cmd = self.command(None);
        cmd.args(["ls-remote", "--", url, r, &format!("{r}^{{}}")]);
        let out = run(cmd, "ls-remote", self.timeout)?;
        let lines: Vec<(&str, &str)> = out.lines().filter_map(|l| l.split_once('\t')).collect();
        // A tag's peeled line names the commit; then an exact ref, then the first match.
        let pick = lines
            .iter()
            .find(|(_, name)| name.ends_with("^{}"))
            .or_else(|| {
                lines
                    .iter()
                    .find(|(_, name)| *name == r || name.ends_with(&format!("/{r}")))
            })
            .or(lines.first());
        pick.map(|(oid, _)| oid.to_string())
            .ok_or_else(|| SourceError::Git {
                step: "ls-remote",
                message: format!("{url} has no ref {r}"),
            })
    }

    /// Fetches `commit` (a full id) of `url` into `repo`, one commit deep, beside what it
    /// holds: the installed commit of a skill whose lock has no folder tree id yet.
    pub fn fetch_commit(&self, repo: &Path, url: &str, commit: &str) -> Result<(), SourceError> {
        self.check_url(url)?;
        if !is_commit_id(commit) {
            return Err(SourceError::Ref {
                reference: commit.to_string(),
            });
        }
        let refspec = format!("+{commit}:refs/skillbox/installed");
        self.fetch_refspecs(repo, url, &[refspec.as_str()], true)
    }

    /// The id of the tree of `folder` (`""`: the top) at `commit`; none when the commit
    /// has no such folder.
    pub fn folder_tree(
        &self,
        repo: &Path,
        commit: &str,
        folder: &str,
    ) -> Result<Option<String>, SourceError> {
        let folder = folder.trim_matches('/');
        let mut cmd = self.command(Some(repo));
        if folder.is_empty() {
            cmd.args(["rev-parse", "--verify", &format!("{commit}^{{tree}}")]);
            let out = run(cmd, "rev-parse", Duration::from_secs(30))?;
            return Ok(Some(out.trim().to_string()));
        }
        // Literal: a folder name is never read as pathspec magic.
        cmd.arg("--literal-pathspecs").args([
            "ls-tree",
            "-d",
            "-z",
            "--long",
            "--full-tree",
            commit,
            "--",
            folder,
        ]);
        let out = run(cmd, "ls-tree", Duration::from_secs(30))?;
        for line in out.split('\0').filter(|l| !l.is_empty()) {
            let e = parse_tree_line(line)?;
            if e.path == folder && e.mode == MODE_TREE {
                return Ok(Some(e.oid));
            }
        }
        Ok(None)
    }

    /// Every file of `commit`'s tree, recursively.
    pub fn ls_tree(&self, repo: &Path, commit: &str) -> Result<Vec<TreeEntry>, SourceError> {
        let mut cmd = self.command(Some(repo));
        cmd.args(["ls-tree", "-r", "-z", "--long", "--full-tree", commit]);
        let out = run(cmd, "ls-tree", Duration::from_secs(120))?;
        out.split('\0')
            .filter(|l| !l.is_empty())
            .map(parse_tree_line)
            .collect()
    }

    /// The contents of the blobs `oids`, in order, read through one `cat-file --batch`.
    /// Blobs are read raw: no filter or conversion runs.
    pub fn read_blobs(&self, repo: &Path, oids: &[String]) -> Result<Vec<Vec<u8>>, SourceError> {
        let mut cmd = self.command(Some(repo));
        cmd.args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().map_err(spawn_error)?;
        let mut stdin = piped(child.stdin.take())?;
        let input: String = oids.iter().map(|o| format!("{o}\n")).collect();
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let mut out = BufReader::new(piped(child.stdout.take())?);
        let mut blobs = Vec::with_capacity(oids.len());
        for oid in oids {
            let mut header = String::new();
            out.read_line(&mut header)
                .map_err(|e| git_io("cat-file", e))?;
            let mut parts = header.split_whitespace();
            let (Some(_), Some("blob"), Some(size)) = (parts.next(), parts.next(), parts.next())
            else {
                stop(&mut child);
                return Err(SourceError::Git {
                    step: "cat-file",
                    message: format!("{oid}: {}", header.trim()),
                });
            };
            let size: usize = size.parse().map_err(|_| SourceError::Git {
                step: "cat-file",
                message: header.clone(),
            })?;
            let mut body = vec![0; size + 1];
            out.read_exact(&mut body)
                .map_err(|e| git_io("cat-file", e))?;
            body.pop();
            blobs.push(body);
        }
        let _ = writer.join();
        let _ = child.wait();
        Ok(blobs)
    }
}

/// Whether `r` is a full commit id.
pub fn is_commit_id(r: &str) -> bool {
    r.len() == 40 && r.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `r` may be an abbreviated commit id (4 to 39 hex digits).
pub fn is_short_commit(r: &str) -> bool {
    (4..40).contains(&r.len()) && r.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Refuses a ref that git would read as an option or that is not a ref name.
fn check_ref(r: &str) -> Result<(), SourceError> {
    let ok = !r.is_empty()
        && r.len() <= 255
        && !r.starts_with('-')
        && !r.contains("..")
        && !r.contains(':')
        && r.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(SourceError::Ref {
            reference: r.to_string(),
        })
    }
}

/// One line of `git ls-tree -r --long` (`mode kind oid size\tpath`), or why it is not one.
pub fn parse_tree_line(line: &str) -> Result<TreeEntry, SourceError> {
    let bad = || SourceError::Git {
        step: "ls-tree",
        message: format!("unexpected line {line:?}"),
    };
    let (meta, path) = line.split_once('\t').ok_or_else(bad)?;
    let mut f = meta.split_whitespace();
    let (Some(mode), Some(_kind), Some(oid), Some(size)) = (f.next(), f.next(), f.next(), f.next())
    else {
        return Err(bad());
    };
    Ok(TreeEntry {
        mode: u32::from_str_radix(mode, 8).map_err(|_| bad())?,
        oid: oid.to_string(),
        size: size.parse().unwrap_or(0),
        path: path.to_string(),
    })
}
