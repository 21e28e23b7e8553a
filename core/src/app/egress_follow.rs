//! The egress proxy of the current configuration: a reload's `[egress]` (limits, names
//! pinned by `resolve`), `[fetch] allow_private` and `[deps] cache_mb` (the download
//! cache's limit) apply from the next connection on, with no restart. Connections already open keep the proxy they started with. Lives in
//! `app/` because it joins the proxy (which knows no load) to the load the reload swaps.

use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use skillbox_channel::stream::{BoxedStream, StreamFuture, StreamHandler};

use crate::calls::LoadCell;
use crate::proxy::egress::{DepsCache, EgressCalls, EgressConfig, EgressProxy, EgressTrust};

/// What a proxy was built from.
type Settings = (EgressConfig, Vec<String>);

/// The egress proxy, rebuilt when the current load's settings differ from its own.
pub(super) struct FollowedEgress {
    calls: Arc<dyn EgressCalls>,
    trust: Arc<EgressTrust>,
    /// The dependency builds' download cache, one for every proxy built.
    cache: Arc<DepsCache>,
    load: OnceLock<Arc<LoadCell>>,
    built: RwLock<(Settings, Arc<EgressProxy>)>,
}

impl std::fmt::Debug for FollowedEgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FollowedEgress").finish_non_exhaustive()
    }
}

impl FollowedEgress {
    /// A proxy of `settings` (the start-up configuration), answering builds from `cache`,
    /// until [`Self::follow`].
    pub(super) fn new(
        calls: Arc<dyn EgressCalls>,
        trust: Arc<EgressTrust>,
        cache: Arc<DepsCache>,
        settings: Settings,
    ) -> Self {
        let proxy = build(&calls, &trust, &cache, &settings);
        Self {
            calls,
            trust,
            cache,
            load: OnceLock::new(),
            built: RwLock::new((settings, proxy)),
        }
    }

    /// From now on, the settings of `load`'s current load.
    pub(super) fn follow(&self, load: Arc<LoadCell>) {
        let _ = self.load.set(load);
    }

    /// The proxy of the current settings (built again when they changed).
    fn current(&self) -> Arc<EgressProxy> {
        let Some(load) = self.load.get() else {
            return Arc::clone(&self.built.read().unwrap_or_else(PoisonError::into_inner).1);
        };
        let loaded = load.current();
        self.cache.set_limit(loaded.config.deps.cache_bytes());
        let wanted = (
            loaded.config.egress.clone(),
            loaded.config.fetch.allow_private.clone(),
        );
        {
            let built = self.built.read().unwrap_or_else(PoisonError::into_inner);
            if built.0 == wanted {
                return Arc::clone(&built.1);
            }
        }
        let proxy = build(&self.calls, &self.trust, &self.cache, &wanted);
        tracing::info!("egress settings changed by a reload: new connections use them");
        *self.built.write().unwrap_or_else(PoisonError::into_inner) = (wanted, Arc::clone(&proxy));
        proxy
    }
}

fn build(
    calls: &Arc<dyn EgressCalls>,
    trust: &Arc<EgressTrust>,
    cache: &Arc<DepsCache>,
    (config, allow_private): &Settings,
) -> Arc<EgressProxy> {
    Arc::new(
        EgressProxy::new(
            Arc::clone(calls),
            config.clone(),
            allow_private.clone(),
            Arc::clone(trust),
        )
        .with_cache(Arc::clone(cache)),
    )
}

impl StreamHandler for FollowedEgress {
    fn serve(&self, call_id: String, token: String, io: BoxedStream) -> StreamFuture<'_> {
        let proxy = self.current();
        Box::pin(async move { proxy.serve_connection(&call_id, &token, io).await })
    }
}
