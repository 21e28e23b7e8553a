//! The test workspace: notes to read, a file outside it with a symlink pointing there, and
//! the test skills (copies of `examples/workspace/skills/echo` and `word-count`, plus skills written
//! here whose network permissions name the ports of this run's test servers).
//!
//! Every folder is 0755 and every file o+r: the executor runs tools as another user.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The content of `notes/todo.md`.
pub const TODO: &str = "remember the milk\n";
/// The content of the file outside the workspace that `notes/escape.md` links to.
pub const OUTSIDE: &str = "a secret outside the workspace\n";

/// One python script for every `jsonrpc` test tool, dispatching on the tool name. A
/// capability answer is returned as the tool's result, `{"ok": true, "result": ...}` or
/// `{"ok": false, "code": ..., "message": ...}`, so a test sees the exact JSON-RPC error.
const TOOL_PY: &str = r#""""skillbox end-to-end test tool (jsonrpc stdio protocol)."""
import json
import os
import sys
import time

NEXT = [0]


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def capability(method, params):
    NEXT[0] += 1
    send({"jsonrpc": "2.0", "id": NEXT[0], "method": method, "params": params})
    reply = json.loads(sys.stdin.readline())
    if "error" in reply:
        return {"ok": False, "code": reply["error"]["code"], "message": reply["error"]["message"]}
    return {"ok": True, "result": reply["result"]}


request = json.loads(sys.stdin.readline())
tool = request["params"]["tool"]
args = request["params"]["args"]
if tool == "fetch":
    result = capability("fetch", {"url": args["url"]})
elif tool == "read":
    result = capability("readFile", {"path": args["path"]})
elif tool in ("sign", "sign_as_read"):
    result = capability("sign", {"type": "message", "data": args["data"]})
elif tool == "sign_or_fail":
    # Passes a refused signature on as its own error, as most tools would.
    answer = capability("sign", {"type": "message", "data": args["data"]})
    if not answer["ok"]:
        send({"jsonrpc": "2.0", "id": 0, "error": {"code": answer["code"], "message": answer["message"]}})
        sys.exit(0)
    result = answer["result"]
elif tool == "write_note":
    result = {"written": args["text"]}
    if "read" in args:
        # A file of the call's working folder (its context's files), as the tool saw it.
        with open(args["read"]) as f:
            result["read"] = f.read()
elif tool == "sleep":
    time.sleep(args["seconds"])
    result = {"slept": args["seconds"]}
else:
    send({"jsonrpc": "2.0", "id": 0, "error": {"code": -32601, "message": "unknown tool " + tool}})
    sys.exit(0)
send({"jsonrpc": "2.0", "id": 0, "result": result})
"#;

/// A `plain` shell tool that prints which of two env names reached it.
const ENV_SH: &str = r#"#!/bin/sh
# plain protocol: prints the two env names the secrets test looks for.
printf 'API_KEY=%s\n' "${API_KEY:-<unset>}"
printf 'OTHER_SECRET=%s\n' "${OTHER_SECRET:-<unset>}"
printf 'ARGS=%s\n' "$(cat "$SKILLBOX_ARGS_FILE")"
"#;

/// The JavaScript skill's module: `context.fetch` through the core.
const INDEX_JS: &str = r#"// skillbox end-to-end test skill (OwliaBot package.json format).
export const tools = {
  get: async ({ url }, context) => {
    try {
      const res = await context.fetch(url);
      return { ok: true, status: res.status, body: res.body, skill: context.meta.skill };
    } catch (e) {
      return { ok: false, code: e.code, message: e.message };
    }
  },
};
"#;

fn url_schema() -> &'static str {
    "    parameters:\n      type: object\n      properties: { url: { type: string } }\n      required: [url]\n"
}

/// Writes `text` to `path`, creating its folders.
pub fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).expect("create folder");
    }
    fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// Sets the mode of `path`.
pub fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

/// Copies the folder `from` to `to`, recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create folder");
    for entry in fs::read_dir(from).expect("read example skill") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).expect("copy example file");
        }
    }
}

/// Opens every folder (0755) and file (0644, scripts 0755) under `dir` to other users.
pub fn open_up(dir: &Path) {
    chmod(dir, 0o755);
    for entry in fs::read_dir(dir).expect("read folder").flatten() {
        let path = entry.path();
        let kind = entry.file_type().expect("file type");
        if kind.is_symlink() {
            continue;
        }
        if kind.is_dir() {
            open_up(&path);
        } else {
            let script = path
                .extension()
                .is_some_and(|e| e == "py" || e == "sh" || e == "js");
            chmod(&path, if script { 0o755 } else { 0o644 });
        }
    }
}

/// Writes a `jsonrpc` python skill `name` into `skills` whose one tool `read` asks the core
/// for `readFile {path}`, declaring `permissions.workspace.read: globs`; opens it to the
/// executor's per-call users.
pub fn write_reader_skill(skills: &Path, name: &str, globs: &[&str]) {
    let dir = skills.join(name);
    write(&dir.join("scripts/tool.py"), TOOL_PY);
    let globs = serde_json::to_string(globs).expect("globs");
    write(
        &dir.join("skill.yaml"),
        &format!(
            "name: {name}\nversion: 0.1.0\ndescription: skillbox end-to-end test skill {name} that reads workspace files\n\
             permissions:\n  workspace: {{ read: {globs} }}\nexecution:\n  timeout_ms: 60000\ntools:\n\
             \x20 - name: read\n    description: reads a workspace file through the core\n\
             \x20   command: [\"python3\", \"scripts/tool.py\"]\n    security: read\n\
             \x20   parameters:\n      type: object\n      properties: {{ path: {{ type: string }} }}\n      required: [path]\n"
        ),
    );
    open_up(&dir);
}

