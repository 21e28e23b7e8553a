//! The mutual-TLS channel between the core and the executor: both listeners refuse
//! clients without a certificate, with a certificate from another CA, and with a
//! certificate of the real CA that names the wrong side; the core refuses capability
//! callbacks whose token is not the live token of their call.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use skillbox_channel::client::{ClientError, RpcClient};
use skillbox_channel::server::{self, ReloadingServerConfig, RpcFuture, RpcHandler, ServerOptions};
use skillbox_channel::{TlsFiles, CORE_IDENTITY, EXECUTOR_IDENTITY};
use skillbox_protocol::jsonrpc::{code, ErrorObject, MAX_MESSAGE_BYTES};
use skillbox_protocol::methods::{method, CoreCallbackParams, SecretValue, ToolExecuteParams};
use skillbox_protocol::result::ToolResult;

use crate::harness::server::HELLO;
use crate::harness::tls::{rpc, ClientCert};
use crate::harness::{poll, Options, Skillbox, POLL_TIMEOUT};

/// The subject name of the CA `skillbox up` creates.
const REAL_CA_NAME: &str = "skillbox internal channel CA";

const HEALTH: &str = r#"{"jsonrpc":"2.0","id":1,"method":"health","params":{}}"#;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A `core.fetch` callback for a call id that was never issued.
fn unknown_call_fetch(sb: &Skillbox) -> String {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "core.fetch",
        "params": {"call_id": "0123456789ab", "capability_token": "guess",
                   "request": {"url": sb.allowed.url("/hello")}}
    })
    .to_string()
}

fn real_cert(sb: &Skillbox, identity: &str) -> ClientCert {
    let pki = sb.pki();
    ClientCert::from_files(
        &pki.join(format!("{identity}.pem")),
        &pki.join(format!("{identity}.key")),
    )
}

/// Waits until the instance's log holds `needle` at least `count` times.
fn wait_for_log(sb: &Skillbox, needle: &str, count: usize) {
    poll(
        &format!("{count}× {needle:?} in the logs"),
        POLL_TIMEOUT,
        || (sb.logs().matches(needle).count() >= count).then_some(()),
    );
}

#[test]
fn channel_refuses_clients_without_a_certificate_or_with_one_from_another_ca() {
    let sb = Skillbox::start(Options {
        fixed_callback_port: true,
        ..Options::default()
    });
    let ca = sb.pki().join("ca.pem");
    let executor = sb.executor_addr();
    let callback = sb.callback_addr.clone().unwrap();
    let fetch = unknown_call_fetch(&sb);
    let rt = runtime();
    rt.block_on(async {
        // Controls: the real identities are served (the harness client works).
        let r = rpc(
            &executor,
            EXECUTOR_IDENTITY,
            &ca,
            Some(real_cert(&sb, CORE_IDENTITY)),
            HEALTH,
        )
        .await
        .expect("the core's certificate reaches the executor");
        assert!(
            r.contains("\"result\"") && r.contains("landlock_abi"),
            "{r}"
        );
        let r = rpc(
            &callback,
            CORE_IDENTITY,
            &ca,
            Some(real_cert(&sb, EXECUTOR_IDENTITY)),
            &fetch,
        )
        .await
        .expect("the executor's certificate reaches the core");
        assert!(r.contains("-32001") && r.contains("is in flight"), "{r}");

        for (addr, server_name, peer) in [
            (&executor, EXECUTOR_IDENTITY, CORE_IDENTITY),
            (&callback, CORE_IDENTITY, EXECUTOR_IDENTITY),
        ] {
            let r = rpc(addr, server_name, &ca, None, HEALTH).await;
            eprintln!("{server_name}, no client certificate: {r:?}");
            assert!(
                r.is_err(),
                "{server_name} answered a client without a certificate: {r:?}"
            );
            // Another CA, and another CA that takes the real one's name.
            for ca_name in ["an attacker's CA", REAL_CA_NAME] {
                let r = rpc(
                    addr,
                    server_name,
                    &ca,
                    Some(ClientCert::from_foreign_ca(peer, ca_name)),
                    HEALTH,
                )
                .await;
                eprintln!("{server_name}, {peer} certificate from {ca_name:?}: {r:?}");
                assert!(
                    r.is_err(),
                    "{server_name} answered a {peer} certificate from {ca_name:?}: {r:?}"
                );
            }
        }
    });
    // Each listener said why: three refusals each.
    wait_for_log(&sb, "channel TLS handshake refused", 6);
}

#[test]
fn channel_refuses_a_certificate_of_the_real_ca_that_names_the_wrong_side() {
    let sb = Skillbox::start(Options {
        fixed_callback_port: true,
        ..Options::default()
    });
    let ca = sb.pki().join("ca.pem");
    let executor = sb.executor_addr();
    let callback = sb.callback_addr.clone().unwrap();
    let fetch = unknown_call_fetch(&sb);
    let rt = runtime();
    rt.block_on(async {
        // The core's own certificate presented to the core's callback listener, which
        // takes only the executor.
        let r = rpc(
            &callback,
            CORE_IDENTITY,
            &ca,
            Some(real_cert(&sb, CORE_IDENTITY)),
            &fetch,
        )
        .await;
        eprintln!("callback listener, skillbox-core certificate: {r:?}");
        assert!(
            r.is_err(),
            "the callback listener answered skillbox-core: {r:?}"
        );
        // The executor's own certificate presented to the executor, which takes only the
        // core.
        let r = rpc(
            &executor,
            EXECUTOR_IDENTITY,
            &ca,
            Some(real_cert(&sb, EXECUTOR_IDENTITY)),
            HEALTH,
        )
        .await;
        eprintln!("executor listener, skillbox-executor certificate: {r:?}");
        assert!(r.is_err(), "the executor answered skillbox-executor: {r:?}");
    });
    wait_for_log(&sb, "channel peer refused: wrong identity", 2);
}

