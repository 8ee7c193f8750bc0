//! The one dispatch both faces call.
//!
//! REST and MCP differ only in how they find the action and assemble its input object; from there
//! on the pipeline is this function, so the two faces cannot disagree:
//!
//! scope check -> [a used idempotency key: replay, or 422 for another request] -> strict decode
//! -> [plan: price the call] -> [estimate: return the price] -> [claim the idempotency key]
//! -> call -> commit (work, settlement, stored answer)
//!
//! A call that the database stopped for a conflict with another one (a deadlock, a serialization
//! failure) had no effect, and runs again from the decode, a few times, before a client sees the
//! 409 ([`crate::retry`]); its key's claim is kept across the runs.
//!
//! The caller has already authenticated (the shared middleware). Everything up to the claim only
//! reads: the price function works out a plan (a parsed file, a resolved list) that the action
//! receives, so a call refused there (scope, validation, a missing list) has done nothing and
//! holds no key. From the claim on, dispatch owns one transaction ([`Ctx::tx`]): the action's
//! writes, its credits (reserved as the transaction begins, settled in it) and its stored answer
//! commit together after the action returns, or none of them does. A failed call therefore had
//! no effect and frees its key; a crash loses the transaction and, once the claim's lease lapses,
//! the key too.

use std::sync::Arc;

use axum::extract::FromRef;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::auth::{self, Principal};
use crate::clock::Clock;
use crate::config::Config;
use crate::credits::{self, Estimate, Price};
use crate::ctx::Ctx;
use crate::db::Db;
use crate::error::ApiError;
use crate::idempotency::{self, Claim, Claimed};
use crate::json::JsonBody;
use crate::lease::Heartbeat;
use crate::paging;
use crate::registry::{Action, ErasedInput, ErasedPlan, Registry};
use crate::retry::{self, Retries};
use crate::scope::Scope;
use crate::words;

pub use crate::registry::{ESTIMATE_FIELD, IDEMPOTENCY_FIELD};

/// What dispatch needs of the server: the database, the clock, the configuration and the
/// actions. Cheap to clone.
#[derive(Clone)]
pub struct Dispatcher {
    pub db: Db,
    pub clock: Clock,
    pub config: Arc<Config>,
    pub registry: Arc<Registry>,
    /// Counts the calls run again after a conflict ([`crate::retry`]).
    pub retries: Retries,
}
use crate::state::AppState;

impl FromRef<Arc<AppState>> for Dispatcher {
    fn from_ref(state: &Arc<AppState>) -> Self {
        Self {
            db: state.db.clone(),
            clock: state.clock.clone(),
            config: state.config.clone(),
            registry: state.registry.clone(),
            retries: state.retries.clone(),
        }
    }
}

/// A successful dispatch: the body to send and its status, possibly replayed from the first
/// request with the same idempotency key.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub body: JsonBody,
    pub replayed: bool,
}

impl Dispatcher {
    /// Runs `action` for `principal` on an input object.
    ///
    /// Actions that spend credits or hold an idempotency key run on their own task: if the client
    /// goes away mid-call, the call still finishes and commits (or rolls back and frees its key),
    /// instead of being dropped half-way.
    pub async fn dispatch(
        &self,
        principal: Arc<Principal>,
        action: &Action,
        input: Value,
        idempotency_key: Option<String>,
        request_id: Arc<str>,
    ) -> Result<Reply, ApiError> {
        self.dispatch_fields(principal, action, input, idempotency_key, request_id, None)
            .await
    }

