//! Calls that name a context's list of files by its digest (docs/sessions.md): an
//! executor that does not hold the list refuses the call before running anything of it
//! (`UNKNOWN_FILE_LIST`: it never got the list, restarted, or let it go) and gets the same
//! call again with the list whole, at once. Again from the same executor: sent through
//! the round robin, the whole list would go to another executor each time, and the one
//! without it would never learn it.

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;
use skillbox_channel::client::ClientError;
use skillbox_protocol::jsonrpc::code;
use std::time::Duration;

use super::{Endpoint, ExecutorPool};

/// The params of a call again with every list of files whole, encoded only when an
/// executor asks for them; `None` for a call that names no list by digest.
pub type Whole<'a> = Option<&'a (dyn Fn() -> Result<Box<RawValue>, ClientError> + Sync)>;

impl ExecutorPool {
    /// Sends `params` to `endpoint`, and `whole` after a refusal for a list not held.
    pub(super) async fn call_on_listed<P: Serialize + ?Sized + Sync>(
        &self,
        endpoint: &Endpoint,
        method_name: &str,
        params: &P,
        whole: Whole<'_>,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let answer = self.call_on(endpoint, method_name, params, timeout).await;
        match (whole, &answer) {
            (Some(whole), Err(ClientError::Rpc(e))) if e.code == code::UNKNOWN_FILE_LIST => {
                tracing::debug!(executor = %endpoint.addr, method = method_name, "the executor does not hold the list of files: sent whole");
                let whole = whole()?;
                self.call_on(endpoint, method_name, &*whole, timeout).await
            }
            _ => answer,
        }
    }
}
