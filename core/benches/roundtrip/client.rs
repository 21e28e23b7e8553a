//! The bench's bots: one call per fresh HTTP connection, or calls on one kept connection
//! (HTTP/1.1 keep-alive, as a bot's HTTP client pool does).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

/// The body of a call of `tool` with `{"n":1}`.
fn tool_body(tool: &str) -> String {
    format!(r#"{{"tool":"{tool}","args":{{"n":1}}}}"#)
}

fn request(addr: &str, token: &str, body: &str, connection: &str) -> String {
    format!(
        "POST /v1/tools/call HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: {connection}\r\n\r\n{body}",
        body.len()
    )
}

fn checked(tool: &str, body: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    assert_eq!(v["success"], true, "{tool}: {body}");
    v
}

/// One call through the gateway on a fresh connection: its wall time in ms and the result.
pub fn call(addr: &str, token: &str, tool: &str) -> (f64, serde_json::Value) {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(request(addr, token, &tool_body(tool), "close").as_bytes())
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let body = out.split("\r\n\r\n").nth(1).unwrap_or_default();
    (ms, checked(tool, body))
}

/// A bot that keeps its connection to the gateway open between calls.
pub struct KeptBot {
    addr: String,
    token: String,
    conn: BufReader<TcpStream>,
}

impl KeptBot {
    /// Connects once.
    pub fn connect(addr: &str, token: &str) -> Self {
        let s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        Self {
            addr: addr.to_string(),
            token: token.to_string(),
            conn: BufReader::new(s),
        }
    }

    /// Closes the kept connection and opens another.
    #[allow(dead_code)] // `egress_up` uses it; the round-trip bench does not.
    pub fn reconnect(&mut self) {
        *self = Self::connect(&self.addr, &self.token);
    }

    /// One call on the kept connection: its wall time in ms and the result.
    pub fn call(&mut self, tool: &str) -> (f64, serde_json::Value) {
        self.call_body(tool, &tool_body(tool))
    }

    /// One `POST /v1/tools/call` of `body` (any call's JSON; `label` names it when it
    /// fails) on the kept connection: its wall time in ms and the result.
    pub fn call_body(&mut self, label: &str, body: &str) -> (f64, serde_json::Value) {
        let t = Instant::now();
        let req = request(&self.addr, &self.token, body, "keep-alive");
        self.conn.get_mut().write_all(req.as_bytes()).unwrap();
        let mut length = None;
        loop {
            let mut line = String::new();
            assert!(
                self.conn.read_line(&mut line).unwrap() > 0,
                "connection closed"
            );
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse::<usize>().ok();
                }
            }
        }
        let mut body = vec![0; length.expect("a response with Content-Length")];
        self.conn.read_exact(&mut body).unwrap();
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        (ms, checked(label, &String::from_utf8_lossy(&body)))
    }
}

/// `GET /metrics`: each stage's (sum in seconds, count) of `skillbox_call_stage_seconds`.
pub fn stage_totals(addr: &str, token: &str) -> Vec<(String, f64, f64)> {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let value = |name: &str, stage: &str| {
        let prefix = format!("skillbox_call_stage_seconds_{name}{{stage=\"{stage}\"}} ");
        out.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    skillbox_core::observe::metrics::CALL_STAGES
        .iter()
        .map(|st| (st.to_string(), value("sum", st), value("count", st)))
        .collect()
}
