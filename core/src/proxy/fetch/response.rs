//! The upstream's answer: whether it redirects, and its status, headers and body read
//! within the response cap.

use std::collections::BTreeMap;

use http::header;
use http::{Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use skillbox_protocol::methods::FetchResult;

use super::super::target::Target;
use super::super::ProxyError;
use super::CAP;

pub(super) fn is_redirect(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::MOVED_PERMANENTLY
            | StatusCode::FOUND
            | StatusCode::SEE_OTHER
            | StatusCode::TEMPORARY_REDIRECT
            | StatusCode::PERMANENT_REDIRECT
    )
}

pub(super) async fn read_response(
    response: Response<Incoming>,
    target: &Target,
    head: bool,
    max: usize,
) -> Result<FetchResult, ProxyError> {
    let too_large = || ProxyError::TooLarge {
        capability: CAP,
        what: "response body",
        limit: max as u64,
    };
    let status = response.status().as_u16();
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in response.headers() {
        let value = String::from_utf8_lossy(value.as_bytes());
        headers
            .entry(name.as_str().to_string())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert_with(|| value.into_owned());
    }
    let declared_len = response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if !head && declared_len.is_some_and(|len| len > max as u64) {
        return Err(too_large());
    }
    let mut body = response.into_body();
    let mut buf: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ProxyError::Upstream {
            url: target.display(),
            reason: format!("reading the response body: {}", error_chain(&e)),
        })?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > max {
                return Err(too_large());
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(FetchResult {
        status,
        headers,
        body: String::from_utf8_lossy(&buf).into_owned(),
    })
}

/// An error and its sources, `a: b: c`.
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
