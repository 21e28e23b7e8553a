//! A plain HTTP request in absolute form (`GET http://host[:port]/path HTTP/1.1`, any
//! method): sent to the declared host in origin form, `Host` set to the URL's, hop-by-hop
//! and `Proxy-*` headers removed, `Connection: close`; the body and the answer are copied
//! as they come, and the connection ends with the answer (one request per connection).

use tokio::io::{AsyncRead, AsyncWrite};

use super::head::Head;
use super::relay::{relay, Meter, Way};
use super::Outcome;
use crate::proxy::target::Target;

/// Headers that belong to one hop (RFC 9110 §7.6.1) or to the proxy, never forwarded.
/// `Transfer-Encoding` stays: the body is copied as it was framed.
pub(super) const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
    "host",
];

/// The head sent to the server: origin form, the URL's `Host`, `Connection: close`.
pub fn origin_form(head: &Head, target: &Target) -> Vec<u8> {
    // Headers the program's `Connection` names are hop-by-hop too.
    let named: Vec<String> = head
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
        .filter_map(|(_, v)| std::str::from_utf8(v).ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .collect();
    let mut out = format!(
        "{} {} HTTP/1.{}\r\nHost: {}\r\n",
        head.method,
        target.path_and_query,
        head.minor,
        target.host_header()
    )
    .into_bytes();
    for (name, value) in &head.headers {
        let lower = name.to_ascii_lowercase();
        if HOP_BY_HOP.contains(&lower.as_str())
            || lower.starts_with("proxy-")
            || named.contains(&lower)
        {
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out
}

/// Sends the request (its head rewritten, then `early`: the body bytes already read) and
/// relays until the answer is through. `server` is connected to an address the policy
/// checked.
pub async fn forward<P, S>(
    program: P,
    mut server: S,
    head: &Head,
    target: &Target,
    early: &[u8],
    meter: &Meter,
) -> Outcome
where
    P: AsyncRead + AsyncWrite + Unpin,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let sent = async {
        meter
            .send(&mut server, Way::Out, &origin_form(head, target))
            .await?;
        meter.send(&mut server, Way::Out, early).await
    };
    if let Err(ended) = sent.await {
        return Outcome::allowed(ended.reason());
    }
    Outcome::allowed(relay(program, server, meter).await.reason())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn origin_form_drops_hop_by_hop_and_proxy_headers() {
        let mut io: &[u8] = b"POST http://api.test:8080/a?b=1 HTTP/1.1\r\nHost: evil.test\r\n\
            Proxy-Authorization: x\r\nProxy-Foo: y\r\nConnection: keep-alive, X-Drop\r\n\
            X-Drop: 1\r\nKeep-Alive: 5\r\nContent-Length: 2\r\nAccept: */*\r\n\r\nhi";
        let head = super::super::head::read_head(&mut io, &mut Vec::new())
            .await
            .unwrap();
        let target = Target::parse(&head.target).unwrap();
        let text = String::from_utf8(origin_form(&head, &target)).unwrap();
        assert_eq!(
            text,
            "POST /a?b=1 HTTP/1.1\r\nHost: api.test:8080\r\nContent-Length: 2\r\n\
             Accept: */*\r\nConnection: close\r\n\r\n"
        );
    }
}
