//! Node dependencies a skill brings (`package.json`, `package-lock.json`), under
//! `skillbox up`, against an npm registry stand-in on 127.0.0.1 serving tarballs the test
//! builds itself (`harness/npm_registry.rs`), named `registry.test` by `[egress] resolve`:
//!
//! - a skill with a `package.json` is unavailable until built, then its node script
//!   `require()`s the package from an environment of its own (`NODE_PATH`), which its
//!   programs cannot write;
//! - a package's install script does not run unless the operator allows it for that
//!   skill (`[grants.<skill>] allow_install_scripts`);
//! - a skill with Python requirements too gets both in one environment (the test index
//!   of `deps.rs`);
//! - a lock is installed exactly: its integrity is recorded, and a lock whose integrity
//!   differs from the tarball's fails the build with npm's reason;
//! - the gallery's doc-builder builds a letter with its package in a context.

use std::path::Path;
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::harness::npm_registry::{self, integrity_of, Package, Registry};
use crate::harness::skills::{open_up, write};
use crate::harness::{Options, Skillbox};

/// `skbleft`, a plain package, and `skbhook`, whose `postinstall` marks its folder.
fn packages() -> Vec<Package> {
    vec![
        Package {
            name: "skbleft".into(),
            version: "1.0.0".into(),
            files: vec![(
                "index.js".into(),
                "module.exports = { value: 'left-1.0.0' };\n".into(),
            )],
            scripts: json!({}),
        },
        Package {
            name: "skbhook".into(),
            version: "1.0.0".into(),
            files: vec![(
                "index.js".into(),
                "module.exports = require('fs').existsSync(__dirname + '/ran') ? 'RAN' : 'NOT-RUN';\n"
                    .into(),
            )],
            scripts: json!({"postinstall": "node -e \"require('fs').writeFileSync('ran', 'yes')\""}),
        },
        // What the gallery's doc-builder builds its letter with.
        Package {
            name: "skbdoc".into(),
            version: "1.2.0".into(),
            files: vec![("index.js".into(), SKBDOC.into())],
            scripts: json!({}),
        },
    ]
}

/// `skbdoc`: a letter as an OpenDocument text file (flat XML); the compose suite serves the
/// same file.
const SKBDOC: &str = include_str!("../../packages/skbdoc/index.js");

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| npm_registry::start(packages()))
}

/// A skill in `dir`: a SKILL.md, a `package.json` asking for both packages, a lock when
/// given, and `scripts/show.js`, which prints what it `require()`s.
fn write_node_skill(dir: &Path, name: &str, lock: Option<Value>) {
    write(
        &dir.join("SKILL.md"),
        &format!("---\nname: {name}\ndescription: Shows its packages.\n---\nRun `node scripts/show.js`.\n"),
    );
    let deps = json!({"skbleft": "^1.0.0", "skbhook": "1.0.0"});
    write(
        &dir.join("package.json"),
        &json!({"name": name, "version": "1.0.0", "dependencies": deps}).to_string(),
    );
    if let Some(lock) = lock {
        write(&dir.join("package-lock.json"), &lock.to_string());
    }
    write(
        &dir.join("scripts/show.js"),
        "console.log(require('skbleft').value + ' ' + require('skbhook'));\n",
    );
    open_up(dir);
}

/// npm's lock of `name`'s two packages, with `integrity` for `skbleft`.
fn lock(name: &str, left_integrity: &str) -> Value {
    let port = registry().port;
    let hook = &packages()[1];
    let url = |p: &str| format!("http://registry.test:{port}/{p}/-/{p}-1.0.0.tgz");
    json!({
        "name": name, "version": "1.0.0", "lockfileVersion": 3, "requires": true,
        "packages": {
            "": {"name": name, "version": "1.0.0",
                 "dependencies": {"skbleft": "^1.0.0", "skbhook": "1.0.0"}},
            "node_modules/skbleft": {"version": "1.0.0", "resolved": url("skbleft"),
                                     "integrity": left_integrity},
            "node_modules/skbhook": {"version": "1.0.0", "resolved": url("skbhook"),
                                     "integrity": hook.integrity(), "hasInstallScript": true},
        }
    })
}

