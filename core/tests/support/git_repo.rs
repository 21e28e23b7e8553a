//! Git repositories a test makes: a publisher's work tree pushed to a bare repository
//! `<host>/<owner>/<repo>.git`, and skill folders in it (shared by the core's tests and
//! the end-to-end suite).

use std::path::{Path, PathBuf};
use std::process::Command;

/// `git` for building test repositories, with no user config.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "protocol.file.allow=always",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A publisher's repository: a work tree, pushed to a bare repo `<host>/<owner>/<repo>.git`.
pub struct Repo {
    pub work: PathBuf,
    pub bare: PathBuf,
}

impl Repo {
    pub fn new(host: &Path, owner: &str, name: &str) -> Repo {
        let work = host.join(format!("work-{owner}-{name}"));
        let bare = host.join(owner).join(format!("{name}.git"));
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&bare).unwrap();
        git(&work, &["init", "-q"]);
        git(&bare, &["init", "-q", "--bare"]);
        Repo { work, bare }
    }

    pub fn write(&self, rel: &str, body: &str) -> &Self {
        let p = self.work.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
        self
    }

    /// Commits everything and pushes `main`; returns the commit.
    pub fn commit(&self, msg: &str) -> String {
        git(&self.work, &["add", "-A"]);
        git(&self.work, &["commit", "-q", "-m", msg]);
        git(
            &self.work,
            &[
                "push",
                "-q",
                "--force",
                self.bare.to_str().unwrap(),
                "HEAD:refs/heads/main",
            ],
        );
        git(&self.work, &["rev-parse", "HEAD"])
    }
}

/// A skill folder: SKILL.md plus a skill.yaml with tools and permissions.
pub fn skill_files(repo: &Repo, folder: &str, name: &str, extra_yaml: &str) {
    let prefix = if folder.is_empty() {
        String::new()
    } else {
        format!("{folder}/")
    };
    repo.write(
        &format!("{prefix}SKILL.md"),
        &format!("---\nname: {name}\ndescription: The {name} skill, for tests.\n---\n# {name}\nRun it.\n"),
    );
    repo.write(
        &format!("{prefix}skill.yaml"),
        &format!(
            "name: {name}\ndescription: The {name} skill, for tests.\n{extra_yaml}tools:\n  - name: run\n    description: Runs.\n    command: [\"python3\", \"run.py\"]\n    security: read\n    parameters: {{ type: object }}\n"
        ),
    );
    repo.write(&format!("{prefix}run.py"), "print('{}')\n");
}