    /// [`Dispatcher::dispatch`], with a page's items cut down to `fields` (an MCP call's
    /// `fields`, checked by `Action::chosen_fields`) before the page is held to its bound.
    pub async fn dispatch_fields(
        &self,
        principal: Arc<Principal>,
        action: &Action,
        input: Value,
        idempotency_key: Option<String>,
        request_id: Arc<str>,
        fields: Option<Vec<String>>,
    ) -> Result<Reply, ApiError> {
        // A shared test clock (`--test-clock`) takes the offset another instance may have moved;
        // one small query, and none at all on a normal clock.
        self.clock.sync(&self.db).await?;
        if action.def.price.is_none() && !action.def.idempotent {
            return self
                .run_pipeline(
                    principal,
                    action,
                    input,
                    idempotency_key,
                    request_id,
                    fields,
                )
                .await;
        }
        let this = self.clone();
        let name = action.def.name;
        tokio::spawn(async move {
            let Some(action) = this.registry.get(name) else {
                return Err(ApiError::internal(format!(
                    "action `{name}` vanished from the registry"
                )));
            };
            this.run_pipeline(
                principal,
                action,
                input,
                idempotency_key,
                request_id,
                fields,
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
        &self,
        principal: Arc<Principal>,
        action: &Action,
        input: Value,
        idempotency_key: Option<String>,
        request_id: Arc<str>,
        item_fields: Option<Vec<String>>,
    ) -> Result<Reply, ApiError> {
        let def = action.def;
        let Value::Object(mut fields) = input else {
            return Err(ApiError::invalid_request(format!(
                "The input must be a JSON object, got {}.",
                json_kind(&input)
            )));
        };
        let estimate = def.price.is_some() && take_estimate_flag(&mut fields)?;
        // An estimate or a declared preview answers what the call would do and changes nothing.
        let needed = if estimate || action.asks_preview(&fields) {
            Scope::Read
        } else {
            def.scope
        };
        if !principal.allows(needed) {
            return Err(auth::insufficient_scope(&self.config, &principal, needed));
        }
        if let Some(key) = &idempotency_key {
            idempotency::validate_key(key)?;
        }
        let input = Value::Object(fields);
        let key = idempotency_key
            .clone()
            .filter(|_| def.idempotent)
            .map(|key| idempotency::Key {
                workspace_id: principal.workspace_id.clone(),
                person_id: principal.person_id.clone(),
                action: def.name,
                key,
            });
        let fingerprint = key
            .as_ref()
            .map(|_| idempotency::fingerprint(def.name, &input));
        // A key already used: its first answer, or 422 when it named another request, before
        // this body is judged (a replay answers what the first call did, whatever is true now).
        if let (Some(key), Some(fingerprint), false) = (&key, &fingerprint, estimate)
            && let Some(Claimed::Replay { status, body }) =
                idempotency::recall(&self.db, &self.clock, key, fingerprint).await?
        {
            return replay(status, &body);
        }
        let Value::Object(mut fields) = input else {
            unreachable!("the input was an object above")
        };
        crate::input::prepare(&mut fields, &action.input_schema)?;
        check_fields(action, &fields)?;
        for (name, value) in &fields {
            refuse_nul(name, value)?;
        }
        let input = Value::Object(fields);
        let mut decoded = Some((def.decode)(&input, &action.input_schema)?);
        // Kept to decode again if a conflict makes the call run again (`crate::retry`); an
        // input of megabytes (an import's CSV) is not held twice, and such a call is not rerun.
        let input = retry::worth_keeping(&input).then_some(input);

        let mut claim: Option<Claim> = None;
        let mut heartbeat: Option<Heartbeat> = None;
        let mut tries = 0;
        loop {
            tries += 1;
            let decoded = match (decoded.take(), &input) {
                (Some(decoded), _) => decoded,
                (None, Some(input)) => (def.decode)(input, &action.input_schema)?,
                (None, None) => unreachable!("a call without its input is not run again"),
            };
            let ctx = Ctx::new(
                self.db.clone(),
                principal.clone(),
                self.clock.clone(),
                self.config.clone(),
                request_id.clone(),
            );
            let outcome = self
                .try_once(
                    ctx,
                    action,
                    decoded,
                    estimate,
                    (key.as_ref(), fingerprint.as_deref()),
                    item_fields.as_deref(),
                    &mut claim,
                    &mut heartbeat,
                )
                .await;
            match outcome {
                Err(error) if error.is_contention() && input.is_some() && tries < retry::TRIES => {
                    self.retries.retried(retry::Face::Request);
                    tracing::info!(action = def.name, try_number = tries, cause = ?error.internal,
                        "a call met a conflict and runs again");
                    retry::pause(tries).await;
                }
                Err(error) => {
                    if error.is_contention() {
                        self.retries.exhausted(retry::Face::Request);
                    }
                    if let Some(claim) = &claim
                        && let Err(release_error) = claim.release(&self.db).await
                    {
                        tracing::warn!(key = claim.key.key, error = %release_error.message,
                            "could not free the idempotency key of a failed call; its lease will lapse");
                    }
                    return Err(error);
                }
                Ok(reply) => return Ok(reply),
            }
        }
    }

    /// One run of a decoded call: its plan, the estimate or the claim of its key (once, kept in
    /// `claim` across runs), the action and the commit. Whatever fails here has rolled back.
    #[allow(clippy::too_many_arguments)]
    async fn try_once(
        &self,
        ctx: Ctx,
        action: &Action,
        decoded: ErasedInput,
        estimate: bool,
        (key, fingerprint): (Option<&idempotency::Key>, Option<&str>),
        item_fields: Option<&[String]>,
        claim: &mut Option<Claim>,
        heartbeat: &mut Option<Heartbeat>,
    ) -> Result<Reply, ApiError> {
        let def = action.def;
        // The plan: reads only, so whatever fails here has done nothing.
        let planned = match def.price {
            Some(_) => Some(plan(&ctx, action, &decoded).await?),
            None => None,
        };
        if estimate {
            let Some((price, _)) = planned else {
                unreachable!("an estimate is only taken for a priced action")
            };
            let balance = credits::balance(&self.db, &ctx.principal().workspace_id).await?;
            let estimate = Estimate {
                estimate: true,
                sufficient: balance >= price.total,
                price: price.total,
                breakdown: price.breakdown,
                details: price.details,
                balance,
            };
            return Ok(Reply {
                status: StatusCode::OK,
                body: JsonBody::of(&estimate).map_err(ApiError::internal)?,
                replayed: false,
            });
        }

        if claim.is_none()
            && let (Some(key), Some(fingerprint)) = (key, fingerprint)
        {
            match idempotency::claim(&self.db, &self.clock, key.clone(), fingerprint).await? {
                Claimed::Replay { status, body } => return replay(status, &body),
                Claimed::Run(won) => {
                    let (db, clock, renewed) = (self.db.clone(), self.clock.clone(), won.clone());
                    *heartbeat = Some(Heartbeat::start("idempotency claim", move || {
                        let (claim, db, clock) = (renewed.clone(), db.clone(), clock.clone());
                        async move { claim.renew(&db, &clock).await }
                    }));
                    *claim = Some(won);
                }
            }
        }

        let ctx = match claim.as_ref() {
            Some(claim) => ctx.claimed(claim.key.call_id()),
            None => ctx,
        };
        let (ctx, plan) = match planned {
            Some((price, plan)) => (
                ctx.charging(price.total, def.name, key.map(|key| key.key.clone())),
                Some(plan),
            ),
            None => (ctx, None),
        };
        let status = action.success_status();
        // A page too large for an assistant's context is cut short (see `paging`), before an
        // idempotent call stores it, so a replay answers the same; counted after its items are
        // cut down to the fields asked for.
        let answer = (def.call)(ctx.clone(), decoded, plan).await.map(|body| {
            paging::within_bound(match item_fields {
                Some(fields) => paging::only_fields(body, fields),
                None => body,
            })
        });
        let outcome = match answer {
            Ok(body) => commit(&ctx, action, claim.as_ref(), status, &body)
                .await
                .map(|()| body),
            Err(error) => Err(error),
        };
        // Whatever the action wrote and did not commit is rolled back with its transaction
        // (dropped here if it is still open), so a failed call had no effect.
        drop(ctx.take_tx().await);
        outcome.map(|body| Reply {
            status,
            body,
            replayed: false,
        })
    }
}

/// The stored first answer of an idempotent call, sent again.
fn replay(status: u16, body: &Value) -> Result<Reply, ApiError> {
    Ok(Reply {
        status: StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
        body: JsonBody::of(body).map_err(ApiError::internal)?,
        replayed: true,
    })
}

/// Finishes a call that succeeded: a priced call pays (its whole price if the action did not
/// settle), an idempotent one stores its answer, and all of it commits with the action's writes.
async fn commit(
    ctx: &Ctx,
    action: &Action,
    claim: Option<&Claim>,
    status: StatusCode,
    body: &JsonBody,
) -> Result<(), ApiError> {
    if action.def.price.is_some() || claim.is_some() {
        // Begin the transaction if the action never did: the reservation and the stored answer
        // still need one.
        drop(ctx.tx().await?);
    }
    let Some((mut tx, reservation, settled)) = ctx.take_tx().await else {
        return Ok(());
    };
    if let Some(reservation) = reservation.filter(|_| !settled) {
        credits::settle(&mut tx, ctx.clock(), &reservation, reservation.amount, None).await?;
    }
    if let Some(claim) = claim {
        claim
            .complete(&mut tx, status.as_u16(), body.as_str())
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Runs the action's price function: its price and its plan.
async fn plan(
    ctx: &Ctx,
    action: &Action,
    decoded: &ErasedInput,
) -> Result<(Price, ErasedPlan), ApiError> {
    let Some(price) = action.def.price else {
        return Err(ApiError::internal(format!(
            "`{}` has no price function",
            action.def.name
        )));
    };
    let (price, plan) = price(ctx, decoded).await?;
    if price.total < 0 {
        return Err(ApiError::internal(format!(
            "`{}` priced a call at {} credits",
            action.def.name, price.total
        )));
    }
    Ok((price, plan))
}

/// Removes the framework's `estimate_only` flag from the input and reads it.
fn take_estimate_flag(fields: &mut Map<String, Value>) -> Result<bool, ApiError> {
    // The schema says boolean, so a `null` is refused like any other wrong type (a generated
    // client that means "not given" leaves the field out).
    match fields.remove(ESTIMATE_FIELD) {
        None => Ok(false),
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

/// Decodes an input object into `T`, naming the field at fault and saying in JSON words what
/// it takes (from `schema`, the input's JSON Schema, where it has the field).
pub fn decode_input<T: DeserializeOwned>(
    input: &Value,
    schema: Option<&Map<String, Value>>,
) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(input).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner().to_string();
        ApiError::invalid_request(words::decode_message(&path, &inner, schema, Some(input)))
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
