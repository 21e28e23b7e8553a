//! What the spawn bench needs before it measures: the tiny static C tool, the sandbox
//! PATH lookup, the bubblewrap command line of a comparable policy, and the tiny docker
//! image.

use super::*;

/// Compiles the tiny tool into `dir/tiny`, static if the C library allows.
pub(crate) fn build_tiny(dir: &Path) -> Result<(PathBuf, bool, String), String> {
    let src = dir.join("tiny.c");
    let bin = dir.join("tiny");
    std::fs::write(&src, TINY_C).map_err(|e| format!("writing {}: {e}", src.display()))?;
    let gcc = |extra: &[&str]| {
        Command::new("gcc")
            .args(extra)
            .args(["-O2", "-o"])
            .arg(&bin)
            .arg(&src)
            .output()
    };
    let stat = gcc(&["-static"]).map_err(|e| format!("cannot run gcc: {e}"))?;
    let (is_static, note) = if stat.status.success() {
        (true, "static (`gcc -static -O2`)".to_string())
    } else {
        let why = first_line(&stat.stderr);
        let dynamic = gcc(&[]).map_err(|e| format!("cannot run gcc: {e}"))?;
        if !dynamic.status.success() {
            return Err(format!("gcc failed: {}", first_line(&dynamic.stderr)));
        }
        eprintln!("static libc unavailable ({why}); the tiny tool is linked dynamically");
        (
            false,
            format!("DYNAMIC (`gcc -O2`; static libc unavailable: {why})"),
        )
    };
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&src);
    Ok((bin, is_static, note))
}

pub(crate) fn find_on_sandbox_path(program: &str) -> Option<String> {
    env::SANDBOX_PATH
        .split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
        .map(|p| p.to_string_lossy().into_owned())
}

/// The bwrap command line up to the tool's argv, or why bwrap is skipped.
pub(crate) fn bwrap_prefix(skill_dir: &Path) -> Result<Vec<String>, String> {
    match Command::new("bwrap")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let why = "bwrap: skipped, `bwrap` (Debian package bubblewrap) is not installed; \
                       executor/benches/run-spawn-bench.sh installs it";
            println!("{why}");
            return Err(why.into());
        }
        Err(e) => return Err(format!("bwrap: cannot run: {e}")),
    }
    let skill = skill_dir.to_string_lossy().into_owned();
    let mut args: Vec<String> = [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    .map(String::from)
    .to_vec();
    // /bin, /lib, ...: a symlink on merged-/usr hosts (recreated), else a directory (bound).
    for top in ["/bin", "/sbin", "/lib", "/lib64"] {
        if let Ok(target) = std::fs::read_link(top) {
            args.extend([
                "--symlink".into(),
                target.to_string_lossy().into_owned(),
                top.into(),
            ]);
        } else if Path::new(top).is_dir() {
            args.extend(["--ro-bind".into(), top.into(), top.into()]);
        }
    }
    args.extend(
        [
            "--tmpfs",
            "/tmp",
            "--ro-bind",
            &skill,
            &skill,
            "--chdir",
            &skill,
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--clearenv",
            "--setenv",
            "PATH",
        ]
        .map(String::from),
    );
    args.push(env::SANDBOX_PATH.into());
    args.push("--".into());
    Ok(args)
}

/// Builds the FROM scratch image holding the tiny tool; returns the server version.
pub(crate) fn docker_image(skill_dir: &Path) -> Result<String, String> {
    let version = Command::new("docker")
        .args(["version", "--format", "{{.Server.Version}}"])
        .output();
    let version = match version {
        Err(e) => return Err(format!("docker: skipped, cannot run the docker CLI: {e}")),
        Ok(out) if !out.status.success() => {
            return Err(format!(
                "docker: skipped, no docker daemon: {}",
                first_line(&out.stderr)
            ))
        }
        Ok(out) => String::from_utf8_lossy(&out.stdout).trim().to_string(),
    };
    let ctx = tempfile::tempdir().map_err(|e| e.to_string())?;
    std::fs::copy(skill_dir.join("tiny"), ctx.path().join("tiny")).map_err(|e| e.to_string())?;
    std::fs::write(
        ctx.path().join("Dockerfile"),
        "FROM scratch\nCOPY tiny /tiny\nENTRYPOINT [\"/tiny\"]\n",
    )
    .map_err(|e| e.to_string())?;
    let build = Command::new("docker")
        .args(["build", "-q", "-t", DOCKER_IMAGE])
        .arg(ctx.path())
        .output()
        .map_err(|e| format!("docker build: {e}"))?;
    if !build.status.success() {
        return Err(format!(
            "docker: skipped, `docker build` of a FROM scratch image failed: {}",
            first_line(&build.stderr)
        ));
    }
    Ok(version)
}

pub fn tool_version(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "not installed".into())
}

pub(crate) fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(no output)")
        .trim()
        .to_string()
}
