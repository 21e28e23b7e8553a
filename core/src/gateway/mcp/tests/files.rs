//! Skill files served to clients, by `GET /v1/skills/{name}/files/{path}` and MCP
//! `resources/read`: a hard link to a file of the core's state folder is refused on both
//! with the reason (the judgement readFile makes), an ordinary file is served, and one
//! skill folder that cannot be listed does not hide the others in `skills/list`.

use super::*;

/// `GET path` through the table: status and JSON body.
async fn get(gw: &Gateway, path: &str) -> (StatusCode, Value) {
    let body: Body = Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed();
    let asked = table::Asked {
        method: &Method::GET,
        path,
        caller: Some(crate::auth::Caller::Operator),
    };
    let r = match table::dispatch(gw, asked, None, HeaderMap::new(), body).await {
        Ok(r) => r,
        Err(e) => e.into_response().map(Into::into),
    };
    let status = r.status();
    let bytes = r.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

/// The state folder's secrets and token, with a hard link to each in the `notes` skill.
fn link_secrets(f: &Fixture) {
    let state = f.skills.parent().unwrap().join(".skillbox");
    std::fs::write(state.join("secrets.env"), "OPENAI_KEY=sk-secret-4e1b\n").unwrap();
    std::fs::write(state.join("api-token"), "token-secret-77c2\n").unwrap();
    let notes = f.skills.join("notes");
    std::fs::hard_link(state.join("secrets.env"), notes.join("leak.md")).unwrap();
    std::fs::hard_link(state.join("api-token"), notes.join("token.txt")).unwrap();
}

#[tokio::test]
async fn skill_file_route_refuses_hard_links_to_state_files() {
    let f = fixture();
    link_secrets(&f);
    for (file, target) in [("leak.md", "secrets.env"), ("token.txt", "api-token")] {
        let (status, body) = get(&f.gw, &format!("/v1/skills/notes/files/{file}")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{file}: {body}");
        assert_eq!(body["error_kind"], "permission_denied", "{body}");
        let error = body["error"].as_str().unwrap();
        assert!(
            error.contains(&format!("same file as \".skillbox/{target}\"")),
            "{error}"
        );
        assert!(error.contains("never readable by skills"), "{error}");
        assert!(!body.to_string().contains("secret-"), "{body}");
    }
    // An ordinary file of the skill is still served.
    let (status, body) = get(&f.gw, "/v1/skills/notes/files/scripts/search.py").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["content"], "print(1)\n");
}

#[tokio::test]
async fn mcp_resources_read_refuses_hard_links_to_state_files() {
    let f = fixture();
    link_secrets(&f);
    for (file, target) in [("leak.md", "secrets.env"), ("token.txt", "api-token")] {
        let uri = format!("skill://notes/{file}");
        let a = modern(&f.gw, "/mcp", "resources/read", json!({"uri": uri})).await;
        assert_eq!(
            a.error_code(),
            super::super::errors::INVALID_PARAMS,
            "{}",
            a.body
        );
        let message = a.error_message();
        assert!(message.contains("is refused"), "{message}");
        assert!(
            message.contains(&format!("same file as \".skillbox/{target}\"")),
            "{message}"
        );
        assert!(!a.body.to_string().contains("secret-"), "{}", a.body);
    }
    let a = modern(
        &f.gw,
        "/mcp",
        "resources/read",
        json!({"uri": "skill://notes/scripts/search.py"}),
    )
    .await;
    assert_eq!(a.result()["contents"][0]["text"], "print(1)\n");
}

#[tokio::test]
async fn skill_file_route_refuses_a_hard_link_to_any_other_file() {
    let f = fixture();
    let outside = f.skills.parent().unwrap().join("private.txt");
    std::fs::write(&outside, "private").unwrap();
    std::fs::hard_link(&outside, f.skills.join("notes/private.md")).unwrap();
    let (status, body) = get(&f.gw, "/v1/skills/notes/files/private.md").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("has 2 names (a hard link)"),
        "{body}"
    );
    let a = modern(
        &f.gw,
        "/mcp",
        "resources/read",
        json!({"uri": "skill://notes/private.md"}),
    )
    .await;
    assert!(a.error_message().contains("a hard link"), "{}", a.body);
}

#[tokio::test]
async fn skills_list_marks_a_local_skill_holding_a_symlink_and_lists_the_others() {
    let f = fixture();
    std::os::unix::fs::symlink("/etc/hostname", f.skills.join("web/link.txt")).unwrap();
    let a = modern(&f.gw, "/mcp", "skills/list", json!({})).await;
    let skills = a.result()["skills"].as_array().unwrap().clone();
    assert_eq!(skills.len(), 2, "{}", a.body);
    let notes = &skills[0];
    assert_eq!(notes["uri"], "skill://notes/SKILL.md");
    assert!(notes.get("error").is_none(), "{notes}");
    assert!(!notes["resources"].as_array().unwrap().is_empty());
    let web = &skills[1];
    assert_eq!(web["uri"], "skill://web/SKILL.md");
    assert_eq!(web["frontmatter"]["name"], "web");
    let error = web["error"].as_str().unwrap();
    assert!(error.contains("cannot be listed"), "{error}");
    assert!(error.contains("link.txt"), "{error}");
    assert!(!error.contains("since it was installed"), "{error}");
}
