//! The gateway client of a running instance: requests with its API token, tool calls
//! (in the foreground or on another thread) and approvals.

use serde_json::{json, Value};

use super::http::{self, Response};
use super::{poll, Skillbox, POLL_TIMEOUT};

impl Skillbox {
    /// A gateway request with the API token.
    pub fn request(&self, method: &str, path: &str, body: Option<&Value>) -> Response {
        self.request_as(&self.token, method, path, body)
    }

    /// A gateway request with `token` (a bot's) as the bearer.
    pub fn request_as(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Response {
        let auth = format!("Bearer {token}");
        http::request(
            &self.addr,
            method,
            path,
            &[("Authorization", auth.as_str())],
            body,
        )
        .unwrap_or_else(|e| panic!("{method} {path}: {e}\n{}", self.logs()))
    }

    /// A bot token made with `skillbox tokens create NAME [ARGS]` on this workspace.
    pub fn bot_token(&self, name: &str, args: &[&str]) -> String {
        let mut all = vec!["tokens", "create", name];
        all.extend_from_slice(args);
        let out = self.cli(&all);
        assert!(
            out.status.success(),
            "tokens create {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(token.starts_with("sbx_bot_"), "{token}");
        token
    }

    /// `GET /healthz` (no token), `{}` when the gateway does not answer.
    pub fn health(&self) -> Value {
        http::request(&self.addr, "GET", "/healthz", &[], None)
            .ok()
            .filter(|r| r.status == 200)
            .map(|r| r.json())
            .unwrap_or_else(|| json!({}))
    }

    /// `POST /v1/tools/call`; the result of docs/http-api.md.
    pub fn call(&self, tool: &str, args: Value) -> Value {
        let r = self.request(
            "POST",
            "/v1/tools/call",
            Some(&json!({"tool": tool, "args": args})),
        );
        assert_eq!(r.status, 200, "call {tool}: {}", r.body);
        r.json()
    }

    /// Starts `POST /v1/tools/call` on another thread (for calls that wait).
    pub fn call_in_background(&self, tool: &str, args: Value) -> std::thread::JoinHandle<Value> {
        self.call_in_background_as(&self.token.clone(), tool, args)
    }

    /// [`Skillbox::call_in_background`] with `token` (a bot's) as the bearer.
    pub fn call_in_background_as(
        &self,
        token: &str,
        tool: &str,
        args: Value,
    ) -> std::thread::JoinHandle<Value> {
        self.send_in_background(token, json!({"tool": tool, "args": args}))
    }

    /// [`Skillbox::call_in_background`] in the context `context_id`.
    pub fn call_in_context_in_background(
        &self,
        context_id: &str,
        tool: &str,
        args: Value,
    ) -> std::thread::JoinHandle<Value> {
        let body = json!({"tool": tool, "args": args, "context_id": context_id});
        self.send_in_background(&self.token.clone(), body)
    }

    /// `POST /v1/tools/call` of `body` with `token` as the bearer, on another thread.
    fn send_in_background(&self, token: &str, body: Value) -> std::thread::JoinHandle<Value> {
        let addr = self.addr.clone();
        let auth = format!("Bearer {token}");
        std::thread::spawn(move || {
            let r = http::request(
                &addr,
                "POST",
                "/v1/tools/call",
                &[("Authorization", auth.as_str())],
                Some(&body),
            )
            .expect("call in background");
            assert_eq!(r.status, 200, "{}", r.body);
            r.json()
        })
    }

    /// The data of a successful call, or a panic naming the failure.
    pub fn call_ok(&self, tool: &str, args: Value) -> Value {
        let r = self.call(tool, args);
        assert_eq!(r["success"], true, "{tool} failed: {r}\n{}", self.logs());
        r["data"].clone()
    }

    /// Approvals, all or those with `status`.
    pub fn approvals(&self, status: Option<&str>) -> Vec<Value> {
        let path = match status {
            Some(s) => format!("/v1/approvals?status={s}"),
            None => "/v1/approvals".to_string(),
        };
        let r = self.request("GET", &path, None);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        r.json()["approvals"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Waits for a pending approval of `skill:tool` and returns it.
    pub fn wait_pending(&self, skill: &str, tool: &str) -> Value {
        poll(
            &format!("a pending approval of {skill}:{tool}"),
            POLL_TIMEOUT,
            || {
                self.approvals(Some("pending"))
                    .into_iter()
                    .find(|a| a["skill"] == skill && a["tool"] == tool)
            },
        )
    }

    /// Decides an approval through the API.
    pub fn decide(&self, id: &str, decision: &str, reason: Option<&str>) -> Response {
        let mut body = json!({"decision": decision});
        if let Some(r) = reason {
            body["reason"] = r.into();
        }
        self.request("POST", &format!("/v1/approvals/{id}"), Some(&body))
    }
}
