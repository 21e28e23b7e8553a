//! What is served: tools with their annotations (and only a context's active ones on the
//! context endpoint), refusals of tools that do not exist, skills with their installed
//! digests, and `skill://` resources verbatim.

use serde_json::json;
use skillbox_protocol::skill::{package_digest, InstallLock, LockedSkill, Trust};

use super::super::errors::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND};
use super::*;

fn tool<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name} not listed: {list}"))
}

fn names(list: &Value) -> Vec<String> {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn tools_are_skill_dot_tool_with_annotations_from_security_and_network() {
    let f = fixture();
    for answer in [
        modern(&f.gw, "/mcp", "tools/list", json!({})).await,
        legacy(&f.gw, "/mcp", "tools/list", json!({})).await,
    ] {
        let list = answer.result();
        assert_eq!(
            names(list),
            [
                "notes.edit",
                "notes.search",
                "web.get",
                "load_skill",
                "run_skill",
                "run_skill_script"
            ]
        );
        let search = tool(list, "notes.search");
        assert_eq!(
            search["inputSchema"]["properties"]["text"]["type"],
            "string"
        );
        assert_eq!(
            search["annotations"],
            json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false})
        );
        assert_eq!(
            tool(list, "notes.edit")["annotations"],
            json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false})
        );
        assert_eq!(tool(list, "web.get")["annotations"]["openWorldHint"], true);
        assert_eq!(
            tool(list, "web.get")["outputSchema"]["properties"]["status"]["type"],
            "integer",
            "a declared output schema is listed"
        );
        assert!(
            search.get("outputSchema").is_none(),
            "none declared, none listed"
        );
        assert_eq!(
            tool(list, "load_skill")["annotations"]["readOnlyHint"],
            true
        );
    }
    let modern_list = modern(&f.gw, "/mcp", "tools/list", json!({})).await;
    assert_eq!(modern_list.result()["ttlMs"], 0);
    assert_eq!(modern_list.result()["cacheScope"], "private");
}

#[tokio::test]
async fn tool_name_with_no_skill_is_refused_naming_the_tool_as_written() {
    let f = fixture();
    for (name, why) in [
        ("ghost.run", "no skill named \"ghost\""),
        ("notes.delete", "skill \"notes\" has no tool \"delete\""),
        ("notes:search", "tool names are <skill>.<tool>"),
        ("nodots", "tool names are <skill>.<tool>"),
    ] {
        let a = modern(
            &f.gw,
            "/mcp",
            "tools/call",
            json!({"name": name, "arguments": {}}),
        )
        .await;
        assert_eq!(a.status, StatusCode::OK, "{name}");
        assert_eq!(a.error_code(), INVALID_PARAMS, "{name}");
        let m = a.error_message();
        assert!(m.contains(&format!("unknown tool {name:?}")), "{name}: {m}");
        assert!(m.contains(why), "{name}: {m}");
    }
    let stats = f.gw.records.store.all_skill_stats().unwrap();
    assert!(stats.is_empty(), "nothing ran: {stats:?}");
}

#[tokio::test]
async fn tools_call_arguments_that_are_not_an_object_are_invalid_params() {
    let f = fixture();
    for args in [json!([1, 2]), json!("text"), json!(3)] {
        let a = legacy(
            &f.gw,
            "/mcp",
            "tools/call",
            json!({"name": "notes.search", "arguments": args}),
        )
        .await;
        assert_eq!(a.error_code(), INVALID_PARAMS, "{args}");
        assert!(
            a.error_message().contains("must be an object"),
            "{}",
            a.body
        );
    }
    let a = legacy(&f.gw, "/mcp", "tools/call", json!({"arguments": {}})).await;
    assert_eq!(a.error_code(), INVALID_PARAMS);
    assert!(a.error_message().contains("\"name\""), "{}", a.body);
}

