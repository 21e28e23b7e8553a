//! Program families the published skills run, under `skillbox up` (docs/sandbox.md,
//! "Program families"): headless Chromium renders a page its command serves on the call's
//! own loopback and runs the page's JavaScript (the web-app testing skill), from
//! `exec_command` in a context, as an agent runs it, under the skill's default memory
//! limit. LibreOffice recalculates a spreadsheet for a published-shaped office skill the
//! operator granted UNIX sockets, and cannot start without the grant. A program the
//! machine lacks is reported SKIPPED by name.

use std::path::Path;

use serde_json::{json, Value};

use crate::harness::skills::{copy_dir, open_up, write};
use crate::harness::{free_port, on_sandbox_path, Options, Skillbox};

/// The page Chromium renders: its script replaces the static text, so the marker is in
/// the DOM only when the browser ran the page.
const PAGE_HTML: &str = "<html><body><p id=\"m\">static text</p>\
<script>document.getElementById('m').textContent = 'rendered by script ' + (6 * 7);</script>\
</body></html>\n";

/// The browser and the flags it runs with in the tool sandbox (docs/sandbox.md, "Headless
/// Chromium").
const CHROMIUM: &str = "chromium-headless-shell --no-sandbox --no-zygote --in-process-gpu \
                        --disable-gpu --disable-dev-shm-usage";

/// A skill shaped like the web-app testing skill: no tools, a page to serve, and a
/// loopback of its own for the server its command starts; the default memory limit.
fn browser_skill(ws: &Path) {
    let dir = ws.join("skills/browser");
    write(
        &dir.join("skill.yaml"),
        "name: browser\ndescription: Checks a web app it serves with a headless browser\n\
         execution: { loopback: true }\ntools: []\n",
    );
    write(&dir.join("samples/index.html"), PAGE_HTML);
    open_up(&dir);
}

/// Headless Chromium (Debian's `chromium-headless-shell`) loads a page from a server its
/// command started on the call's own loopback and runs the page's script: the DOM it dumps
/// holds the text the script wrote. The flags are the family's (docs/sandbox.md): its own
/// sandbox off (it needs user namespaces, which ours refuses, and ours confines the whole
/// browser), no zygote and the GPU thread in the browser (their start-up checks read
/// `/proc/self` of a child process, which the tool sandbox does not grant), no GPU, and
/// shared memory in `TMPDIR` rather than `/dev/shm` (not granted).
#[test]
fn chromium_renders_a_page_served_on_the_calls_loopback_and_runs_its_script() {
    if !on_sandbox_path("chromium-headless-shell") {
        eprintln!("SKIPPED chromium-headless-shell: not installed on this machine");
        return;
    }
    let sb = Skillbox::start(Options {
        prepare: Some(browser_skill),
        ..Options::default()
    });
    let port = free_port();
    let cmd = format!(
        "mkdir -p site && cp \"$SKILLBOX_SKILL_DIR/samples/index.html\" site/ && \
         (python3 -m http.server {port} --bind 127.0.0.1 --directory site >/dev/null 2>&1 &) && \
         python3 -c 'import socket, time\n\
         for _ in range(200):\n\
         \x20   try: socket.create_connection((\"127.0.0.1\", {port}), 1).close(); break\n\
         \x20   except OSError: time.sleep(0.05)' && \
         {CHROMIUM} --dump-dom http://127.0.0.1:{port}/ 2>/dev/null"
    );
    let r = exec(&sb, &cmd);
    assert_eq!(r["success"], true, "{r}\n{}", sb.logs());
    assert_eq!(r["data"]["exit_code"], 0, "{r}");
    let output = r["data"]["output"].as_str().unwrap_or_default();
    assert!(output.contains("rendered by script 42"), "{r}");
    assert!(
        !output.contains("static text"),
        "the script did not run: {r}"
    );
}