/// An executor of the test's own behind `skillbox serve`: it holds the real capability
/// tokens the core issues and replays them.
struct FakeExecutor {
    core: RpcClient,
    fetch_url: String,
    calls: Mutex<Vec<(String, SecretValue)>>,
}

impl FakeExecutor {
    /// `core.fetch` of `fetch_url` as call `call_id` with `token`, as JSON: `{"ok": ...}`,
    /// `{"code", "message"}` or `{"transport": ...}`.
    async fn core_fetch(&self, call_id: &str, token: &SecretValue) -> Value {
        let params = CoreCallbackParams {
            call_id: call_id.to_string(),
            capability_token: token.clone(),
            request: json!({"url": self.fetch_url}),
        };
        let params = serde_json::to_value(params).unwrap();
        match self
            .core
            .call(method::CORE_FETCH, &params, Duration::from_secs(30))
            .await
        {
            Ok(v) => json!({"ok": v}),
            Err(ClientError::Rpc(e)) => json!({"code": e.code, "message": e.message}),
            Err(e) => json!({"transport": e.to_string()}),
        }
    }

    async fn execute(&self, params: Option<Value>) -> Result<Value, ErrorObject> {
        let p: ToolExecuteParams = serde_json::from_value(params.unwrap_or_default())
            .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, e.to_string()))?;
        let own = self.core_fetch(&p.call_id, &p.capability_token).await;
        let forged = self
            .core_fetch(&p.call_id, &SecretValue("forged-token".into()))
            .await;
        let previous = self.calls.lock().unwrap().last().cloned();
        let foreign = match previous {
            Some((_, token)) => self.core_fetch(&p.call_id, &token).await,
            None => Value::Null,
        };
        self.calls
            .lock()
            .unwrap()
            .push((p.call_id.clone(), p.capability_token.clone()));
        let data = json!({"own": own, "forged": forged, "foreign": foreign});
        Ok(serde_json::to_value(ToolResult::ok(p.call_id, data, 0)).unwrap())
    }
}

impl RpcHandler for FakeExecutor {
    fn handle<'a>(&'a self, method_name: &'a str, params: Option<Value>) -> RpcFuture<'a> {
        Box::pin(async move {
            match method_name {
                method::HEALTH => Ok(json!({
                    "status": "ok", "landlock_abi": 0, "seccomp": false, "in_flight": 0
                })),
                method::TOOL_EXECUTE => self.execute(params).await,
                method::TOOL_LIST => Ok(json!({"tools": []})),
                method::SKILL_RELOAD => Ok(json!({"loaded": 0, "skipped": []})),
                other => Err(ErrorObject::new(
                    code::METHOD_NOT_FOUND,
                    format!("fake executor: no {other}"),
                )),
            }
        })
    }
}

fn assert_denied(r: &Value, needle: &str) {
    assert_eq!(r["code"], -32001, "{r}");
    let message = r["message"].as_str().unwrap();
    assert!(message.contains(needle), "{needle:?} not in {message:?}");
}

#[test]
fn core_fetch_refuses_a_finished_calls_token_and_another_calls_token() {
    let rt = runtime();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let fake_addr = listener.local_addr().unwrap();
    let mut sb = Skillbox::spawn(Options {
        executor_url: Some(format!("https://{fake_addr}")),
        fixed_callback_port: true,
        ..Options::default()
    });
    let pki = sb.pki();
    poll("the core's channel PKI", POLL_TIMEOUT, || {
        pki.join("ca.pem").exists().then_some(())
    });
    let files = TlsFiles::in_dir(&pki, EXECUTOR_IDENTITY);
    let fake = {
        let _guard = rt.enter();
        let core_url = format!("https://{}", sb.callback_addr.clone().unwrap());
        Arc::new(FakeExecutor {
            core: RpcClient::new(&core_url, CORE_IDENTITY, &files).unwrap(),
            fetch_url: sb.allowed.url("/hello"),
            calls: Mutex::new(Vec::new()),
        })
    };
    let tls = Arc::new(ReloadingServerConfig::new(files).unwrap());
    let handler: Arc<dyn RpcHandler> = fake.clone();
    rt.spawn(server::serve(
        listener,
        tls,
        ServerOptions {
            expected_peer: CORE_IDENTITY.to_string(),
            max_body_bytes: MAX_MESSAGE_BYTES,
        },
        handler,
    ));
    sb.wait_ready();

    let args = json!({"url": sb.allowed.url("/hello")});
    let first = sb.call_ok("net:fetch", args.clone());
    // Control: the live token of the call fetches what the skill declared.
    assert_eq!(first["own"]["ok"]["status"], 200, "{first}");
    assert_eq!(first["own"]["ok"]["body"], HELLO, "{first}");
    assert_denied(&first["forged"], "does not belong to call");

    let second = sb.call_ok("net:fetch", args);
    assert_eq!(second["own"]["ok"]["status"], 200, "{second}");
    // The first call's real token presented for the second call.
    assert_denied(&second["foreign"], "does not belong to call");

    // Both calls have ended: their real tokens are dead.
    let calls = fake.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2);
    for (call_id, token) in &calls {
        let r = rt.block_on(fake.core_fetch(call_id, token));
        assert_denied(&r, "is in flight");
        assert!(
            r["message"].as_str().unwrap().contains(call_id.as_str()),
            "{r}"
        );
    }
    // Only the two fetches with live tokens reached the server.
    assert_eq!(sb.allowed.hits(), vec!["/hello".to_string(); 2]);
}
