//! The one dispatch both faces call.
//!
//! REST and MCP differ only in how they find the action and assemble its input object; from there
//! on the pipeline is this function, so the two faces cannot disagree:
//!
//! scope check -> strict decode -> [estimate and return] -> [claim the idempotency key or replay]
//! -> [reserve credits] -> call -> [release what a failed call held] -> [store the response]
//!
//! The caller has already authenticated (the shared middleware). Requests refused before the
//! action begins (scope, validation, 402) store nothing, so they can be fixed and retried with
//! the same idempotency key.

use std::sync::Arc;

use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::auth::{self, Principal};
use crate::credits::{self, Estimate, Source};
use crate::ctx::Ctx;
use crate::error::{ApiError, ErrorCode};
use crate::idempotency::{self, Claim, Claimed};
use crate::registry::Action;
pub use crate::registry::{ESTIMATE_FIELD, IDEMPOTENCY_FIELD};
use crate::scope::Scope;
use crate::state::AppState;

/// A successful dispatch: the body to send and its status, possibly replayed from the first
/// request with the same idempotency key (a replayed status may be an error status).
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
    pub replayed: bool,
}

/// Runs `action` for `principal` on an input object.
///
/// Actions that spend credits or hold an idempotency key run on their own task: if the client
/// goes away mid-call, the call still finishes, releases what it did not use and stores its
/// answer, instead of being dropped half-way with credits held and the key stuck.
pub async fn dispatch(
    state: &Arc<AppState>,
    principal: Arc<Principal>,
    action: &Action,
    input: Value,
    idempotency_key: Option<String>,
    request_id: Arc<str>,
) -> Result<Reply, ApiError> {
    if action.def.price.is_none() && !action.def.idempotent {
        return run_pipeline(state, principal, action, input, idempotency_key, request_id).await;
    }
    let state = state.clone();
    let name = action.def.name;
    tokio::spawn(async move {
        let Some(action) = state.registry.get(name) else {
            return Err(ApiError::internal(format!(
                "action `{name}` vanished from the registry"
            )));
        };
        run_pipeline(
            &state,
            principal,
            action,
            input,
            idempotency_key,
            request_id,
        )
        .await
    })
    .await
    .unwrap_or_else(|error| {
        Err(ApiError::internal(format!(
            "the action's task failed: {error}"
        )))
    })
}

async fn run_pipeline(
    state: &AppState,
    principal: Arc<Principal>,
    action: &Action,
    input: Value,
    idempotency_key: Option<String>,
    request_id: Arc<str>,
) -> Result<Reply, ApiError> {
    let def = action.def;
    let Value::Object(mut fields) = input else {
        return Err(ApiError::invalid_request(format!(
            "The input must be a JSON object, got {}.",
            json_kind(&input)
        )));
    };
    let estimate = def.price.is_some() && take_estimate_flag(&mut fields)?;
    let needed = if estimate { Scope::Read } else { def.scope };
    if !principal.allows(needed) {
        return Err(auth::insufficient_scope(state, &principal, needed));
    }
    check_fields(action, &fields)?;
    for (name, value) in &fields {
        refuse_nul(name, value)?;
    }
    if let Some(key) = &idempotency_key {
        idempotency::validate_key(key)?;
    }
    let input = Value::Object(fields);
    let fingerprint = (def.idempotent && idempotency_key.is_some())
        .then(|| idempotency::fingerprint(def.name, &input));
    let decoded = (def.decode)(input)?;
    let ctx = Ctx::new(
        state.db.clone(),
        principal.clone(),
        state.clock.clone(),
        state.config.clone(),
        request_id,
    );

    if estimate {
        let price = price(&ctx, action, &decoded).await?;
        let balance = credits::balance(&state.db, &principal.workspace_id).await?;
        let estimate = Estimate {
            estimate: true,
            price: price.total,
            breakdown: price.breakdown,
            details: price.details,
            balance,
            sufficient: balance >= price.total,
        };
        let body = serde_json::to_value(estimate).map_err(ApiError::internal)?;
        return Ok(Reply {
            status: StatusCode::OK,
            body,
            replayed: false,
        });
    }

    let claim = match (fingerprint, idempotency_key) {
        (Some(fingerprint), Some(key)) => {
            let claim = Claim {
                workspace_id: principal.workspace_id.clone(),
                person_id: principal.person_id.clone(),
                action: def.name,
                key,
            };
            match idempotency::claim(&state.db, &state.clock, claim, &fingerprint).await? {
                Claimed::Replay { status, body } => {
                    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
                    return Ok(Reply {
                        status,
                        body,
                        replayed: true,
                    });
                }
                Claimed::Run(claim) => Some(claim),
            }
        }
        _ => None,
    };

    let result = run(state, &ctx, action, decoded, claim.as_ref()).await;
    let Some(claim) = claim else {
        return result
            .map(|body| Reply {
                status: action.success_status(),
                body,
                replayed: false,
            })
            .map_err(ApiError::from);
    };
    match result {
        Ok(body) => {
            // The work is done and paid for: a failure to remember the answer must not turn it
            // into an error (the caller would retry into a stuck key), so it is only logged.
            if let Err(error) =
                idempotency::complete(&state.db, &claim, action.success_status().as_u16(), &body)
                    .await
            {
                tracing::error!(key = claim.key, %error, "could not store the response of an idempotent call");
            }
            Ok(Reply {
                status: action.success_status(),
                body,
                replayed: false,
            })
        }
        Err(Failure::BeforeStart(error)) => {
            idempotency::abandon(&state.db, &claim).await?;
            Err(error)
        }
        Err(Failure::Ran(error))
            if error.nothing_done || error.code == ErrorCode::InternalError =>
        {
            // Nothing was done (or our fault undid it): let the same key be used again.
            idempotency::abandon(&state.db, &claim).await?;
            Err(error)
        }
        Err(Failure::Ran(error)) => {
            idempotency::complete(&state.db, &claim, error.status().as_u16(), &error.body())
                .await?;
            Err(error)
        }
    }
}