/// With its own sandbox off, the browser is still held by ours: loading
/// `file:///etc/passwd` (world-readable, so only Landlock refuses it) fails with
/// `net::ERR_ACCESS_DENIED`, and no line of the file reaches the output.
#[test]
fn chromium_without_its_own_sandbox_cannot_read_host_files() {
    if !on_sandbox_path("chromium-headless-shell") {
        eprintln!("SKIPPED chromium-headless-shell: not installed on this machine");
        return;
    }
    let sb = Skillbox::start(Options {
        prepare: Some(browser_skill),
        ..Options::default()
    });
    let r = exec(&sb, &format!("{CHROMIUM} --dump-dom file:///etc/passwd"));
    assert_eq!(r["success"], true, "{r}\n{}", sb.logs());
    let output = r["data"]["output"].as_str().unwrap_or_default();
    assert!(
        output.contains("Page load failed: net::ERR_ACCESS_DENIED"),
        "{r}"
    );
    assert!(
        !output.contains("root:"),
        "the browser read /etc/passwd: {r}"
    );
}

/// The script of a skill shaped like the published spreadsheet skill: recalculates the
/// workbook it is given with LibreOffice and prints the values.
const RECALC: &str = r#"import os, subprocess, sys, tempfile
out = tempfile.mkdtemp()
run = subprocess.run(["soffice", "--headless", "--convert-to", "csv", "--outdir", out, sys.argv[1]],
                     capture_output=True, text=True, timeout=90)
if run.returncode != 0:
    sys.exit("soffice failed (%d): %s" % (run.returncode, run.stderr.strip()))
name = os.path.splitext(os.path.basename(sys.argv[1]))[0] + ".csv"
print(open(os.path.join(out, name)).read().strip())
"#;

/// A published-shaped office skill: a SKILL.md with name and description only (no
/// skillbox keys), a script and a sample workbook.
fn sheets_skill(ws: &Path) {
    let dir = ws.join("skills/sheets");
    write(
        &dir.join("SKILL.md"),
        "---\nname: sheets\ndescription: Recalculates spreadsheet formulas with LibreOffice\n---\n\
         Run `python3 scripts/recalc.py FILE` to recalculate a workbook.\n",
    );
    write(&dir.join("scripts/recalc.py"), RECALC);
    // The gallery's workbook: a formula with no cached value, `438` only when recalculated.
    let workbook = Path::new(env!("CARGO_MANIFEST_DIR")).join("gallery/office/samples/budget.fods");
    write(
        &dir.join("samples/sheet.fods"),
        &std::fs::read_to_string(workbook).unwrap(),
    );
    open_up(&dir);
}

/// LibreOffice recalculates a workbook for the published-shaped `sheets` skill once the
/// operator grants it UNIX sockets (its single-instance pipe needs one, in a `/tmp` of
/// the call's own: docs/sandbox.md, "UNIX sockets"); without the grant it cannot start.
#[test]
fn libreoffice_recalculates_a_workbook_for_an_office_skill_granted_unix_sockets() {
    if !on_sandbox_path("soffice") {
        eprintln!("SKIPPED soffice: not installed on this machine");
        return;
    }
    let cmd = "cp \"$SKILLBOX_SKILL_DIR/samples/sheet.fods\" . && \
               python3 \"$SKILLBOX_SKILL_DIR/scripts/recalc.py\" sheet.fods";
    for granted in [true, false] {
        let sb = Skillbox::start(Options {
            prepare: Some(sheets_skill),
            extra_toml: if granted {
                "[grants.sheets]\nunix_sockets = true\n".into()
            } else {
                String::new()
            },
            ..Options::default()
        });
        let r = exec_as(&sb, "sheets", cmd);
        assert_eq!(r["success"], true, "{r}\n{}", sb.logs());
        let output = r["data"]["output"].as_str().unwrap_or_default();
        if granted {
            assert_eq!(r["data"]["exit_code"], 0, "{r}");
            assert_eq!(output.trim(), "19,23,438", "{r}");
        } else {
            assert_ne!(
                r["data"]["exit_code"], 0,
                "soffice started without UNIX sockets: {r}"
            );
            assert!(!output.contains("438"), "{r}");
        }
    }
}

