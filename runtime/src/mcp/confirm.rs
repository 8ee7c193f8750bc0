//! Asking the person before a call that reaches people or spends many credits
//! ([`crate::confirmations`]), with MCP's elicitation over the multi round-trip requests of
//! 2026-07-28 (SEP-2322), which a stateless server can hold: the first `tools/call` answers
//! `input_required` with one `elicitation/create` in form mode (a boolean `confirm`, the effect in
//! its message) and a `requestState` that binds the answer to this call; the client asks its
//! person and sends the call again with the answer. An accept with `confirm: true` runs the call;
//! a decline, a cancel or `confirm: false` answers the tool error `declined` and does nothing.
//!
//! The `requestState` is the id of a row the question left (`mcp_confirmations`), bound to the
//! credential and to a digest of the tool and its arguments (less `idempotency_key` and
//! `fields`): the answer is honoured once, within ten minutes, for that call only; an answer for
//! other arguments, a stale or a made-up state asks again.
//!
//! Nothing is asked when the call would not run anyway or would do nothing new: beyond the
//! credential's scope, on the read-only connection, the replay of an idempotency key already
//! answered, or a call the preview refuses for its input (the call answers its own refusal). A
//! priced call the balance cannot pay, and a key used for another call, are refused here. A preview that fails for another reason (a fault, a
//! conflict) answers that error, and the call does not run unasked. Nor is anything asked of a
//! client on an older revision (no round trip fits a stateless `tools/call` there), of one that
//! declared no elicitation, of an unattended key, or of a preview (`dry_run`, `estimate_only`).

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequest, ElicitRequestParams, ElicitationSchema,
    InputRequest, InputRequiredResult,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Map, Value};

use super::{Caller, McpFace, error_result};
use crate::confirmations::{self, Look};
use crate::error::{ApiError, ErrorCode};
use crate::registry::{Action, ESTIMATE_FIELD, FIELDS_FIELD, IDEMPOTENCY_FIELD};

/// The key of the one input request, and the field the person's answer sets.
const CONFIRM: &str = "confirm";