/// Why a call failed: before the action began (nothing to remember) or while it ran.
enum Failure {
    BeforeStart(ApiError),
    Ran(ApiError),
}

impl From<Failure> for ApiError {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::BeforeStart(error) | Failure::Ran(error) => error,
        }
    }
}

/// Reserves the price (priced actions), calls the action, and releases what a failure held.
async fn run(
    state: &AppState,
    ctx: &Ctx,
    action: &Action,
    decoded: crate::registry::ErasedInput,
    claim: Option<&Claim>,
) -> Result<Value, Failure> {
    let def = action.def;
    let mut ctx = ctx.clone();
    let mut reservation = None;
    if def.price.is_some() {
        let price = price(&ctx, action, &decoded)
            .await
            .map_err(Failure::BeforeStart)?;
        let principal = ctx.principal();
        let source = Source {
            action: Some(def.name),
            idempotency_key: claim.map(|claim| claim.key.as_str()),
            person_id: Some(&principal.person_id),
            ..Source::default()
        };
        let held = credits::reserve(
            &state.db,
            &state.clock,
            &principal.workspace_id,
            price.total,
            &source,
        )
        .await
        .map_err(Failure::BeforeStart)?;
        reservation = Some(held.clone());
        ctx = ctx.with_reservation(held);
    }
    let result = (def.call)(ctx, decoded).await;
    if let (Err(_), Some(reservation)) = (&result, &reservation)
        && let Err(error) = credits::release_remaining(&state.db, &state.clock, reservation).await
    {
        tracing::error!(reservation = reservation.id, %error, "could not release the credits of a failed action");
    }
    result.map_err(Failure::Ran)
}

async fn price(
    ctx: &Ctx,
    action: &Action,
    decoded: &crate::registry::ErasedInput,
) -> Result<credits::Price, ApiError> {
    let Some(price) = action.def.price else {
        return Err(ApiError::internal(format!(
            "`{}` has no price function",
            action.def.name
        )));
    };
    let price = price(ctx, decoded).await?;
    if price.total < 0 {
        return Err(ApiError::internal(format!(
            "`{}` priced a call at {} credits",
            action.def.name, price.total
        )));
    }
    Ok(price)
}

/// Removes the framework's `estimate_only` flag from the input and reads it.
fn take_estimate_flag(fields: &mut Map<String, Value>) -> Result<bool, ApiError> {
    match fields.remove(ESTIMATE_FIELD) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(flag)) => Ok(flag),
        Some(other) => Err(ApiError::invalid_request(format!(
            "Invalid field `{ESTIMATE_FIELD}`: expected `true` or `false`, got {}.",
            json_kind(&other)
        ))),
    }
}

/// Names unknown top-level fields with the ones expected.
fn check_fields(action: &Action, fields: &Map<String, Value>) -> Result<(), ApiError> {
    let unknown: Vec<&str> = fields
        .keys()
        .map(String::as_str)
        .filter(|key| !action.input_fields.contains(*key))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let expected = if action.input_fields.is_empty() {
        "this action takes no fields".to_owned()
    } else {
        format!(
            "expected {}",
            action
                .input_fields
                .iter()
                .map(|field| format!("`{field}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let names = unknown
        .iter()
        .map(|field| format!("`{field}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let noun = if unknown.len() == 1 {
        "Unknown field"
    } else {
        "Unknown fields"
    };
    Err(ApiError::invalid_request(format!(
        "{noun} {names}: {expected}."
    )))
}

/// Refuses text holding U+0000 anywhere in the input: PostgreSQL cannot store it, and no field
/// of this API means it, so it is a 400 on every backend rather than a 500 on one.
fn refuse_nul(path: &str, value: &Value) -> Result<(), ApiError> {
    match value {
        Value::String(text) if text.contains('\0') => Err(ApiError::invalid_request(format!(
            "Invalid field `{path}`: text must not contain the NUL character (U+0000)."
        ))),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(index, item)| refuse_nul(&format!("{path}[{index}]"), item)),
        Value::Object(fields) => fields.iter().try_for_each(|(key, item)| {
            if key.contains('\0') {
                return Err(ApiError::invalid_request(format!(
                    "Invalid field `{path}`: keys must not contain the NUL character (U+0000)."
                )));
            }
            refuse_nul(&format!("{path}.{key}"), item)
        }),
        _ => Ok(()),
    }
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