/// The gallery's skills (`integration-tests/gallery`), called through the gateway as a bot
/// calls them: LibreOffice recalculates a workbook and converts a letter to PDF (`office`,
/// which declares `execution.unix_sockets`), a 200 MiB file is written and read back
/// (`media`), a Node script builds a report under the default 256 MiB and one allocating
/// past it is stopped as `resource_limit` (`node-report`), a Java program run from its
/// source builds a report under the same limit and one allocating past it is stopped the
/// same way (`jvm-report`), and headless Chromium checks an app its script serves on the
/// call's own loopback (`webapp`). The compose suite runs the same skills in the executor's
/// container. A program the machine lacks is reported SKIPPED by name.
#[test]
fn the_gallerys_skills_do_their_jobs_under_up() {
    fn gallery(ws: &Path) {
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("gallery");
        for skill in ["office", "media", "node-report", "jvm-report", "webapp"] {
            let to = ws.join("skills").join(skill);
            copy_dir(&from.join(skill), &to);
            open_up(&to);
        }
    }
    let sb = Skillbox::start(Options {
        prepare: Some(gallery),
        ..Options::default()
    });
    let call = |tool: &str| -> Value {
        sb.request(
            "POST",
            "/v1/tools/call",
            Some(&json!({"tool": tool, "args": {}})),
        )
        .json()
    };
    let printed = |r: &Value| -> Value {
        assert_eq!(r["success"], true, "{r}\n{}", sb.logs());
        serde_json::from_str(r["data"]["stdout"].as_str().unwrap_or("{}")).unwrap()
    };
    if on_sandbox_path("soffice") {
        let out = printed(&call("office:convert"));
        assert_eq!(out["csv"]["head"], "19,23,438\n", "{out}");
        assert!(
            out["pdf"]["head"]
                .as_str()
                .is_some_and(|h| h.starts_with("%PDF-")),
            "{out}"
        );
    } else {
        eprintln!("SKIPPED office:convert: soffice not installed on this machine");
    }
    let out = printed(&call("media:roundtrip"));
    assert_eq!(out, json!({"size": 200 * 1024 * 1024, "same": true}));
    let out = printed(&call("node-report:build"));
    assert_eq!(out["rows"], 20000, "{out}");
    let stopped_at_the_limit = |tool: &str| {
        let r = call(tool);
        assert_eq!(r["success"], false, "{tool}: {r}");
        assert_eq!(r["error_kind"], "resource_limit", "{tool}: {r}");
        assert!(
            r["error"]
                .as_str()
                .unwrap_or_default()
                .contains("memory limit of 256 MiB"),
            "{tool}: {r}"
        );
    };
    stopped_at_the_limit("node-report:hog");
    // The source launcher is the JDK's (javac's module): a JRE alone cannot run it.
    if on_sandbox_path("javac") {
        let out = printed(&call("jvm-report:build"));
        assert_eq!(out["rows"], 20000, "{out}");
        stopped_at_the_limit("jvm-report:hog");
    } else {
        eprintln!("SKIPPED jvm-report: no JDK (javac) on this machine");
    }
    if on_sandbox_path("chromium-headless-shell") {
        let out = printed(&call("webapp:check"));
        assert_eq!(out["rendered"], true, "{out}");
        assert_eq!(out["static_left"], false, "{out}");
        assert_eq!(out["clicks"], "2", "{out}");
    } else {
        eprintln!("SKIPPED webapp:check: chromium-headless-shell not installed on this machine");
    }
}

/// `exec_command` of `cmd` under the `browser` skill in context `families`.
fn exec(sb: &Skillbox, cmd: &str) -> Value {
    exec_as(sb, "browser", cmd)
}

/// `exec_command` of `cmd` under `skill` in context `families`.
fn exec_as(sb: &Skillbox, skill: &str, cmd: &str) -> Value {
    sb.request(
        "POST",
        "/v1/tools/call",
        Some(&json!({
            "tool": "exec_command",
            "context_id": "families",
            "args": {"cmd": cmd, "skill": skill, "yield_ms": 30000},
        })),
    )
    .json()
}