/// Writes the workspace `ws` (and `root/outside`) for test servers on `allowed` (allow-
/// listed by the config) and `private` (declared by the `net` skill only).
pub fn write_workspace(root: &Path, ws: &Path, allowed: u16, private: u16) {
    let skills = ws.join("skills");
    fs::create_dir_all(&skills).expect("create skills");
    write(&ws.join("notes/todo.md"), TODO);
    write(&ws.join("private.txt"), "not covered by any glob\n");
    write(&root.join("outside/secret.txt"), OUTSIDE);
    std::os::unix::fs::symlink(root.join("outside/secret.txt"), ws.join("notes/escape.md"))
        .expect("symlink");

    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/workspace/skills");
    for name in ["echo", "word-count"] {
        copy_dir(&examples.join(name), &skills.join(name));
    }

    let tool = |name: &str, security: &str, params: &str| {
        format!(
            "  - name: {name}\n    description: test tool {name}\n    command: [\"python3\", \"scripts/tool.py\"]\n    security: {security}\n{}",
            params
        )
    };
    let python_skill = |name: &str, permissions: &str, tools: &[String]| {
        let dir = skills.join(name);
        write(&dir.join("scripts/tool.py"), TOOL_PY);
        write(
            &dir.join("skill.yaml"),
            &format!(
                "name: {name}\nversion: 0.1.0\ndescription: skillbox end-to-end test skill {name}\n\
                 {permissions}execution:\n  timeout_ms: 60000\ntools:\n{}",
                tools.concat()
            ),
        );
    };

    python_skill(
        "net",
        &format!(
            "permissions:\n  network: [\"http://127.0.0.1:{allowed}\", \"http://127.0.0.1:{private}\"]\n"
        ),
        &[tool("fetch", "read", url_schema())],
    );
    let path_schema = "    parameters:\n      type: object\n      properties: { path: { type: string } }\n      required: [path]\n";
    python_skill(
        "files",
        "permissions:\n  workspace: { read: [\"notes/**\"] }\n",
        &[tool("read", "read", path_schema)],
    );
    let data_schema = "    parameters:\n      type: object\n      properties: { data: { type: string } }\n      required: [data]\n";
    let text_schema = "    parameters:\n      type: object\n      properties: { text: { type: string } }\n      required: [text]\n";
    python_skill(
        "signer",
        "",
        &[
            tool("sign", "sign", data_schema),
            tool("sign_or_fail", "sign", data_schema),
            tool("sign_as_read", "read", data_schema),
            tool("write_note", "write", text_schema),
        ],
    );
    let seconds_schema = "    parameters:\n      type: object\n      properties: { seconds: { type: number } }\n      required: [seconds]\n";
    python_skill("slow", "", &[tool("sleep", "read", seconds_schema)]);

    // Its calls run in one-off containers, which need the core to reach a Docker engine.
    let boxed = skills.join("boxed");
    write(&boxed.join("scripts/tool.py"), TOOL_PY);
    write(
        &boxed.join("skill.yaml"),
        "name: boxed\nversion: 0.1.0\ndescription: skillbox end-to-end test skill in a per-call container\n\
         execution:\n  sandbox: container\ntools:\n  - name: sleep\n    description: sleeps\n\
         \x20   command: [\"python3\", \"scripts/tool.py\"]\n",
    );

    let vault = skills.join("vault");
    write(&vault.join("scripts/env.sh"), ENV_SH);
    write(
        &vault.join("skill.yaml"),
        "name: vault\nversion: 0.1.0\ndescription: skillbox end-to-end test skill that prints its env\n\
         permissions:\n  env: [API_KEY]\ntools:\n  - name: env\n    description: prints env names\n\
         \x20   command: [\"sh\", \"scripts/env.sh\"]\n    protocol: plain\n",
    );

    let js = skills.join("jsnet");
    write(&js.join("index.js"), INDEX_JS);
    let package = serde_json::json!({
        "name": "jsnet",
        "version": "0.1.0",
        "description": "skillbox end-to-end test skill in JavaScript: fetches through context.fetch",
        "type": "module",
        "main": "index.js",
        "owliabot": {
            "permissions": { "network": [format!("http://127.0.0.1:{allowed}")] },
            "tools": [{
                "name": "get",
                "description": "GET a url through the core",
                "parameters": {
                    "type": "object",
                    "properties": { "url": { "type": "string" } },
                    "required": ["url"]
                },
                "security": { "level": "read" },
                "timeout": 30000
            }]
        }
    });
    write(
        &js.join("package.json"),
        &serde_json::to_string_pretty(&package).expect("package.json"),
    );

    chmod(root, 0o755);
    open_up(ws);
    open_up(&root.join("outside"));
}
