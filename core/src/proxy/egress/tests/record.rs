//! A call's connections through the proxy are stored with the call when it ends.

use serde_json::json;
use skillbox_protocol::result::ToolResult;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calls_connections_are_stored_with_it() {
    let ws = tempfile::tempdir().unwrap();
    let skills = ws.path().join("skills");
    std::fs::create_dir_all(skills.join("s")).unwrap();
    std::fs::write(
        skills.join("s/skill.yaml"),
        "name: s\nversion: 0.1.0\ndescription: test skill\npermissions:\n  network: [api.test]\n\
         tools:\n  - name: t\n    description: test tool\n    command: [\"true\"]\n",
    )
    .unwrap();
    let catalog = discover(&[skills], DiscoveryOptions::default());
    let d = crate::calls::test_dispatcher(ws.path(), catalog);
    let (trust, _state) = test_trust(Default::default());
    let proxy = Arc::new(EgressProxy::new(
        Arc::clone(d.in_flight()) as Arc<dyn EgressCalls>,
        pinned(),
        Vec::new(),
        trust,
    ));
    // The "tool" makes one connection through the proxy while its call runs.
    let d = d.with_fake_transport(move |p| {
        let (proxy, call_id) = (Arc::clone(&proxy), p.call_id.clone());
        let token = p.capability_token.0.clone();
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(async move {
                let (mut program, side) = tokio::io::duplex(4096);
                let task = tokio::spawn(async move {
                    proxy.serve_connection(&call_id, &token, side).await;
                });
                let answer = ask_all(&mut program, "CONNECT evil.test:443 HTTP/1.1\r\n\r\n").await;
                assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
                task.await.unwrap();
            })
        });
        Ok(ToolResult::ok(p.call_id.clone(), json!({}), 1))
    });
    let r = d.call_named("s:t", json!({})).await;
    assert!(r.success, "{r:?}");
    let record = d.store().get_call(&r.call_id).unwrap().unwrap();
    assert_eq!(record.egress.len(), 1, "{record:?}");
    assert_refused_entry(
        &record.egress[0],
        "evil.test",
        "not in the skill's permissions.network",
    );
    let shown = serde_json::to_value(&record).unwrap();
    assert_eq!(shown["egress"][0]["verdict"], "refused");
    assert_eq!(shown["egress"][0]["port"], 443);
}
