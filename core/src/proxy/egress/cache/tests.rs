use std::io::Read;

use http::{HeaderMap, HeaderValue, Method, StatusCode};

use super::*;

const A: &str = "http://index.test:8080/files/a-1.0-py3-none-any.whl";
const B: &str = "http://index.test:8080/files/b-1.0-py3-none-any.whl";
const C: &str = "https://files.test/c-1.0.tar.gz";

/// Keeps `bytes` as `url`'s answer, written in two pieces.
fn keep(cache: &Arc<DepsCache>, url: &str, bytes: &[u8]) {
    let mut w = cache
        .writer(
            url,
            Some(bytes.len() as u64),
            Some("application/zip".into()),
        )
        .unwrap();
    let (one, two) = bytes.split_at(bytes.len() / 2);
    w.write(one).unwrap();
    w.write(two).unwrap();
    w.commit().unwrap();
}

fn read_hit(cache: &DepsCache, url: &str) -> Option<Vec<u8>> {
    let mut hit = cache.hit(url)?;
    let mut out = Vec::new();
    hit.file.read_to_end(&mut out).unwrap();
    assert_eq!(hit.size, out.len() as u64);
    Some(out)
}

/// The files in the cache's `sha256/` folder, temporary ones included.
fn files(state: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(state.join(CACHE_DIR).join("sha256"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_kept_download_is_served_again_by_its_url_with_its_type() {
    let state = tempfile::tempdir().unwrap();
    let cache = DepsCache::open(state.path(), 1 << 20);
    assert!(cache.hit(A).is_none());
    keep(&cache, A, b"a wheel's bytes");
    assert_eq!(read_hit(&cache, A).unwrap(), b"a wheel's bytes");
    let hit = cache.hit(A).unwrap();
    assert_eq!(hit.content_type.as_deref(), Some("application/zip"));
    // Another URL (another query too) is another key: no false hit.
    assert!(cache.hit(B).is_none());
    assert!(cache.hit(&format!("{A}?v=2")).is_none());
    // Stored by content: the file is named by its SHA-256.
    let sha = hex(ring::digest::digest(&ring::digest::SHA256, b"a wheel's bytes").as_ref());
    assert_eq!(files(state.path()), [sha]);
    // The index outlives the process.
    drop(cache);
    let again = DepsCache::open(state.path(), 1 << 20);
    assert_eq!(read_hit(&again, A).unwrap(), b"a wheel's bytes");
}

#[test]
fn a_truncated_or_abandoned_body_is_never_kept() {
    let state = tempfile::tempdir().unwrap();
    let cache = DepsCache::open(state.path(), 1 << 20);
    // Content-Length 10, 5 bytes arrived before the connection broke.
    let mut w = cache.writer(A, Some(10), None).unwrap();
    w.write(b"12345").unwrap();
    let err = w.commit().unwrap_err();
    assert!(
        matches!(
            err,
            CacheError::Length {
                expected: 10,
                got: 5
            }
        ),
        "{err}"
    );
    assert!(cache.hit(A).is_none());
    // A body dropped before its end (the build went away) leaves nothing either.
    let mut w = cache.writer(B, None, None).unwrap();
    w.write(b"half").unwrap();
    drop(w);
    assert!(cache.hit(B).is_none());
    assert_eq!(files(state.path()), Vec::<String>::new());
    assert_eq!(cache.size(), 0);
}

#[test]
fn the_least_recently_used_files_go_when_the_cache_passes_its_limit() {
    let state = tempfile::tempdir().unwrap();
    let cache = DepsCache::open(state.path(), 250);
    keep(&cache, A, &[1u8; 100]);
    keep(&cache, B, &[2u8; 100]);
    // A used after B: B is now the least recently used.
    assert!(cache.hit(A).is_some());
    keep(&cache, C, &[3u8; 100]);
    let kept: Vec<String> = urls(&cache).into_keys().collect();
    assert_eq!(kept, [A, C], "B went, the cache keeps 250 bytes");
    assert_eq!(cache.size(), 200);
    assert_eq!(files(state.path()).len(), 2);
    // A lower limit on reload evicts at once.
    cache.set_limit(100);
    assert_eq!(urls(&cache).into_keys().collect::<Vec<_>>(), [C]);
    // A file larger than the whole limit is not kept, and evicts nothing.
    keep(&cache, B, &[4u8; 300]);
    assert!(cache.hit(B).is_none());
    assert_eq!(cache.size(), 100);
    // 0 turns the cache off.
    cache.set_limit(0);
    assert!(!cache.enabled());
    assert!(cache.writer(A, None, None).is_none());
    assert_eq!(cache.size(), 0);
}

#[test]
fn a_file_altered_on_disk_is_detected_by_its_sha256_and_never_served() {
    let state = tempfile::tempdir().unwrap();
    let cache = DepsCache::open(state.path(), 1 << 20);
    keep(&cache, A, b"the real wheel");
    let name = files(state.path()).remove(0);
    let path = state.path().join(CACHE_DIR).join("sha256").join(name);
    // Same size, other bytes.
    std::fs::write(&path, b"the evil wheel").unwrap();
    assert!(cache.hit(A).is_none());
    assert!(!path.exists(), "the altered file is removed");
    assert!(urls(&cache).is_empty());
}

#[test]
fn only_whole_answers_to_gets_of_package_files_are_cached() {
    let none = HeaderMap::new();
    for path in [
        "/files/a-1.0-py3-none-any.whl",
        "/f/b-1.0.tar.gz",
        "/f/c-1.0.zip",
        "/npm/-/d-1.0.0.tgz",
        "/f/a-1.0-py3-none-any.WHL?sig=1",
    ] {
        assert!(wants(&Method::GET, path, &none), "{path}");
    }
    for path in [
        "/simple/skbdemo/",
        "/npm/docx",
        "/f/a.whl.metadata",
        "/x?f=a.whl",
    ] {
        assert!(!wants(&Method::GET, path, &none), "{path}");
    }
    assert!(!wants(&Method::HEAD, "/f/a.whl", &none));
    assert!(!wants(&Method::POST, "/f/a.whl", &none));
    let mut range = HeaderMap::new();
    range.insert(http::header::RANGE, HeaderValue::from_static("bytes=0-9"));
    assert!(!wants(&Method::GET, "/f/a.whl", &range));

    assert!(answer_fits(StatusCode::OK, &none));
    for status in [
        StatusCode::NOT_FOUND,
        StatusCode::PARTIAL_CONTENT,
        StatusCode::NOT_MODIFIED,
        StatusCode::FOUND,
    ] {
        assert!(!answer_fits(status, &none), "{status}");
    }
    let mut coded = HeaderMap::new();
    coded.insert(
        http::header::CONTENT_ENCODING,
        HeaderValue::from_static("gzip"),
    );
    assert!(!answer_fits(StatusCode::OK, &coded));
    let mut partial = HeaderMap::new();
    partial.insert(
        http::header::CONTENT_RANGE,
        HeaderValue::from_static("bytes 0-9/100"),
    );
    assert!(!answer_fits(StatusCode::OK, &partial));
}
