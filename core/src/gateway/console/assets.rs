//! The console's static files, compiled into the binary (no CDN, works offline):
//! `console.css` and `console.js`, served under `/console/assets/`.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::Full;

/// Every asset: name, content type, bytes.
const ASSETS: [(&str, &str, &str); 2] = [
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("assets/console.css"),
    ),
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/console.js"),
    ),
];

/// The asset `name`, or 404.
pub fn serve(name: &str) -> Response<Full<Bytes>> {
    let Some((_, content_type, body)) = ASSETS.iter().find(|(n, _, _)| *n == name) else {
        return super::html(
            StatusCode::NOT_FOUND,
            super::pages::message("Not found", "No such console asset."),
        );
    };
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_are_served_with_their_type_and_unknown_ones_are_404() {
        let r = serve("console.js");
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(
            r.headers()[http::header::CONTENT_TYPE],
            "text/javascript; charset=utf-8"
        );
        assert_eq!(serve("../mod.rs").status(), StatusCode::NOT_FOUND);
    }
}