#[tokio::test]
async fn builtin_load_skill_answers_as_a_structured_result() {
    let f = fixture();
    let a = legacy(
        &f.gw,
        "/mcp",
        "tools/call",
        json!({"name": "load_skill", "arguments": {"name": "notes"}}),
    )
    .await;
    let r = a.result();
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["name"], "notes");
    let text: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        text, r["structuredContent"],
        "the text block is the same JSON"
    );
    let a = legacy(
        &f.gw,
        "/mcp",
        "tools/call",
        json!({"name": "load_skill", "arguments": {"name": "ghost"}}),
    )
    .await;
    assert_eq!(a.result()["isError"], true);
    assert!(a.result().get("structuredContent").is_none());
}

#[tokio::test]
async fn context_endpoint_lists_and_allows_only_the_active_tools() {
    let f = fixture();
    let catalog = f.gw.calls.load.catalog();
    crate::contexts::pin(&f.gw.records.store, &catalog, "c1", "web").unwrap();
    let list = modern(&f.gw, "/mcp/c1", "tools/list", json!({})).await;
    assert_eq!(
        names(list.result()),
        [
            "web.get",
            "load_skill",
            "run_skill",
            "run_skill_script",
            "exec_command",
            "write_stdin",
            "close_context"
        ]
    );
    let tools = list.result()["tools"].as_array().unwrap().clone();
    let exec = tools.iter().find(|t| t["name"] == "exec_command").unwrap();
    assert_eq!(exec["annotations"]["readOnlyHint"], false, "{exec}");
    assert_eq!(exec["annotations"]["destructiveHint"], true, "{exec}");
    // The command sessions need a context: not listed without one.
    let outside = modern(&f.gw, "/mcp", "tools/list", json!({})).await;
    let outside = names(outside.result());
    assert!(!outside.iter().any(|n| n == "exec_command"), "{outside:?}");
    // Listed elsewhere, refused here, with the REST call's message.
    let a = modern(
        &f.gw,
        "/mcp/c1",
        "tools/call",
        json!({"name": "notes.search", "arguments": {}}),
    )
    .await;
    let r = a.result();
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("not active in context \"c1\""), "{text}");
    assert_eq!(r["_meta"]["dev.skillbox/errorKind"], "permission_denied");
    let bad = modern(&f.gw, "/mcp/bad%20id", "tools/list", json!({})).await;
    assert_eq!(bad.error_code(), INVALID_PARAMS, "{}", bad.body);
}

#[tokio::test]
async fn skills_list_and_get_give_every_file_with_its_installed_digest() {
    let f = fixture();
    let listed = modern(&f.gw, "/mcp", "skills/list", json!({})).await;
    let skills = listed.result()["skills"].as_array().unwrap().clone();
    assert_eq!(skills.len(), 2);
    let notes = &skills[0];
    assert_eq!(notes["uri"], "skill://notes/SKILL.md");
    assert_eq!(notes["frontmatter"]["name"], "notes");
    assert_eq!(notes["frontmatter"]["license"], "MIT");
    let digest = package_digest(&f.skills.join("notes")).unwrap();
    let want: Vec<Value> = digest
        .files
        .iter()
        .map(|e| {
            let size = std::fs::metadata(f.skills.join("notes").join(&e.path)).unwrap().len();
            json!({"uri": format!("skill://notes/{}", e.path), "digest": format!("sha256:{}", e.sha256), "size": size})
        })
        .collect();
    assert_eq!(notes["resources"], json!(want));
    assert!(want.iter().any(|r| r["uri"] == "skill://notes/SKILL.md"));

    let got = modern(
        &f.gw,
        "/mcp",
        "skills/get",
        json!({"uri": "skill://notes/SKILL.md"}),
    )
    .await;
    assert_eq!(got.result()["skill"], *notes);

    // The install lock's digest must be the one these files hash to.
    let mut lock = InstallLock::default();
    lock.skills.insert(
        "notes".into(),
        LockedSkill {
            version: None,
            digest: format!("sha256:{}", "0".repeat(64)),
            trust: Trust::Local,
            publisher: None,
            leaf_fingerprint: None,
            publisher_key: None,
            root_fingerprint: None,
            installed_at: "2026-01-01T00:00:00Z".into(),
            origin: None,
        },
    );
    std::fs::write(
        InstallLock::path(&f.skills),
        serde_json::to_vec(&lock).unwrap(),
    )
    .unwrap();
    let changed = modern(
        &f.gw,
        "/mcp",
        "skills/get",
        json!({"uri": "skill://notes/SKILL.md"}),
    )
    .await;
    assert_eq!(changed.error_code(), INTERNAL_ERROR);
    assert!(
        changed
            .error_message()
            .contains("changed on disk since it was installed"),
        "{}",
        changed.body
    );
    lock.skills.get_mut("notes").unwrap().digest = digest.prefixed();
    std::fs::write(
        InstallLock::path(&f.skills),
        serde_json::to_vec(&lock).unwrap(),
    )
    .unwrap();
    let same = modern(
        &f.gw,
        "/mcp",
        "skills/get",
        json!({"uri": "skill://notes/SKILL.md"}),
    )
    .await;
    assert_eq!(same.result()["skill"]["resources"], json!(want));
}

