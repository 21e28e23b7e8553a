//! JSON-RPC decoding of arbitrary bytes: never panics, and whatever decodes re-encodes
//! to a line that decodes to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillbox_protocol::jsonrpc::decode;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(message) = decode(bytes) {
        let line = message.to_line();
        match decode(line.trim_end().as_bytes()) {
            Ok(again) => assert_eq!(again, message, "round trip changed {line}"),
            Err(e) => panic!("re-encoded message does not decode: {e}: {line}"),
        }
    }
});
