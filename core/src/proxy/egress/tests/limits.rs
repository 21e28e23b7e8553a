//! A program cannot borrow another call's identity or outlive its call; the bytes,
//! connections and idle limits close what passes them; every connection is recorded.

use super::*;

fn web_rig(port: u16, config: EgressConfig) -> Rig {
    Rig::new(
        &[format!("http://web.test:{port}")],
        config,
        &[format!("web.test:{port}")],
    )
}

#[tokio::test]
async fn another_calls_token_is_refused() {
    let server = web_server().await;
    let rig = web_rig(server.port, pinned());
    let head = format!("GET http://web.test:{}/hello HTTP/1.1\r\n\r\n", server.port);
    let (mut program, task) = rig.open_as(CALL, "token-of-another-call");
    let answer = ask_all(&mut program, &head).await;
    assert_refused(
        &answer,
        "403",
        "the capability token does not belong to call \"call-1\"",
    );
    task.await.unwrap();
    let (mut program, task) = rig.open_as("call-2", TOKEN);
    let answer = ask_all(&mut program, &head).await;
    assert_refused(&answer, "403", "no call \"call-2\" is in flight");
    task.await.unwrap();
    // Refused before any call is known: nothing in this call's record.
    assert!(rig.entries().is_empty());
}

#[tokio::test]
async fn a_call_that_ended_reaches_nothing() {
    let server = web_server().await;
    let rig = web_rig(server.port, pinned());
    rig.in_flight.remove_for_test(CALL);
    let (mut program, task) = rig.open();
    let head = format!("GET http://web.test:{}/hello HTTP/1.1\r\n\r\n", server.port);
    let answer = ask_all(&mut program, &head).await;
    assert_refused(&answer, "403", "no call \"call-1\" is in flight");
    task.await.unwrap();
}

#[tokio::test]
async fn bytes_limit_closes_the_connection_that_passes_it() {
    let server = web_server().await;
    let port = server.port;
    let config = EgressConfig {
        max_bytes_per_call: 4096,
        ..pinned()
    };
    let rig = web_rig(port, config);
    let (mut program, task) = rig.open();
    let answer = ask_all(
        &mut program,
        &format!("GET http://web.test:{port}/big?n=100000 HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(answer.len() < 4096, "{} bytes came through", answer.len());
    let entry = only_entry(&rig, task).await;
    assert_eq!(entry.verdict, EgressVerdict::Allowed, "{entry:?}");
    let reason = entry.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("more than 4096 bytes") && reason.contains("max_bytes_per_call"),
        "{entry:?}"
    );
    assert!(entry.bytes_out + entry.bytes_in <= 4096, "{entry:?}");
    // The call's budget is spent: its next connection is cut at once.
    let (mut program, task) = rig.open();
    let _ = ask_all(
        &mut program,
        &format!("GET http://web.test:{port}/hello HTTP/1.1\r\n\r\n"),
    )
    .await;
    task.await.unwrap();
    assert!(rig.entries()[1]
        .reason
        .as_deref()
        .unwrap_or_default()
        .contains("max_bytes_per_call"));
}

#[tokio::test]
async fn connections_limit_refuses_one_more() {
    let cert = api_cert();
    let server = api_server(&cert).await;
    let port = server.port;
    let config = EgressConfig {
        max_connections_per_call: 1,
        ..pinned()
    };
    let rig = Rig::new(
        &[format!("api.test:{port}")],
        config,
        &[format!("api.test:{port}")],
    );
    let connect = format!("CONNECT api.test:{port} HTTP/1.1\r\n\r\n");
    // The first tunnel stays open (waiting for its ClientHello).
    let (mut first, first_task) = rig.open();
    assert!(ask(&mut first, &connect).await.starts_with("HTTP/1.1 200"));
    let (mut second, second_task) = rig.open();
    let answer = ask_all(&mut second, &connect).await;
    assert_refused(
        &answer,
        "403",
        "the call has 1 connections open through the proxy",
    );
    assert!(refused_header(&answer).contains("max_connections_per_call"));
    second_task.await.unwrap();
    // Once the first ends, its slot is free again.
    drop(first);
    first_task.await.unwrap();
    let (mut third, third_task) = rig.open();
    assert!(ask(&mut third, &connect).await.starts_with("HTTP/1.1 200"));
    drop(third);
    third_task.await.unwrap();
    let verdicts: Vec<_> = rig.entries().iter().map(|e| e.verdict).collect();
    assert_eq!(verdicts.len(), 3);
    assert_eq!(
        verdicts[0],
        EgressVerdict::Refused,
        "the second, refused, ended first"
    );
}

#[tokio::test]
async fn idle_server_is_cut_at_the_idle_timeout() {
    let server = web_server().await;
    let port = server.port;
    let config = EgressConfig {
        idle_timeout_ms: 300,
        ..pinned()
    };
    let rig = web_rig(port, config);
    let (mut program, task) = rig.open();
    let began = std::time::Instant::now();
    let answer = ask_all(
        &mut program,
        &format!("GET http://web.test:{port}/slow HTTP/1.1\r\n\r\n"),
    )
    .await;
    let took = began.elapsed();
    assert_eq!(answer, "");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "{took:?}"
    );
    let entry = only_entry(&rig, task).await;
    assert_eq!(entry.verdict, EgressVerdict::Allowed);
    assert!(entry
        .reason
        .unwrap_or_default()
        .contains("nothing moved for 300 ms ([egress] idle_timeout_ms)"));
}

#[tokio::test]
async fn unreachable_server_is_502_and_recorded_as_allowed_with_the_reason() {
    // A port nothing listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let rig = web_rig(port, pinned());
    let (mut program, task) = rig.open();
    let answer = ask_all(
        &mut program,
        &format!("GET http://web.test:{port}/ HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    assert!(
        answer.contains("X-Skillbox-Error: cannot connect to the server"),
        "{answer}"
    );
    let entry = only_entry(&rig, task).await;
    assert_eq!(entry.verdict, EgressVerdict::Allowed);
    assert!(entry.reason.unwrap_or_default().contains("cannot connect"));
}

#[tokio::test]
async fn every_connection_is_in_the_call_record_with_its_bytes() {
    let server = web_server().await;
    let port = server.port;
    let rig = web_rig(port, pinned());
    for head in [
        format!("GET http://web.test:{port}/hello HTTP/1.1\r\n\r\n"),
        "CONNECT evil.test:443 HTTP/1.1\r\n\r\n".to_string(),
        format!("GET http://web.test:{port}/big?n=1000 HTTP/1.1\r\n\r\n"),
    ] {
        let (mut program, task) = rig.open();
        let answer = ask_all(&mut program, &head).await;
        task.await.unwrap();
        let last = rig.entries().pop().unwrap();
        match last.verdict {
            EgressVerdict::Allowed => {
                assert_eq!(last.bytes_in, answer.len() as u64);
                assert!(last.bytes_out >= head.len() as u64 - 20, "{last:?}");
            }
            EgressVerdict::Refused => assert_eq!((last.bytes_out, last.bytes_in), (0, 0)),
        }
        assert!(last.started_ms > 0);
    }
    let egress = rig.call.egress.snapshot();
    let hosts: Vec<_> = egress
        .connections
        .iter()
        .map(|e| (e.host.as_str(), e.verdict))
        .collect();
    assert_eq!(
        hosts,
        [
            ("web.test", EgressVerdict::Allowed),
            ("evil.test", EgressVerdict::Refused),
            ("web.test", EgressVerdict::Allowed),
        ]
    );
    assert!(egress.connections[2].bytes_in > 1000);
}
