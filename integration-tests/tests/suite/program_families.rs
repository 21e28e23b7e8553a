//! Program families the published skills run, under `skillbox up` (docs/sandbox.md,
//! "Program families"): headless Chromium renders a page its command serves on the call's
//! own loopback and runs the page's JavaScript (the web-app testing skill), from
//! `exec_command` in a context, as an agent runs it, under the skill's default memory
//! limit. A program the machine lacks is reported SKIPPED by name.

use std::path::Path;

use serde_json::{json, Value};

use crate::harness::skills::{open_up, write};
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

/// `exec_command` of `cmd` under the `browser` skill in context `families`.
fn exec(sb: &Skillbox, cmd: &str) -> Value {
    sb.request(
        "POST",
        "/v1/tools/call",
        Some(&json!({
            "tool": "exec_command",
            "context_id": "families",
            "args": {"cmd": cmd, "skill": "browser", "yield_ms": 30000},
        })),
    )
    .json()
}
