//! `run_skill` over MCP: the same child context as over REST, the chain carried from the
//! context endpoint it is called on, a loop refused as an error result.

use serde_json::json;

use super::*;

#[tokio::test]
async fn run_skill_answers_a_child_context_and_refuses_a_loop_from_it() {
    let f = fixture();
    let call = |path: &'static str, name: &'static str| {
        let gw = &f.gw;
        async move {
            legacy(
                gw,
                path,
                "tools/call",
                json!({"name": "run_skill", "arguments": {"name": name, "task": "summarise"}}),
            )
            .await
        }
    };
    let a = call("/mcp/c1", "notes").await;
    let r = a.result();
    assert_eq!(r["isError"], false, "{r}");
    let d = &r["structuredContent"];
    assert_eq!(d["context_id"], "c1::notes", "{r}");
    assert_eq!(d["call_chain"], json!(["notes"]), "{r}");
    assert_eq!(d["target_skill"], "notes");
    // The sub-agent's endpoint is the child context's: the chain goes on from there.
    // (Every skill of the fixture restricts a context pinning it to its own tools: the
    // next skill is pinned there too, as a bot would before delegating on.)
    assert_eq!(call("/mcp/c1", "web").await.result()["isError"], false);
    let catalog = f.gw.calls.load.catalog();
    crate::contexts::pin(&f.gw.records.store, &catalog, "c1::web", "notes").unwrap();
    let a = call("/mcp/c1::web", "notes").await;
    let r = a.result();
    assert_eq!(
        r["structuredContent"]["call_chain"],
        json!(["web", "notes"]),
        "{r}"
    );
    // A loop; and a skill the child context does not lend (notes' allowed-tools restrict
    // c1::notes to what it pins).
    crate::contexts::pin(&f.gw.records.store, &catalog, "c1::web::notes", "web").unwrap();
    let a = call("/mcp/c1::web::notes", "web").await;
    let r = a.result();
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("loop: web → notes → web"), "{text}");
    let a = call("/mcp/c1::notes", "web").await;
    let r = a.result();
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(
        r["_meta"]["dev.skillbox/errorKind"], "permission_denied",
        "{r}"
    );
}
