//! An MCP message as `POST /mcp` reads it (JSON-RPC parse, era, routing headers): arbitrary
//! bytes and header values never panic, and every refusal is a JSON-RPC error object with
//! an integer code and a message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillbox_core::gateway::classify_mcp_message;

fuzz_target!(|input: &[u8]| {
    // The first line, split at '|', gives the routing header values; the rest is the body.
    let (head, body) = match input.iter().position(|b| *b == b'\n') {
        Some(i) => (&input[..i], &input[i + 1..]),
        None => (&b""[..], input),
    };
    let head = String::from_utf8_lossy(head);
    let mut values = head.split('|');
    let names = ["mcp-protocol-version", "mcp-method", "mcp-name", "origin"];
    let headers: Vec<(&str, &str)> = names
        .iter()
        .filter_map(|n| values.next().map(|v| (*n, v)))
        .collect();
    if let Err(e) = classify_mcp_message(body, &headers) {
        assert!(e["code"].is_i64(), "{e}");
        assert!(e["message"].is_string(), "{e}");
    }
});