fn prepare(ws: &Path) {
    let port = registry().port;
    let skills = ws.join("skills");
    let left = packages()[0].integrity();
    write_node_skill(&skills.join("node-one"), "node-one", None);
    write_node_skill(&skills.join("node-scripts"), "node-scripts", None);
    let good = lock("lock-good", &left);
    write_node_skill(&skills.join("lock-good"), "lock-good", Some(good));
    let both = skills.join("node-and-python");
    write_node_skill(&both, "node-and-python", None);
    write(&both.join("scripts/requirements.txt"), "skbdemo==1.0\n");
    write(
        &both.join("scripts/show.py"),
        "import skbdemo\nprint(skbdemo.VALUE)\n",
    );
    open_up(&both);
    let wrong = integrity_of(b"not the tarball");
    let bad = lock("lock-bad", &wrong);
    write_node_skill(&skills.join("lock-bad"), "lock-bad", Some(bad));
    let mut toml = std::fs::read_to_string(ws.join("skillbox.toml")).unwrap();
    let index = super::deps::index().port;
    toml = toml.replacen(
        "allow_private = [",
        &format!("allow_private = [\"registry.test:{port}\", \"index.test:{index}\", "),
        1,
    );
    toml.push_str(&format!(
        "\n[deps]\nnpm_registry = \"http://registry.test:{port}/\"\nbuild_on_load = false\n\
         index_url = \"http://index.test:{index}/simple\"\n\n\
         [egress]\nresolve = {{ \"registry.test\" = \"127.0.0.1\", \"index.test\" = \"127.0.0.1\" }}\n\n\
         [grants.node-scripts]\nallow_install_scripts = true\n"
    ));
    std::fs::write(ws.join("skillbox.toml"), toml).unwrap();
}

fn build(sb: &Skillbox, skill: &str) -> Value {
    sb.request("POST", &format!("/v1/skills/{skill}/deps"), None)
        .json()
}

/// What `scripts/show.js` of `skill` printed, or the whole answer when it did not run.
fn show(sb: &Skillbox, skill: &str) -> String {
    run_script(sb, skill, "show.js")
}

/// What `scripts/<script>` of `skill` printed, or the whole answer when it did not run.
fn run_script(sb: &Skillbox, skill: &str, script: &str) -> String {
    let r = sb
        .request(
            "POST",
            "/v1/tools/call",
            Some(
                &json!({"tool": "run_skill_script", "context_id": format!("node-{skill}"),
                         "args": {"name": skill, "script": script}}),
            ),
        )
        .json();
    match r["data"]["stdout"].as_str() {
        Some(out) if r["success"] == true => out.trim().to_string(),
        _ => r.to_string(),
    }
}

#[test]
fn a_node_skill_requires_its_built_packages_and_install_scripts_run_only_when_allowed() {
    let sb = Skillbox::start(Options {
        prepare: Some(prepare),
        ..Options::default()
    });
    let before = show(&sb, "node-one");
    assert!(before.contains("not built"), "{before}");

    // Built from the registry: each package recorded with its integrity; the script
    // finds them; skbhook's postinstall did not run.
    let built = build(&sb, "node-one");
    assert_eq!(built["ok"], true, "{built}");
    let installed = built["packages"].as_array().unwrap();
    assert_eq!(installed.len(), 2, "{built}");
    assert_eq!(installed[1]["name"], "skbleft", "{built}");
    assert_eq!(installed[1]["ecosystem"], "npm", "{built}");
    let left = packages()[0].integrity();
    assert_eq!(installed[1]["integrity"], json!(left), "{built}");
    assert_eq!(show(&sb, "node-one"), "left-1.0.0 NOT-RUN");

    // The operator allows install scripts for this skill: the postinstall ran in the build.
    assert_eq!(build(&sb, "node-scripts")["ok"], true);
    assert_eq!(show(&sb, "node-scripts"), "left-1.0.0 RAN");

    // Python requirements and Node packages of one skill: one environment holds both.
    let built = build(&sb, "node-and-python");
    assert_eq!(built["ok"], true, "{built}");
    let names: Vec<&str> = (built["packages"].as_array().unwrap().iter())
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["skbdemo", "skbhook", "skbleft"], "{built}");
    assert_eq!(run_script(&sb, "node-and-python", "show.py"), "1.0");
    assert_eq!(show(&sb, "node-and-python"), "left-1.0.0 NOT-RUN");

    // The environment is the skill's to read, not to write.
    let r = sb
        .request(
            "POST",
            "/v1/tools/call",
            Some(&json!({"tool": "exec_command", "context_id": "node-exec",
                         "args": {"skill": "node-one", "yield_ms": 20000,
                                  "cmd": "node -e \"console.log(require('skbleft').value)\"; touch \"$NODE_PATH/x\" && echo WROTE || echo READONLY; touch \"$NODE_PATH/skbleft/index.js\" && echo WROTE || echo READONLY"}})),
        )
        .json();
    let out = r["data"]["output"].as_str().unwrap_or_default();
    assert!(
        out.contains("left-1.0.0") && out.contains("READONLY") && !out.contains("WROTE"),
        "{r}"
    );
}

