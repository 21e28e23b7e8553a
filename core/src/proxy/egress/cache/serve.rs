//! The cache as one read connection of a dependency build uses it (`intercept.rs`): a
//! request's key, a hit answered without asking upstream, and each hit noted in the
//! call's egress log.

use std::sync::Arc;

use http::{HeaderMap, Method};
use hyper::Response;

use super::{body, wants, DepsCache};
use crate::proxy::egress::log::EgressLog;
use crate::proxy::egress::masking::ProxyBody;
use crate::proxy::target::Target;

/// The cache, for the connection of a build whose egress is `log`.
#[derive(Debug, Clone)]
pub struct CacheUse {
    /// The cache.
    pub cache: Arc<DepsCache>,
    /// The build's egress log (the URLs served from the cache go in it).
    pub log: EgressLog,
}

impl CacheUse {
    /// The cache's key of a request to `target` (the connection's origin) for
    /// `path_and_query`, when the cache wants it ([`wants`]): the whole URL, its scheme,
    /// host and port in lower case.
    pub fn key(
        &self,
        target: &Target,
        method: &Method,
        path_and_query: &str,
        headers: &HeaderMap,
    ) -> Option<String> {
        wants(method, path_and_query, headers)
            .then(|| format!("{}{path_and_query}", target.origin().to_ascii_lowercase()))
    }

    /// The answer for `url` from the cache, checked against its SHA-256, when it holds it.
    pub async fn hit(&self, url: &str) -> Option<Response<ProxyBody>> {
        let cache = Arc::clone(&self.cache);
        let key = url.to_string();
        let hit = tokio::task::spawn_blocking(move || cache.hit(&key))
            .await
            .ok()
            .flatten()?;
        tracing::info!(%url, bytes = hit.size, "deps cache: served from the cache");
        self.log.served_from_cache(url);
        Some(body::hit_answer(hit))
    }
}
