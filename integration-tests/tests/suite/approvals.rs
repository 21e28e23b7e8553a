//! Approvals of `sign` and `write` tools: a `write` call waits until an operator decides
//! (API or CLI); a `sign` tool waits at each signature, where the operator sees the
//! payload; both are refused when denied or when nobody decides in time, and run at once
//! for tools the policy auto-approves.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::harness::{Options, Skillbox};

const MESSAGE: &[u8] = b"pay 1 coin to bob";

fn data() -> String {
    STANDARD.encode(MESSAGE)
}

fn verify_signature(sign: &Value) {
    assert_eq!(sign["algorithm"], "ed25519", "{sign}");
    let public_key = STANDARD
        .decode(sign["public_key"].as_str().unwrap())
        .unwrap();
    let signature = STANDARD
        .decode(sign["signature"].as_str().unwrap())
        .unwrap();
    ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &public_key)
        .verify(MESSAGE, &signature)
        .expect("the signature verifies with the returned public key");
}

fn id(approval: &Value) -> String {
    approval["id"].as_str().unwrap().to_string()
}

/// `skillbox approvals approve ID`, which must succeed.
fn approve_by_cli(sb: &Skillbox, id: &str) {
    let out = sb.cli(&["approvals", "approve", id]);
    assert!(
        out.status.success(),
        "skillbox approvals approve: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sign_waits_for_approval_and_signs_once_approved() {
    let sb = Skillbox::start(Options::default());
    let call = sb.call_in_background("signer:sign", json!({"data": data()}));
    let pending = sb.wait_pending("signer", "sign");
    assert_eq!(pending["security"], "sign", "{pending}");
    assert_eq!(
        pending["args"],
        json!({"sign": {"type": "message", "data": data()}}),
        "the operator sees what is signed: {pending}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !call.is_finished(),
        "the signature was made before its approval"
    );

    approve_by_cli(&sb, &id(&pending));
    let r = call.join().unwrap();
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"]["ok"], true, "{r}");
    verify_signature(&r["data"]["result"]);
    let all = sb.approvals(None);
    assert_eq!(all.len(), 1, "one approval for one signature: {all:?}");
    assert_eq!(all[0]["status"], "used", "{all:?}");
}

#[test]
fn sign_is_refused_when_the_operator_denies_it() {
    let sb = Skillbox::start(Options::default());
    let call = sb.call_in_background("signer:sign", json!({"data": data()}));
    let pending = sb.wait_pending("signer", "sign");
    let r = sb.decide(&id(&pending), "deny", Some("not today"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "denied");

    // The tool's sign request gets -32002 with the reason; nothing was signed.
    let r = call.join().unwrap();
    assert_eq!(r["data"]["ok"], false, "{r}");
    assert_eq!(r["data"]["code"], -32002, "{r}");
    let error = r["data"]["message"].as_str().unwrap();
    assert!(error.contains(&id(&pending)), "{error}");
    assert!(error.contains("was denied (not today)"), "{error}");

    let all = sb.approvals(None);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["status"], "denied");

    // A decided approval cannot be decided again.
    let r = sb.decide(&id(&pending), "approve", None);
    assert_ne!(r.status, 200, "{}", r.body);
    assert!(
        r.body.contains("only a pending approval can be decided"),
        "{}",
        r.body
    );
}

/// A tool that passes the refusal of its signature on as its own error: the call is
/// `approval_denied` (in the answer, the calls list and so the metrics), and says what
/// happened: the tool ran, its signature request was denied, nothing was signed.
#[test]
fn sign_denied_in_a_tool_that_fails_on_it_is_recorded_as_approval_denied() {
    let sb = Skillbox::start(Options::default());
    let call = sb.call_in_background("signer:sign_or_fail", json!({"data": data()}));
    let pending = sb.wait_pending("signer", "sign_or_fail");
    let r = sb.decide(&id(&pending), "deny", Some("not today"));
    assert_eq!(r.status, 200, "{}", r.body);
    let r = call.join().unwrap();
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error_kind"], "approval_denied", "{r}");
    assert_eq!(r["approval_id"], id(&pending).as_str(), "{r}");
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains("the tool ran and asked for a signature"),
        "{error}"
    );
    assert!(error.contains("was denied (not today)"), "{error}");
    assert!(error.contains("nothing was signed"), "{error}");
    assert!(!error.contains("did not run"), "{error}");
    let listed = sb.request("GET", "/v1/calls?outcome=approval_denied", None);
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert!(
        listed.body.contains(r["call_id"].as_str().unwrap()),
        "{}",
        listed.body
    );
}

