//! JSON-RPC decoding of arbitrary bytes: never panics, whatever decodes re-encodes to a
//! line that decodes to the same message, and the channel's reading of a call with its
//! params kept as text (`decode_call`) agrees with `decode` on every input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillbox_protocol::jsonrpc::{as_message, decode, decode_call};

fuzz_target!(|bytes: &[u8]| {
    let decoded = decode(bytes);
    match (&decoded, decode_call(bytes)) {
        (Ok(message), Ok(call)) => {
            assert_eq!(
                &as_message(&call).unwrap(),
                message,
                "decode_call read otherwise"
            )
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (a, b) => panic!("decode {a:?}, decode_call {b:?}"),
    }
    if let Ok(message) = decoded {
        let line = message.to_line();
        match decode(line.trim_end().as_bytes()) {
            Ok(again) => assert_eq!(again, message, "round trip changed {line}"),
            Err(e) => panic!("re-encoded message does not decode: {e}: {line}"),
        }
    }
});