#[tokio::test]
async fn unknown_skill_is_invalid_params_and_skills_are_modern_only() {
    let f = fixture();
    for uri in [
        "skill://ghost/SKILL.md",
        "skill://notes/README.md",
        "file:///etc/passwd",
    ] {
        let a = modern(&f.gw, "/mcp", "skills/get", json!({"uri": uri})).await;
        assert_eq!(a.error_code(), INVALID_PARAMS, "{uri}");
        assert!(a.error_message().contains(uri), "{uri}: {}", a.body);
    }
    let a = legacy(&f.gw, "/mcp", "skills/list", json!({})).await;
    assert_eq!(a.error_code(), METHOD_NOT_FOUND);
    assert!(a.error_message().contains("2026-07-28"), "{}", a.body);
}

#[tokio::test]
async fn skill_md_resource_is_served_verbatim_and_nothing_outside_the_skill() {
    let f = fixture();
    let list = legacy(&f.gw, "/mcp", "resources/list", json!({})).await;
    let uris: Vec<&str> = list.result()["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris, ["skill://notes/SKILL.md", "skill://web/SKILL.md"]);
    let read = modern(
        &f.gw,
        "/mcp",
        "resources/read",
        json!({"uri": "skill://notes/SKILL.md"}),
    )
    .await;
    let on_disk = std::fs::read_to_string(f.skills.join("notes/SKILL.md")).unwrap();
    assert_eq!(read.result()["contents"][0]["text"], on_disk);
    assert_eq!(read.result()["contents"][0]["mimeType"], "text/markdown");
    for uri in [
        "skill://notes/../web/SKILL.md",
        "skill://notes/../../skillbox.toml",
        "skill://notes//etc/passwd",
        "skill://ghost/SKILL.md",
    ] {
        let a = modern(&f.gw, "/mcp", "resources/read", json!({"uri": uri})).await;
        assert_eq!(a.error_code(), INVALID_PARAMS, "{uri}: {}", a.body);
        assert!(
            a.error_message().contains("unknown resource"),
            "{uri}: {}",
            a.body
        );
    }
}

#[test]
fn files_a_call_wrote_come_back_as_resource_links_of_its_context() {
    let mut r = skillbox_protocol::result::ToolResult::ok("c1", json!({"output": ""}), 1);
    r.files = Some(vec![skillbox_protocol::workdir::WorkFile {
        path: "out/report.csv".into(),
        size: 42,
        sha256: "ab".into(),
        executable: false,
    }]);
    let v = crate::gateway::mcp::tools::call_result(&r, Some("job-1"));
    let link = &v["content"][1];
    assert_eq!(link["type"], "resource_link", "{v}");
    assert_eq!(
        link["uri"],
        "skillbox://contexts/job-1/files/out/report.csv"
    );
    assert_eq!(link["mimeType"], "text/csv; charset=utf-8");
    assert_eq!(link["size"], 42);
    // Outside a context, no link (there is nowhere to read it from).
    let v = crate::gateway::mcp::tools::call_result(&r, None);
    assert_eq!(v["content"].as_array().unwrap().len(), 1, "{v}");
}
