//! `skillbox skill find`: collection indexes read from a file and over HTTP (a one-request
//! server on 127.0.0.1), every refusal of a bad index with its reason, and the installed
//! skills searched beside them.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;

use skillbox_core::skills::find::fetch::FetchError;
use skillbox_core::skills::find::{load_index, search, FoundIn, IndexError, Loaded};
use skillbox_protocol::skill::{discover, DiscoveryOptions};

const INDEX: &str = r#"{"version": 1, "name": "Acme collection",
 "skills": [
  {"name": "pdf", "description": "Read and fill PDF forms", "source": "anthropics/skills",
   "path": "skills/pdf", "ref": "main", "tags": ["documents"], "license": "extra fields are ignored"},
  {"name": "xlsx", "description": "Spreadsheets", "source": "https://example.test/xlsx.tar.gz"}
 ]}"#;

fn write(dir: &Path, name: &str, body: &str) {
    std::fs::write(dir.join(name), body).unwrap();
}

#[test]
fn find_reads_a_local_index_relative_to_the_workspace() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("indexes")).unwrap();
    write(&ws.path().join("indexes"), "acme.json", INDEX);
    let index = load_index("indexes/acme.json", ws.path()).unwrap();
    assert_eq!(index.name, "Acme collection");
    let pdf = &index.skills[0];
    assert_eq!(
        (
            pdf.source.as_str(),
            pdf.path.as_deref(),
            pdf.git_ref.as_deref()
        ),
        ("anthropics/skills", Some("skills/pdf"), Some("main"))
    );
    assert_eq!(pdf.location(), "anthropics/skills/skills/pdf@main");

    let loaded = [Loaded {
        location: "indexes/acme.json".into(),
        index,
    }];
    let found = search("FORMS pdf", &loaded, &[]);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].name, "pdf");
    assert_eq!(found[0].found_in.label(), "Acme collection");
    assert_eq!(search("documents", &loaded, &[]).len(), 1, "tags match");
    assert!(search("pdf spreadsheets", &loaded, &[]).is_empty());
}

/// Serves `response` to one request on 127.0.0.1 and returns the URL.
fn serve_once(response: Vec<u8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap() == 1 {
            head.push(byte[0]);
        }
        let _ = conn.write_all(&response);
    });
    format!("http://{addr}/index.json")
}

fn http_response(status: &str, extra: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[test]
fn find_fetches_an_index_over_http() {
    let url = serve_once(http_response("200 OK", "", INDEX));
    let index = load_index(&url, Path::new("/nonexistent")).unwrap();
    assert_eq!(index.skills.len(), 2);
    assert_eq!(index.skills[1].name, "xlsx");
}

#[tokio::test]
async fn find_fetches_an_index_over_http_from_inside_a_runtime() {
    let url = serve_once(http_response("200 OK", "", INDEX));
    let index = load_index(&url, Path::new("/nonexistent")).unwrap();
    assert_eq!(index.name, "Acme collection");
}

#[test]
fn find_refuses_an_http_error_and_a_redirect_with_the_status() {
    let url = serve_once(http_response("404 Not Found", "", "gone"));
    let err = load_index(&url, Path::new("/")).unwrap_err();
    assert!(
        matches!(
            err,
            IndexError::Fetch {
                source: FetchError::Status { status: 404, .. },
                ..
            }
        ),
        "{err}"
    );
    let url = serve_once(http_response(
        "301 Moved Permanently",
        "location: https://example.test/new.json\r\n",
        "",
    ));
    let err = load_index(&url, Path::new("/")).unwrap_err().to_string();
    assert!(
        err.contains("301") && err.contains("https://example.test/new.json"),
        "{err}"
    );
}

#[test]
fn find_refuses_an_http_index_over_the_size_cap() {
    let response = b"HTTP/1.1 200 OK\r\ncontent-length: 5000000\r\n\r\n{".to_vec();
    let url = serve_once(response);
    let err = load_index(&url, Path::new("/")).unwrap_err();
    assert!(
        matches!(
            err,
            IndexError::Fetch {
                source: FetchError::TooLarge { limit: 4194304 },
                ..
            }
        ),
        "{err}"
    );
}

fn refused(body: &str) -> IndexError {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "index.json", body);
    load_index("index.json", dir.path()).unwrap_err()
}

