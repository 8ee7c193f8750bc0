//! Small types and helpers every resource module shares.

use schemars::JsonSchema;
use serde::Serialize;

use outreach_runtime::ApiError;

/// What a `delete_*` action returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Deleted {
    pub id: String,
    pub deleted: bool,
}

/// Serialises a value stored as JSON text (tags, custom fields, criteria).
pub fn json_text<T: Serialize>(value: &T) -> Result<String, ApiError> {
    serde_json::to_string(value).map_err(ApiError::internal)
}