impl McpFace {
    /// What a `tools/call` must answer before it runs: `Some` with the question (or, for an
    /// answered one the person turned down, the `declined` error; or the error a preview met),
    /// `None` to run the call.
    pub(super) async fn confirm_first(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<CallToolResponse>, McpError> {
        let Some(action) = self.state.registry.by_tool_name(&request.name) else {
            return Ok(None);
        };
        let confirmation = confirmations::of(action.name());
        if confirmation.is_none() && action.def.price.is_none() {
            return Ok(None);
        }
        let round_trips = context
            .protocol_version()
            .is_some_and(|version| !version.has_initialize());
        let asks = context
            .client_capabilities()
            .and_then(|capabilities| capabilities.elicitation)
            // An empty `elicitation` object is form mode, as the spec reads it.
            .is_some_and(|elicitation| elicitation.form.is_some() || elicitation.url.is_none());
        if !round_trips || !asks {
            return Ok(None);
        }
        let parts = context.extensions.get::<http::request::Parts>();
        let readonly = parts
            .and_then(|parts| parts.extensions.get::<super::Selection>())
            .is_some_and(|selection| selection.readonly);
        let caller = self.caller(parts)?;
        let principal = &caller.principal;
        if principal.unattended
            || !principal.allows(action.def.scope)
            || (readonly && !action.is_read_only())
        {
            return Ok(None);
        }
        let mut arguments = request.arguments.clone().unwrap_or_default();
        let key = arguments.remove(IDEMPOTENCY_FIELD);
        arguments.remove(FIELDS_FIELD);
        if action.asks_preview(&arguments)
            || arguments.get(ESTIMATE_FIELD) == Some(&Value::Bool(true))
        {
            return Ok(None);
        }
        let binding = binding(action, &arguments);
        if let Some(Value::String(key)) = key
            && action.def.idempotent
        {
            match self.recall(&caller, action, &binding, key).await {
                // A finished call sent again replays its answer: nothing new to ask about.
                Ok(true) => return Ok(None),
                Ok(false) => {}
                // A key used for another call (`idempotency_key_reused`), or a fault.
                Err(error) => return Ok(Some(answered_with(error, &caller))),
            }
        }
        if let (Some(token), Some(answer)) = (
            request.request_state.as_deref(),
            request
                .input_responses
                .as_ref()
                .and_then(|responses| responses.get(CONFIRM)),
        ) && (match confirmations::take_answer(
            &self.state.db,
            &self.state.clock,
            token,
            &principal.credential_id,
            &binding,
        )
        .await
        {
            Ok(taken) => taken,
            Err(error) => return Ok(Some(answered_with(error, &caller))),
        }) {
            return Ok(if accepted(answer) {
                None
            } else {
                let error = ApiError::new(
                    ErrorCode::DECLINED,
                    format!(
                        "The call was not confirmed, so `{}` did nothing.",
                        request.name
                    ),
                );
                Some(error_result(&error.body()).into())
            });
        }
        let mut sentences = Vec::new();
        // Below the scope with which it reaches people, the call has nothing to confirm but
        // its price.
        let confirmation = confirmation.filter(|confirmation| {
            confirmation
                .reaches_people_with
                .is_none_or(|scope| principal.allows(scope))
        });
        if let Some(confirmation) = confirmation {
            let looked = match confirmation.look {
                Look::Preview => {
                    let mut preview = arguments.clone();
                    let switch = action.preview.map_or("dry_run", |preview| preview.field);
                    preview.insert(switch.to_owned(), Value::Bool(true));
                    self.dispatch_by_name(&caller, action.name(), Value::Object(preview))
                        .await
                }
                Look::Read {
                    action: read,
                    id_field,
                } => {
                    let id = arguments.get(id_field).cloned().unwrap_or(Value::Null);
                    let input = Value::Object(Map::from_iter([("id".to_owned(), id)]));
                    self.dispatch_by_name(&caller, read, input).await
                }
            };
            match looked {
                Ok(looked) => sentences.extend((confirmation.describe)(&arguments, &looked)),
                Err(error) => return Ok(refused_or_failed(error, &caller)),
            }
        }
        if action.def.price.is_some() {
            let mut estimate = arguments.clone();
            estimate.insert(ESTIMATE_FIELD.to_owned(), Value::Bool(true));
            let estimate = match self
                .dispatch_by_name(&caller, action.name(), Value::Object(estimate))
                .await
            {
                Ok(estimate) => estimate,
                Err(error) => return Ok(refused_or_failed(error, &caller)),
            };
            let figure = |name: &str| estimate.get(name).and_then(Value::as_i64);
            if let (Some(price), Some(balance)) = (figure("price"), figure("balance")) {
                // A call the balance cannot pay is refused here, as the call would refuse it:
                // nothing to ask, and no later top-up lets it through unasked.
                if estimate.get("sufficient") == Some(&Value::Bool(false)) {
                    let error = crate::credits::insufficient(price, balance);
                    return Ok(Some(error_result(&error.body()).into()));
                }
                sentences.extend(confirmations::price_sentence(price, balance));
            }
        }
        if sentences.is_empty() {
            return Ok(None);
        }
        let token = match confirmations::ask(
            &self.state.db,
            &self.state.clock,
            &principal.credential_id,
            &binding,
        )
        .await
        {
            Ok(token) => token,
            Err(error) => return Ok(Some(answered_with(error, &caller))),
        };
        Ok(Some(question(&sentences.join(" "), token)?))
    }

    /// Whether `key` holds this call's finished answer (a client sending a finished call again,
    /// which replays it); the refusal when the key names another call. `binding` is the call's
    /// idempotency fingerprint too: the same digest of the tool and its arguments.
    async fn recall(
        &self,
        caller: &Caller,
        action: &Action,
        binding: &str,
        key: String,
    ) -> Result<bool, ApiError> {
        let key = crate::idempotency::Key {
            workspace_id: caller.principal.workspace_id.clone(),
            person_id: caller.principal.person_id.clone(),
            action: action.def.name,
            key,
        };
        let recalled =
            crate::idempotency::recall(&self.state.db, &self.state.clock, &key, binding).await?;
        Ok(matches!(
            recalled,
            Some(crate::idempotency::Claimed::Replay { .. })
        ))
    }
}

/// An error met before asking, as the call's tool error: a fault logged with the request's id.
fn answered_with(error: ApiError, caller: &Caller) -> CallToolResponse {
    error_result(&error.log(&caller.request_id).body()).into()
}

/// A preview's or estimate's error: one for the call's input is the call's own refusal, so the
/// call runs and answers it (nothing to ask); any other (a fault, a conflict) is answered as it
/// is, and the call does not run unasked.
fn refused_or_failed(error: ApiError, caller: &Caller) -> Option<CallToolResponse> {
    if error.status().is_client_error() && !error.is_contention() {
        return None;
    }
    Some(answered_with(error, caller))
}

/// The digest that binds an answer to one call: the tool and its arguments, as dispatch
/// fingerprints an idempotent call.
fn binding(action: &Action, arguments: &Map<String, Value>) -> String {
    crate::idempotency::fingerprint(action.name(), &Value::Object(arguments.clone()))
}

/// Whether the person accepted and ticked `confirm`.
fn accepted(answer: &Value) -> bool {
    answer.get("action").and_then(Value::as_str) == Some("accept")
        && answer
            .get("content")
            .and_then(|content| content.get(CONFIRM))
            .and_then(Value::as_bool)
            == Some(true)
}

/// The `input_required` answer: one form with the effect and a `confirm` box.
fn question(effect: &str, token: String) -> Result<CallToolResponse, McpError> {
    let schema = ElicitationSchema::builder()
        .required_bool_with(CONFIRM, |schema| {
            schema
                .title("Go ahead")
                .description("Tick to let the call go ahead; anything else does nothing.")
        })
        .build()
        .map_err(|error| McpError::internal_error(error.to_string(), None))?;
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!("{effect} Go ahead?"),
        requested_schema: schema,
    };
    let requests = std::collections::BTreeMap::from([(
        CONFIRM.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    )]);
    Ok(InputRequiredResult::new(Some(requests), Some(token)).into())
}
