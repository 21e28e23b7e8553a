//! The streams the core's callback listener serves (`POST /egress`, `POST /file`): a
//! program's connection to the egress proxy of the current configuration, and a call's
//! context file coming to the executor as raw bytes (`calls/file_stream.rs`).

use std::sync::Arc;

use skillbox_channel::stream::{BoxedStream, StreamFuture, StreamHandler};

use super::egress_follow::FollowedEgress;
use crate::calls::{file_stream, InFlight};

/// Both kinds of stream, each to its server.
pub(super) struct ChannelStreams {
    pub(super) egress: Arc<FollowedEgress>,
    pub(super) in_flight: Arc<InFlight>,
}

impl StreamHandler for ChannelStreams {
    fn serve(&self, call_id: String, token: String, io: BoxedStream) -> StreamFuture<'_> {
        self.egress.serve(call_id, token, io)
    }

    fn serve_file(&self, call_id: String, token: String, io: BoxedStream) -> StreamFuture<'_> {
        Box::pin(async move { file_stream::serve(&self.in_flight, &call_id, token, io).await })
    }
}
