//! The parameters of the history lists (`GET /v1/calls`, `GET /v1/routes`, the console's
//! lists): the default length and the outcome filter.

use skillbox_protocol::result::ErrorKind;

use super::error::ApiError;

/// The `limit` of a list when the request names none.
pub const DEFAULT_LIMIT: usize = 50;

/// `success`, or an error kind (docs/http-api.md).
pub fn parse_outcome(outcome: &str) -> Result<Option<ErrorKind>, ApiError> {
    if outcome == "success" {
        return Ok(None);
    }
    serde_json::from_value::<ErrorKind>(outcome.into())
        .map(Some)
        .map_err(|_| {
            ApiError::new(
                ErrorKind::InvalidArgs,
                format!("outcome must be \"success\" or an error kind (docs/http-api.md), not {outcome:?}"),
            )
        })
}