#[test]
fn a_lock_is_installed_exactly_and_a_wrong_integrity_is_refused() {
    let sb = Skillbox::start(Options {
        prepare: Some(prepare),
        ..Options::default()
    });
    let built = build(&sb, "lock-good");
    assert_eq!(built["ok"], true, "{built}");
    let left = &built["packages"][1];
    assert_eq!(
        left["integrity"],
        json!(packages()[0].integrity()),
        "{built}"
    );
    assert_eq!(show(&sb, "lock-good"), "left-1.0.0 NOT-RUN");

    let built = build(&sb, "lock-bad");
    assert_eq!(built["ok"], false, "{built}");
    let tail = built["log_tail"].as_str().unwrap_or_default();
    assert!(tail.contains("EINTEGRITY"), "{built}");
    let detail = sb.request("GET", "/v1/skills/lock-bad", None).json();
    let problem = detail["dependencies"]["problem"]
        .as_str()
        .unwrap_or_default();
    assert!(problem.contains("failed to build"), "{detail}");
    assert!(
        show(&sb, "lock-bad").contains("failed to build"),
        "the skill stays unavailable"
    );
}

/// The gallery's doc-builder (`integration-tests/gallery/doc-builder`, published-shaped: a
/// SKILL.md and a `package.json`), its package built from the registry as on load, then
/// its Node script builds a letter with it in a context, as an agent runs it; the letter
/// comes back as a file of the context.
#[test]
fn the_gallerys_doc_builder_builds_a_letter_with_its_npm_package() {
    fn prepare_gallery(ws: &Path) {
        let port = registry().port;
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("gallery/doc-builder");
        let to = ws.join("skills/doc-builder");
        crate::harness::skills::copy_dir(&from, &to);
        open_up(&to);
        let mut toml = std::fs::read_to_string(ws.join("skillbox.toml")).unwrap();
        toml = toml.replacen(
            "allow_private = [",
            &format!("allow_private = [\"registry.test:{port}\", "),
            1,
        );
        toml.push_str(&format!(
            "\n[deps]\nnpm_registry = \"http://registry.test:{port}/\"\nbuild_on_load = false\n\n\
             [egress]\nresolve = {{ \"registry.test\" = \"127.0.0.1\" }}\n"
        ));
        std::fs::write(ws.join("skillbox.toml"), toml).unwrap();
    }
    let sb = Skillbox::start(Options {
        prepare: Some(prepare_gallery),
        ..Options::default()
    });
    let built = build(&sb, "doc-builder");
    assert_eq!(built["ok"], true, "{built}");
    assert_eq!(built["packages"][0]["name"], "skbdoc", "{built}");
    let r = sb
        .request(
            "POST",
            "/v1/tools/call",
            Some(&json!({"tool": "run_skill_script", "context_id": "letters",
                         "args": {"name": "doc-builder", "script": "build.js",
                                  "args": ["Dear reader & friends"]}})),
        )
        .json();
    assert_eq!(r["success"], true, "{r}\n{}", sb.logs());
    let said: Value = serde_json::from_str(r["data"]["stdout"].as_str().unwrap().trim()).unwrap();
    assert_eq!(said["builder"], "1.2.0", "{said}");
    let letter = sb
        .request("GET", "/v1/contexts/letters/files/letter.fodt", None)
        .body;
    assert!(letter.starts_with("<?xml"), "{letter}");
    assert!(
        letter.contains("<text:p>Dear reader &amp; friends</text:p>"),
        "{letter}"
    );
}
