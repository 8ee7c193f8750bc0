//! Small types and helpers every resource module shares.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

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

/// For `#[serde(default, deserialize_with = "crate::common::patch")]` on an `Option<Option<T>>`
/// field of an update input: absent keeps the value, `null` clears it, a value sets it.
pub fn patch<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}
