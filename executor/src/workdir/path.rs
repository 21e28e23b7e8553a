//! The rule every path of a context's folder follows (docs/sessions.md): relative,
//! `/`-separated, no empty segment, no `.` or `..`, no NUL. Checked on what the core
//! sends before anything is written under the call's work folder.

/// The segments of `path`, or why it is refused.
pub fn segments(path: &str) -> Result<Vec<&str>, &'static str> {
    if path.is_empty() {
        return Err("the path is empty");
    }
    if path.starts_with('/') {
        return Err("absolute paths are refused");
    }
    if path.contains('\0') {
        return Err("the path holds a NUL byte");
    }
    let parts: Vec<&str> = path.split('/').collect();
    for part in &parts {
        match *part {
            "" => return Err("empty segments are refused"),
            "." | ".." => return Err("`.` and `..` segments are refused"),
            _ => {}
        }
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_refuse_every_path_that_could_leave_the_folder() {
        assert_eq!(segments("in/a.pdf"), Ok(vec!["in", "a.pdf"]));
        for bad in [
            "",
            "/etc/passwd",
            "a//b",
            "a/../b",
            "..",
            "./a",
            "a/",
            "a\0b",
        ] {
            assert!(segments(bad).is_err(), "{bad:?} accepted");
        }
    }
}
