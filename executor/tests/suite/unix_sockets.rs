//! UNIX sockets in a call (docs/sandbox.md, "UNIX sockets"): a skill that declares
//! `execution.unix_sockets` (or is granted them) may make them, in a call whose `/tmp` is
//! its own scratch and whose `/run`, `/var/run` and `/var/tmp` are empty, with a network
//! namespace of its own. LibreOffice, which needs them for its single-instance pipe,
//! recalculates a spreadsheet and converts a document to PDF there. And what that widening
//! does not allow, each attack asserting the refusal and its reason: a socket file the
//! host keeps in `/tmp` or `/run` (world-writable, so only the call's view keeps it out),
//! an abstract socket of the host, the host's `/tmp` files, and a skill that asks for
//! nothing still gets no UNIX socket at all.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::time::Instant;

use serde_json::{json, Value};
use skillbox_executor::call;
use skillbox_executor::registry::Registry;
use skillbox_executor::sandbox::Sandbox;
use skillbox_protocol::methods::{Envelope, SecretValue, ToolExecuteParams};
use skillbox_protocol::result::ToolResult;

use super::context_files::{runtime, sandbox};
use super::egress::namespaces_available;
use super::harness::fake_core::FakeCore;
use super::harness::{assert_errno, have, unique, Manifest, SkillRoot};

const UNIX: &str = "execution: { unix_sockets: true, timeout_ms: 60000 }";

/// The call `skill:run` with `args`, the operator's grant of UNIX sockets or not.
fn call_of(
    sandbox: &Sandbox,
    root: &SkillRoot,
    skill: &str,
    args: Value,
    grant: bool,
) -> ToolResult {
    let params = ToolExecuteParams {
        call_id: unique("unix"),
        capability_token: SecretValue("tok".into()),
        skill: skill.into(),
        tool: "run".into(),
        args,
        envelope: Envelope {
            granted_unix_sockets: grant,
            ..Envelope::default()
        },
        traceparent: None,
        workdir: None,
        script: None,
    };
    let registry = Registry::load(root.skills());
    runtime().block_on(call::execute(
        sandbox,
        &registry,
        &FakeCore::default(),
        params,
        Instant::now(),
    ))
}

fn data(r: &ToolResult) -> Value {
    assert!(r.success, "{r:?}");
    r.data.clone().unwrap()
}

/// Tries a UNIX socket, a connection to each path of `args.paths` and to the abstract
/// name `args.abstract`, and lists `/tmp` and `/run`.
const PROBE: &str = r#"
def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect(path)
    return "connected"
def listing(d):
    return sorted(os.listdir(d))
reply({
    "socket": attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()),
    "paths": {p: attempt(lambda p=p: connect(p)) for p in args.get("paths", [])},
    "abstract": attempt(lambda: connect("\0" + args["abstract"])) if "abstract" in args else None,
    "tmp": attempt(lambda: listing("/tmp")),
    "run": attempt(lambda: listing("/run")),
    "tmp_is_scratch": os.path.samefile("/tmp", os.environ["TMPDIR"]),
    "own": attempt(lambda: (socket.socket(socket.AF_UNIX).bind("/tmp/own.sock"), "bound")[1]),
})
"#;

#[test]
fn a_skill_that_asks_for_nothing_gets_no_unix_socket() {
    let root = SkillRoot::new();
    root.python_skill_with("plain", PROBE, Manifest::default());
    let out = data(&call_of(&sandbox(), &root, "plain", json!({}), false));
    assert_errno(
        &out["socket"],
        libc::EPERM,
        "socket(AF_UNIX) without unix_sockets",
    );
}