/// A JSON payload with one key twice would let the operator read one amount and a
/// verifier another: the sign request is refused before any approval is asked.
#[test]
fn sign_of_json_with_a_duplicate_key_is_refused_without_asking() {
    let sb = Skillbox::start(Options::default());
    let data = STANDARD.encode(r#"{"to":"bob","amount":1,"amount":1000000}"#);
    let r = sb.call("signer:sign", json!({"data": data}));
    assert_eq!(r["data"]["ok"], false, "{r}");
    assert_eq!(r["data"]["code"], -32602, "{r}");
    let error = r["data"]["message"].as_str().unwrap();
    assert!(
        error.contains("the key \"amount\" appears more than once"),
        "{error}"
    );
    assert!(error.contains("Send JSON with each key once"), "{error}");
    assert!(sb.approvals(None).is_empty(), "an approval was asked");
}

#[test]
fn sign_is_refused_when_nobody_decides_before_the_approval_timeout() {
    let sb = Skillbox::start(Options {
        approvals_timeout_ms: 1500,
        ..Options::default()
    });
    let r = sb.call("signer:sign", json!({"data": data()}));
    assert_eq!(r["data"]["ok"], false, "{r}");
    assert_eq!(r["data"]["code"], -32002, "{r}");
    let error = r["data"]["message"].as_str().unwrap();
    assert!(
        error.contains("got no decision within 1500 ms and expired"),
        "{error}"
    );
    let all = sb.approvals(None);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["status"], "expired", "{all:?}");

    // An expired approval cannot be approved afterwards.
    let out = sb.cli(&["approvals", "approve", all[0]["id"].as_str().unwrap()]);
    assert!(!out.status.success());
}

#[test]
fn write_tool_waits_for_approval_given_with_the_cli() {
    let sb = Skillbox::start(Options::default());
    let call = sb.call_in_background("signer:write_note", json!({"text": "hello"}));
    let pending = sb.wait_pending("signer", "write_note");
    assert_eq!(pending["security"], "write", "{pending}");
    assert_eq!(pending["args"], json!({"text": "hello"}), "{pending}");
    assert!(
        !call.is_finished(),
        "the write call ran before its approval"
    );

    let listed = sb.cli(&["approvals", "list"]);
    assert!(listed.status.success());
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains(&id(&pending)),
        "{}",
        String::from_utf8_lossy(&listed.stdout)
    );
    approve_by_cli(&sb, &id(&pending));

    let r = call.join().unwrap();
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"], json!({"written": "hello"}), "{r}");
    // The approval let exactly this call run.
    let all = sb.approvals(None);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["status"], "used", "{all:?}");
}

#[test]
fn auto_approve_skips_waiting_but_never_lets_a_read_tool_sign() {
    let sb = Skillbox::start(Options {
        auto_approve: vec!["signer:*".to_string()],
        ..Options::default()
    });
    let r = sb.call_ok("signer:sign", json!({"data": data()}));
    assert_eq!(r["ok"], true, "{r}");
    verify_signature(&r["result"]);
    let r = sb.call_ok("signer:write_note", json!({"text": "auto"}));
    assert_eq!(r, json!({"written": "auto"}));
    assert!(sb.approvals(None).is_empty(), "{:?}", sb.approvals(None));

    // A tool declared `security: read` may not use the sign capability at all.
    let r = sb.call_ok("signer:sign_as_read", json!({"data": data()}));
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["code"], -32001, "{r}");
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("only tools with security: sign may sign"),
        "{r}"
    );
}

/// A `write` tool in a context runs on the context's files as they are once it is
/// approved, not as they were when the call came: a file changed and a file added while
/// the call waited are what the tool reads.
#[test]
fn write_tool_in_a_context_sees_the_files_as_they_are_once_approved() {
    let sb = Skillbox::start(Options::default());
    let put = |name: &str, text: &str| {
        let local = sb.ws.join(format!("upload-{name}"));
        std::fs::write(&local, text).unwrap();
        let out = sb.cli(&["files", "put", "approve-1", name, local.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "files put {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    put("note.txt", "as the call came\n");
    let args = |read: &str| json!({"text": "hello", "read": read});
    let call = sb.call_in_context_in_background("approve-1", "signer:write_note", args("note.txt"));
    let pending = sb.wait_pending("signer", "write_note");
    put("note.txt", "as it was approved\n");
    put("late.txt", "added while it waited\n");
    assert!(
        !call.is_finished(),
        "the write call ran before its approval"
    );
    approve_by_cli(&sb, &id(&pending));
    let r = call.join().unwrap();
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"]["read"], "as it was approved\n", "{r}");

    // The file added while it waited is there too, for the next approved call.
    let call = sb.call_in_context_in_background("approve-1", "signer:write_note", args("late.txt"));
    // The first approval was used: the one pending now is this call's.
    let pending = sb.wait_pending("signer", "write_note");
    let r = sb.decide(&id(&pending), "approve", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let r = call.join().unwrap();
    assert_eq!(r["data"]["read"], "added while it waited\n", "{r}");
}
