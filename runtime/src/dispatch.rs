//! The one dispatch both faces call.
//!
//! REST and MCP differ only in how they find the action and assemble its input object; from there
//! on the pipeline is this function, so the two faces cannot disagree: scope check, strict decode,
//! then the call. The caller has already authenticated (the shared middleware). Idempotency and
//! credits slot in between decode and call; until they are built, an action that declares them
//! answers 501 `not_implemented` rather than silently running without them.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::auth::{self, Principal};
use crate::ctx::Ctx;
use crate::error::{ApiError, ErrorCode};
use crate::registry::Action;
use crate::server::AppState;

/// Runs `action` for `principal` on an input object; returns the output JSON.
pub async fn dispatch(
    state: &AppState,
    principal: Arc<Principal>,
    action: &Action,
    input: Value,
    request_id: Arc<str>,
) -> Result<Value, ApiError> {
    let def = action.def;
    if !principal.allows(def.scope) {
        return Err(auth::insufficient_scope(state, &principal, def.scope));
    }
    check_fields(action, &input)?;
    let decoded = (def.decode)(input)?;
    if def.price.is_some() || def.idempotent {
        return Err(ApiError::new(
            ErrorCode::NotImplemented,
            format!(
                "`{}` spends credits or honours idempotency keys, which this server does not support yet; nothing was done.",
                def.name
            ),
        ));
    }
    let ctx = Ctx::new(state.db.clone(), principal, state.clock.clone(), state.config.clone(), request_id);
    (def.call)(ctx, decoded).await
}

/// Refuses a non-object input and names unknown top-level fields with the ones expected.
fn check_fields(action: &Action, input: &Value) -> Result<(), ApiError> {
    let Value::Object(fields) = input else {
        return Err(ApiError::invalid_request(format!(
            "The input must be a JSON object, got {}.",
            json_kind(input)
        )));
    };
    let unknown: Vec<&str> = fields.keys().map(String::as_str).filter(|key| !action.input_fields.contains(*key)).collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let expected = if action.input_fields.is_empty() {
        "this action takes no fields".to_owned()
    } else {
        format!(
            "expected {}",
            action.input_fields.iter().map(|field| format!("`{field}`")).collect::<Vec<_>>().join(", ")
        )
    };
    let names = unknown.iter().map(|field| format!("`{field}`")).collect::<Vec<_>>().join(", ");
    let noun = if unknown.len() == 1 { "Unknown field" } else { "Unknown fields" };
    Err(ApiError::invalid_request(format!("{noun} {names}: {expected}.")))
}

/// Decodes an input object into `T`, naming the field at fault.
pub fn decode_input<T: DeserializeOwned>(input: Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(input).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner().to_string();
        let message = if path == "." || inner.contains('`') && inner.contains(&path) {
            format!("Invalid input: {inner}.")
        } else {
            format!("Invalid field `{path}`: {inner}.")
        };
        ApiError::invalid_request(message)
    })
}

pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