#[test]
fn find_refuses_a_malformed_index_with_the_reason() {
    let err = refused("{\"version\": 1, \"name\": \"x\", \"skills\": [");
    assert!(matches!(err, IndexError::Parse { .. }), "{err}");
    assert!(err.to_string().contains("docs/skill-index.md"), "{err}");

    let err =
        refused(r#"{"version": 1, "name": "x", "skills": [{"name": "pdf", "description": "d"}]}"#);
    assert!(matches!(err, IndexError::Parse { .. }), "{err}");
    assert!(err.to_string().contains("source"), "{err}");

    let err = refused(
        r#"{"version": 1, "name": "x", "skills": [], "owner": "top-level keys are strict"}"#,
    );
    assert!(err.to_string().contains("owner"), "{err}");

    let err = refused(
        r#"{"version": 1, "name": "x", "skills": [{"name": "Bad_Name", "description": "d", "source": "s"}]}"#,
    );
    match &err {
        IndexError::Entry {
            position, reason, ..
        } => {
            assert_eq!(*position, 1);
            assert!(reason.contains("not a valid skill name"), "{reason}");
        }
        other => panic!("{other}"),
    }

    let err = refused(
        r#"{"version": 1, "name": "x", "skills": [{"name": "pdf", "description": "d", "source": "s", "path": "../../etc"}]}"#,
    );
    assert!(err.to_string().contains("without .."), "{err}");

    let entry = r#"{"name": "pdf", "description": "d", "source": "s"}"#;
    let err = refused(&format!(
        r#"{{"version": 1, "name": "x", "skills": [{entry}, {entry}]}}"#
    ));
    assert!(err.to_string().contains("same name"), "{err}");
}

#[test]
fn find_refuses_an_unknown_index_version() {
    let err = refused(r#"{"version": 2, "name": "x", "skills": [], "shiny": true}"#);
    match &err {
        IndexError::Version { version, .. } => assert_eq!(version, "2"),
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("reads version 1"), "{err}");
}

#[test]
fn find_refuses_a_missing_file_and_an_unsupported_scheme() {
    let dir = tempfile::tempdir().unwrap();
    let err = load_index("nope.json", dir.path()).unwrap_err();
    assert!(matches!(err, IndexError::Read { .. }), "{err}");
    assert!(err.to_string().contains("nope.json"), "{err}");
    let err = load_index("ftp://example.test/index.json", dir.path()).unwrap_err();
    assert!(matches!(err, IndexError::Location { .. }), "{err}");
}

#[test]
fn find_matches_installed_skills() {
    let root = tempfile::tempdir().unwrap();
    for (name, description) in [("pdf-tools", "Merge PDF files"), ("weather", "Forecasts")] {
        let dir = root.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        write(
            &dir,
            "SKILL.md",
            &format!("---\nname: {name}\ndescription: {description}\n---\nUse it.\n"),
        );
    }
    let catalog = discover(&[root.path().to_path_buf()], DiscoveryOptions::default());
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "acme.json", INDEX);
    let loaded = [Loaded {
        location: "acme.json".into(),
        index: load_index("acme.json", dir.path()).unwrap(),
    }];
    let found = search("pdf", &loaded, &catalog.skills);
    let names: Vec<(&str, &str)> = found
        .iter()
        .map(|m| (m.name.as_str(), m.found_in.label()))
        .collect();
    // The exact name first, then the other name hit.
    assert_eq!(
        names,
        [("pdf", "Acme collection"), ("pdf-tools", "installed")]
    );
    assert_eq!(found[1].found_in, FoundIn::Installed);
    assert_eq!(
        found[1].source,
        root.path().join("pdf-tools").display().to_string()
    );
}
