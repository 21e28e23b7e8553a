//! Connection floods over real TCP, with small limits: a peer past its cap evicts its
//! oldest slow head for a head sent at once, a peer whose every connection has a request
//! in progress is refused with the cap named, past the high-water mark and in the health
//! reserve a trickled head is cut at the short head timeout, and a head over 32 KiB is
//! refused. No test asserts how fast: each waits for the answer or the close under the
//! guard of [`super::tests`].

use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use super::tests::{head, limits, read_answer, read_to_close, start};
use super::ServerLimits;

/// Lets the server accept what was connected (no answer says it did).
const SETTLE: Duration = Duration::from_millis(200);

/// A connection that sent the start of a head and waits.
async fn slow_head(addr: std::net::SocketAddr) -> TcpStream {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ")
        .await
        .unwrap();
    tcp
}

/// One more byte of an endless header every 100 ms, until the write fails.
fn trickle(mut writer: OwnedWriteHalf) -> JoinHandle<()> {
    tokio::spawn(async move {
        while writer.write_all(b"a").await.is_ok() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

/// Ends a slow head; the answer to it.
async fn finish_head(tcp: &mut TcpStream) -> String {
    tcp.write_all(b"a\r\n\r\n").await.unwrap();
    read_answer(tcp).await
}

#[tokio::test]
async fn slow_head_of_a_peer_past_its_cap_is_evicted_for_a_head_sent_at_once() {
    let ws = tempfile::tempdir().unwrap();
    let addr = start(
        ws.path(),
        ServerLimits {
            max_connections_per_peer: 3,
            ..limits()
        },
    )
    .await;
    let mut slow = Vec::new();
    for _ in 0..3 {
        slow.push(slow_head(addr).await);
        tokio::time::sleep(SETTLE).await;
    }
    // The fourth connection of 127.0.0.1 sends its head at once: it gets in...
    let mut honest = TcpStream::connect(addr).await.unwrap();
    honest
        .write_all(head("GET", "/healthz", "").as_bytes())
        .await
        .unwrap();
    let answer = read_answer(&mut honest).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // ...in place of the oldest, closed without an answer.
    assert_eq!(
        read_to_close(&mut slow[0]).await,
        "",
        "the oldest is evicted"
    );
    // The two newer ones are still served.
    for tcp in &mut slow[1..] {
        let answer = finish_head(tcp).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
}

#[tokio::test]
async fn peer_whose_connections_all_have_a_request_in_progress_gets_503_naming_the_cap() {
    let ws = tempfile::tempdir().unwrap();
    let addr = start(
        ws.path(),
        ServerLimits {
            max_connections_per_peer: 2,
            ..limits()
        },
    )
    .await;
    // Two calls whose bodies are still arriving: a request in progress on each.
    let extra = "content-length: 100\r\ncontent-type: application/json\r\n";
    let mut busy = Vec::new();
    for _ in 0..2 {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(format!("{}{{\"tool\"", head("POST", "/v1/tools/call", extra)).as_bytes())
            .await
            .unwrap();
        busy.push(tcp);
    }
    tokio::time::sleep(SETTLE).await;
    let mut third = TcpStream::connect(addr).await.unwrap();
    let answer = read_to_close(&mut third).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.contains(
            "serving 2 connections of this address, each with a request in progress \
             (gateway.max_connections_per_peer)"
        ),
        "{answer}"
    );
}

#[tokio::test]
async fn trickled_head_past_the_high_water_mark_is_cut_at_the_short_head_timeout() {
    let ws = tempfile::tempdir().unwrap();
    let addr = start(
        ws.path(),
        ServerLimits {
            high_water: 2,
            header_timeout_under_load: Duration::from_millis(300),
            ..limits()
        },
    )
    .await;
    // Two connections under the mark: the long head timeout.
    let mut under = vec![slow_head(addr).await, slow_head(addr).await];
    tokio::time::sleep(SETTLE).await;
    // The third trickles its head a byte at a time: cut.
    let (mut reader, writer) = slow_head(addr).await.into_split();
    let trickling = trickle(writer);
    let mut buf = [0u8; 1024];
    let closed = tokio::time::timeout(super::tests::HANG, async {
        loop {
            match tokio::io::AsyncReadExt::read(&mut reader, &mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the head past the high-water mark was never cut"
    );
    trickling.abort();
    // Those accepted under the mark are still served.
    for tcp in &mut under {
        let answer = finish_head(tcp).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
}

#[tokio::test]
async fn trickled_head_in_the_health_reserve_is_cut_at_the_short_head_timeout() {
    let ws = tempfile::tempdir().unwrap();
    let addr = start(
        ws.path(),
        ServerLimits {
            max_connections: 1,
            healthz_reserve: 1,
            header_timeout_under_load: Duration::from_millis(300),
            ..limits()
        },
    )
    .await;
    // The one full slot, kept alive.
    let mut held = TcpStream::connect(addr).await.unwrap();
    held.write_all(head("GET", "/healthz", "").as_bytes())
        .await
        .unwrap();
    assert!(read_answer(&mut held).await.starts_with("HTTP/1.1 200"));
    // A reserve connection trickling its head is cut at the short timeout.
    let mut reserve = slow_head(addr).await;
    assert_eq!(
        read_to_close(&mut reserve).await,
        "",
        "cut without an answer"
    );
    // The held connection still works.
    held.write_all(head("GET", "/healthz", "").as_bytes())
        .await
        .unwrap();
    assert!(read_answer(&mut held).await.starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn request_head_over_32_kib_is_refused_with_431() {
    let ws = tempfile::tempdir().unwrap();
    let addr = start(ws.path(), limits()).await;
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let filler = "a".repeat(super::MAX_HEAD_BYTES);
    // The server may close while the head is still being written: a failed write is fine.
    let _ = tcp
        .write_all(head("GET", "/healthz", &format!("x-big: {filler}\r\n")).as_bytes())
        .await;
    let answer = read_to_close(&mut tcp).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
}
