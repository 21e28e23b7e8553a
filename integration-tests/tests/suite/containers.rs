//! `execution.sandbox: container` where the core has no Docker engine: the call is refused,
//! never run in the process sandbox instead (the compose suite runs such calls for real).

use serde_json::json;

use crate::harness::{Options, Skillbox};

#[test]
fn container_sandbox_call_is_refused_unavailable_when_the_core_has_no_docker() {
    let sb = Skillbox::start(Options::default());
    assert_eq!(sb.health()["container_sandbox"], false);
    let r = sb.call("boxed:sleep", json!({"seconds": 0}));
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error_kind"], "unavailable", "{r}");
    let error = r["error"].as_str().unwrap_or_default();
    assert!(error.contains("execution.sandbox: container"), "{error}");
    assert!(error.contains("no Docker engine"), "{error}");
}

#[test]
fn configured_docker_socket_that_does_not_answer_stops_the_core() {
    let root = tempfile::tempdir().unwrap();
    let missing = root.path().join("docker.sock");
    let mut sb = Skillbox::spawn(Options {
        docker_socket: missing.display().to_string(),
        ..Options::default()
    });
    let status = sb.wait_exit();
    assert!(!status.success(), "{status}");
    let err = sb.logs();
    assert!(err.contains(&missing.display().to_string()), "{err}");
    assert!(err.contains("socket = \"off\""), "{err}");
}
