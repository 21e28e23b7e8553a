//! The rules of a context file's path ([`check_path`]) and the type its name says
//! ([`content_type`]).

use unicode_general_category::{get_general_category, GeneralCategory};

use super::{FileError, MAX_PATH_BYTES};

/// The segments of `path`, or the rule it breaks.
pub fn check_path(path: &str) -> Result<Vec<&str>, FileError> {
    let bad = |rule| FileError::BadPath {
        path: path.chars().take(200).collect(),
        rule,
    };
    if path.is_empty() {
        return Err(bad("it is empty"));
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(bad("it is over 1024 bytes"));
    }
    if path.starts_with('/') {
        return Err(bad(
            "it is absolute; give a path relative to the context's folder",
        ));
    }
    if path.chars().any(|c| c.is_control()) {
        return Err(bad("it holds a control character"));
    }
    if path.chars().any(is_format) {
        return Err(bad(
            "it holds a Unicode format character (general category Cf: a bidi override such as \
             U+202E, a zero-width character, U+FEFF), which would show operators another name \
             than the file's",
        ));
    }
    let segments: Vec<&str> = path.split('/').collect();
    for s in &segments {
        match *s {
            "" => return Err(bad("it has an empty segment (`//` or a trailing `/`)")),
            "." | ".." => return Err(bad("`.` and `..` segments are not taken")),
            s if s.len() > 255 => return Err(bad("a segment is over 255 bytes")),
            _ => {}
        }
    }
    Ok(segments)
}

/// Whether `c` is a Unicode format character (general category Cf): invisible, and able to
/// reorder or hide what a name shows (U+202E RIGHT-TO-LEFT OVERRIDE, U+200B..U+200F,
/// U+2066..U+2069, U+FEFF, ...).
fn is_format(c: char) -> bool {
    get_general_category(c) == GeneralCategory::Format
}

/// The `Content-Type` of a file, from its name's extension.
pub fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("txt" | "md" | "log") => "text/plain; charset=utf-8",
        Some("csv") => "text/csv; charset=utf-8",
        Some("json") => "application/json",
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("pdf") => "application/pdf",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("svg") => "image/svg+xml",
        Some("zip") => "application/zip",
        _ => "application/octet-stream",
    }
}