#[test]
fn host_sockets_in_tmp_and_run_and_abstract_ones_are_out_of_reach() {
    if !namespaces_available("host_sockets_in_tmp_and_run_and_abstract_ones_are_out_of_reach") {
        return;
    }
    let name = unique("skillbox-host");
    // World-writable sockets of the host, as the D-Bus system bus and X11 keep theirs: any
    // user id may connect to them, so only the call's view can keep them out.
    let in_tmp = std::path::PathBuf::from(format!("/tmp/{name}.sock"));
    let in_run = std::path::PathBuf::from(format!("/run/{name}.sock"));
    let mut held = Vec::new();
    for path in [&in_tmp, &in_run] {
        held.push(UnixListener::bind(path).unwrap());
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let abstract_name = format!("{name}-abstract");
    let abstract_addr =
        std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
    held.push(UnixListener::bind_addr(&abstract_addr).unwrap());
    let root = SkillRoot::new();
    root.python_skill_with(
        "sockets",
        PROBE,
        Manifest {
            skill: UNIX,
            ..Manifest::default()
        },
    );
    root.python_skill_with("granted", PROBE, Manifest::default());
    let args = json!({"paths": [in_tmp, in_run], "abstract": abstract_name});
    let sandbox = sandbox();
    for (skill, grant) in [("sockets", false), ("granted", true)] {
        let out = data(&call_of(&sandbox, &root, skill, args.clone(), grant));
        assert_eq!(out["socket"]["ok"], true, "{skill}: {out}");
        assert_eq!(
            out["own"]["value"], "bound",
            "{skill}: its own /tmp takes a socket: {out}"
        );
        assert_eq!(out["tmp_is_scratch"], true, "{skill}: {out}");
        for path in [&in_tmp, &in_run] {
            let key = path.to_string_lossy();
            assert_errno(
                &out["paths"][&*key],
                libc::ENOENT,
                &format!("{skill}: the host's {key}"),
            );
        }
        assert_errno(
            &out["abstract"],
            libc::ECONNREFUSED,
            &format!("{skill}: the host's abstract socket"),
        );
        let tmp = out["tmp"]["value"].as_array().unwrap();
        assert!(
            !tmp.iter()
                .any(|f| f.as_str().unwrap().starts_with("skillbox-host")),
            "{out}"
        );
        // /run is an empty folder there (and not readable through Landlock either).
        assert_ne!(out["run"]["ok"], true, "{skill}: {out}");
    }
    for path in [&in_tmp, &in_run] {
        std::fs::remove_file(path).unwrap();
    }
}

/// Copies the documents to the scratch folder and runs `soffice --headless --convert-to`
/// on each, as published office skills do.
const OFFICE: &str = r#"
import shutil, subprocess
home = os.environ["HOME"]
out = {}
for name, target in [("sheet.fods", "csv"), ("text.fodt", "pdf")]:
    shutil.copy(name, home)
    run = subprocess.run(["soffice", "--headless", "--convert-to", target, "--outdir", home,
                          os.path.join(home, name)], capture_output=True, text=True, timeout=50)
    result = os.path.join(home, name.rsplit(".", 1)[0] + "." + target)
    out[target] = {"code": run.returncode, "stderr": run.stderr[-2000:],
                   "head": open(result, "rb").read(64).decode("latin-1") if os.path.exists(result) else None}
reply(out)
"#;

#[test]
fn libreoffice_recalculates_a_spreadsheet_and_converts_a_document_to_pdf() {
    let test = "libreoffice_recalculates_a_spreadsheet_and_converts_a_document_to_pdf";
    if !have("soffice") {
        eprintln!("SKIPPED {test}: no soffice on PATH (apt-get install libreoffice-calc-nogui libreoffice-writer-nogui)");
        return;
    }
    if !namespaces_available(test) {
        return;
    }
    let root = SkillRoot::new();
    let manifest = Manifest {
        skill: "execution: { unix_sockets: true, timeout_ms: 120000, memory_mb: 1024 }",
        ..Manifest::default()
    };
    let dir = root.python_skill_with("office", OFFICE, manifest);
    // The gallery's samples: a workbook whose formula has no cached value (`438` only
    // when recalculated) and a letter.
    let samples = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../integration-tests/gallery/office/samples");
    std::fs::copy(samples.join("budget.fods"), dir.join("sheet.fods")).unwrap();
    std::fs::copy(samples.join("letter.fodt"), dir.join("text.fodt")).unwrap();
    for file in ["sheet.fods", "text.fodt"] {
        std::fs::set_permissions(dir.join(file), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let out = data(&call_of(&sandbox(), &root, "office", json!({}), false));
    assert_eq!(
        out["csv"]["head"], "19,23,438\n",
        "the formula recalculated: {out}"
    );
    assert!(
        out["pdf"]["head"]
            .as_str()
            .is_some_and(|h| h.starts_with("%PDF-")),
        "a PDF came out: {out}"
    );
}
