//! `/settings/webhooks`: the workspace's webhook endpoints with their latest deliveries, and the
//! forms to create one, send it a test, rotate its secret, disable or enable it, and delete it.
//!
//! Unlike the other settings pages, which share [`crate::admin`] with the CLI, this one calls the
//! webhook actions through the one [`Dispatcher`], as the signed-in person: a
//! [`CredentialKind::WebSession`](crate::principal::CredentialKind) principal with their role's
//! scope, read afresh on every call ([`auth::session_principal`]). The actions live above this
//! crate and keep their rules (the address checks, the 16-endpoint cap, `write` to change), so the
//! page cannot drift from the API: an action's refusal is shown with its own sentence and status,
//! and the event types offered are the enum of `create_webhook_endpoint`'s input schema.
//!
//! A new or rotated secret reaches the next page in the session's flash, as a new API key's value
//! does ([`super::keys`]): shown once, gone on reload, gone after five minutes. A test's outcome
//! travels the same way.

use std::sync::Arc;

use askama::Template;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::{FromRef, Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};

use super::keys::ConfirmPage;
use super::{Nav, PageError, SignedIn, display_time, render, see_other};
use crate::auth;
use crate::dispatch::Dispatcher;
use crate::error::ApiError;
use crate::request_id::RequestId;
use crate::session;
use crate::state::AppState;

const PAGE: &str = "/settings/webhooks";

/// The flash of a new or rotated secret: this prefix, the endpoint's id, a space, the secret.
const SECRET_FLASH: &str = "webhook_secret:";

/// The flash of a test's outcome: this prefix and the JSON the action answered.
const TEST_FLASH: &str = "webhook_test:";

/// How many of each endpoint's latest deliveries the page shows.
const RECENT_DELIVERIES: u32 = 10;

/// One endpoint, as the page shows it.
struct EndpointRow {
    id: String,
    url: String,
    description: String,
    event_types: String,
    enabled: bool,
    disabled_reason: String,
    created: String,
    deliveries: Vec<DeliveryRow>,
}

/// One delivery of an endpoint.
struct DeliveryRow {
    when: String,
    event_type: String,
    event_id: String,
    status: String,
    attempt: i64,
    response: String,
    duration: String,
    next_attempt: String,
    error: String,
}

/// What the create form holds (shown again with an error).
#[derive(Default)]
struct EndpointForm {
    url: String,
    description: String,
    event_types: Vec<String>,
}

impl EndpointForm {
    fn has(&self, event_type: &str) -> bool {
        self.event_types.iter().any(|t| t == event_type)
    }
}

/// The secret shown once after a create or a rotation.
struct NewSecret {
    endpoint_id: String,
    url: String,
    value: String,
}

/// A test's outcome, shown once after it.
struct TestOutcome {
    url: String,
    succeeded: bool,
    summary: String,
}

#[derive(Template)]
#[template(path = "web/webhooks.html")]
struct WebhooksPage {
    nav: Nav,
    endpoints: Vec<EndpointRow>,
    event_types: Vec<String>,
    form: EndpointForm,
    manage: bool,
    new_secret: Option<NewSecret>,
    test: Option<TestOutcome>,
    error: Option<String>,
}

/// What one page request needs to call actions: the state, the person and the request's id.
struct Caller<'a> {
    state: &'a Arc<AppState>,
    signed: &'a SignedIn,
    request_id: Arc<str>,
}

impl Caller<'_> {
    /// Runs `action` on `input` as the signed-in person. The outer error is a page (the person
    /// is no longer a member, a fault); the inner one the action's own refusal, to show.
    async fn call(&self, action: &str, input: Value) -> Result<Result<Value, ApiError>, PageError> {
        let Some(action_def) = self.state.registry.get(action) else {
            return Err(
                ApiError::internal(format!("the action `{action}` is not registered")).into(),
            );
        };
        let principal =
            auth::session_principal(self.state, &self.signed.session, &self.signed.workspace_id)
                .await?
                .ok_or_else(|| {
                    PageError::forbidden("You are no longer a member of this workspace.")
                })?;
        let dispatcher = Dispatcher::from_ref(self.state);
        let reply = dispatcher
            .dispatch(
                Arc::new(principal),
                action_def,
                input,
                None,
                self.request_id.clone(),
            )
            .await;
        match reply {
            Ok(reply) => Ok(Ok(reply.body.to_value())),
            Err(error) if error.status().is_client_error() => Ok(Err(error)),
            Err(error) => Err(error.into()),
        }
    }

    /// Like [`Self::call`], with a refusal shown as a message page that leads back here.
    async fn call_or_refuse(&self, action: &str, input: Value) -> Result<Value, PageError> {
        self.call(action, input).await?.map_err(refusal)
    }
}

/// An action's refusal as a page: its status, its sentence.
fn refusal(error: ApiError) -> PageError {
    PageError::message(error.status(), "Not done", error.message).back_to(PAGE)
}

fn request_id(id: Option<Extension<RequestId>>) -> Arc<str> {
    id.map_or_else(|| Arc::from("web"), |Extension(RequestId(id))| id)
}

/// The event types an endpoint may take: the enum in `create_webhook_endpoint`'s input schema.
fn event_types(state: &AppState) -> Vec<String> {
    let Some(action) = state.registry.get("create_webhook_endpoint") else {
        return Vec::new();
    };
    action
        .input_schema
        .get("properties")
        .and_then(|p| p.pointer("/event_types/items/enum"))
        .and_then(Value::as_array)
        .map(|types| {
            types
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn text(value: &Value, field: &str) -> String {
    value
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// An RFC 3339 time of an answer as the pages show times; `—` when absent.
fn when(value: &Value, field: &str) -> String {
    value
        .get(field)
        .and_then(Value::as_str)
        .and_then(|at| {
            time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).ok()
        })
        .map_or_else(
            || "—".to_owned(),
            |at| display_time(i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)),
        )
}

fn delivery_row(delivery: &Value) -> DeliveryRow {
    let response = delivery
        .get("response_status")
        .and_then(Value::as_i64)
        .map_or_else(|| "—".to_owned(), |status| status.to_string());
    let duration = delivery
        .get("duration_ms")
        .and_then(Value::as_i64)
        .map_or_else(|| "—".to_owned(), |ms| format!("{ms} ms"));
    DeliveryRow {
        when: when(delivery, "created_at"),
        event_type: text(delivery, "event_type"),
        event_id: text(delivery, "event_id"),
        status: text(delivery, "status"),
        attempt: delivery.get("attempt").and_then(Value::as_i64).unwrap_or(0),
        response,
        duration,
        next_attempt: when(delivery, "next_attempt_at"),
        error: text(delivery, "error"),
    }
}

async fn endpoint_rows(caller: &Caller<'_>) -> Result<Vec<EndpointRow>, PageError> {
    // The cap is 16 endpoints, so one page of 100 holds them all.
    let listed = caller
        .call_or_refuse("list_webhook_endpoints", json!({"limit": 100}))
        .await?;
    let mut rows = Vec::new();
    for endpoint in listed["items"].as_array().into_iter().flatten() {
        let id = text(endpoint, "id");
        let deliveries = caller
            .call_or_refuse(
                "list_webhook_deliveries",
                json!({"endpoint_id": id, "limit": RECENT_DELIVERIES}),
            )
            .await?;
        let event_types = match endpoint["event_types"].as_array() {
            Some(types) if !types.is_empty() => types
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", "),
            _ => "every event type".to_owned(),
        };
        rows.push(EndpointRow {
            url: text(endpoint, "url"),
            description: text(endpoint, "description"),
            event_types,
            enabled: endpoint["enabled"].as_bool().unwrap_or(false),
            disabled_reason: text(endpoint, "disabled_reason"),
            created: when(endpoint, "created_at"),
            deliveries: deliveries["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(delivery_row)
                .collect(),
            id,
        });
    }
    Ok(rows)
}

/// The page, with what a form or a flash adds to it.
struct Extras {
    status: StatusCode,
    form: EndpointForm,
    error: Option<String>,
    flash: Option<String>,
}

async fn page(caller: &Caller<'_>, extras: Extras) -> Result<Response, PageError> {
    let endpoints = endpoint_rows(caller).await?;
    let url_of = |id: &str| {
        endpoints
            .iter()
            .find(|e| e.id == id)
            .map_or_else(String::new, |e| e.url.clone())
    };
    let flash = extras.flash.unwrap_or_default();
    let new_secret = flash.strip_prefix(SECRET_FLASH).and_then(|rest| {
        let (endpoint_id, value) = rest.split_once(' ')?;
        Some(NewSecret {
            url: url_of(endpoint_id),
            endpoint_id: endpoint_id.to_owned(),
            value: value.to_owned(),
        })
    });
    let test = flash
        .strip_prefix(TEST_FLASH)
        .and_then(|rest| serde_json::from_str::<Value>(rest).ok())
        .map(|outcome| {
            let succeeded = outcome["succeeded"].as_bool().unwrap_or(false);
            let status = outcome["response_status"]
                .as_i64()
                .map_or_else(|| "no answer".to_owned(), |s| format!("HTTP {s}"));
            let took = outcome["duration_ms"].as_i64().unwrap_or(0);
            let error = text(&outcome, "error");
            let summary = if error.is_empty() {
                format!("{status} in {took} ms")
            } else {
                format!("{status} in {took} ms: {error}")
            };
            TestOutcome {
                url: url_of(&text(&outcome, "endpoint_id")),
                succeeded,
                summary,
            }
        });
    let template = WebhooksPage {
        nav: caller.signed.nav("webhooks", PAGE),
        endpoints,
        event_types: event_types(caller.state),
        form: extras.form,
        manage: caller.signed.can_manage(),
        new_secret,
        test,
        error: extras.error,
    };
    Ok(render(extras.status, &template))
}

/// `GET /settings/webhooks`.
pub async fn show(
    State(state): State<Arc<AppState>>,
    id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, PageError> {
    let next = uri.path_and_query().map_or(PAGE, |p| p.as_str());
    let signed = super::signed_in(&state, &headers, next).await?;
    let flash = session::take_flash(&state, &signed.session)
        .await?
        .filter(|f| f.starts_with(SECRET_FLASH) || f.starts_with(TEST_FLASH));
    let caller = Caller {
        state: &state,
        signed: &signed,
        request_id: request_id(id),
    };
    let extras = Extras {
        status: StatusCode::OK,
        form: EndpointForm::default(),
        error: None,
        flash,
    };
    page(&caller, extras).await
}

/// The sentence for a person whose role cannot change endpoints (members hold only `read`); the
/// dispatch would refuse them too, this says it in the page's words.
fn refuse_unless_manager(signed: &SignedIn) -> Result<(), PageError> {
    if signed.can_manage() {
        Ok(())
    } else {
        Err(PageError::forbidden(
            "Your role in this workspace is member, which may only look at webhook endpoints; \
             an owner or admin can change them.",
        )
        .back_to(PAGE))
    }
}

/// `POST /settings/webhooks`: creates an endpoint and shows its secret once.
pub async fn create(
    State(state): State<Arc<AppState>>,
    id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PageError> {
    let (signed, form) = super::signed_in_form(&state, &headers, &body, PAGE).await?;
    refuse_unless_manager(&signed)?;
    let caller = Caller {
        state: &state,
        signed: &signed,
        request_id: request_id(id),
    };
    let entered = EndpointForm {
        url: form.get("url").trim().to_owned(),
        description: form.get("description").trim().to_owned(),
        event_types: form
            .all("event_types")
            .into_iter()
            .map(str::to_owned)
            .collect(),
    };
    let mut input = json!({"url": entered.url});
    if !entered.description.is_empty() {
        input["description"] = json!(entered.description);
    }
    if !entered.event_types.is_empty() {
        input["event_types"] = json!(entered.event_types);
    }
    match caller.call("create_webhook_endpoint", input).await? {
        Ok(created) => {
            let flash = format!(
                "{SECRET_FLASH}{} {}",
                text(&created, "id"),
                text(&created, "secret")
            );
            session::set_flash(&state, &signed.session, &flash).await?;
            Ok(see_other(PAGE))
        }
        Err(error) => {
            let extras = Extras {
                status: error.status(),
                form: entered,
                error: Some(format!("No endpoint was created: {}", error.message)),
                flash: None,
            };
            page(&caller, extras).await
        }
    }
}

/// `POST /settings/webhooks/{endpoint_id}/rotate`: a new secret, shown once; the old one keeps
/// signing beside it for 24 hours.
pub async fn rotate(
    State(state): State<Arc<AppState>>,
    id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    Path(endpoint_id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (signed, _) = super::signed_in_form(&state, &headers, &body, PAGE).await?;
    refuse_unless_manager(&signed)?;
    let caller = Caller {
        state: &state,
        signed: &signed,
        request_id: request_id(id),
    };
    let rotated = caller
        .call_or_refuse("rotate_webhook_secret", json!({"id": endpoint_id}))
        .await?;
    let flash = format!("{SECRET_FLASH}{endpoint_id} {}", text(&rotated, "secret"));
    session::set_flash(&state, &signed.session, &flash).await?;
    Ok(see_other(PAGE))
}

/// `POST /settings/webhooks/{endpoint_id}/test`: sends a signed `webhook.test` now.
pub async fn test(
    State(state): State<Arc<AppState>>,
    id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    Path(endpoint_id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (signed, _) = super::signed_in_form(&state, &headers, &body, PAGE).await?;
    refuse_unless_manager(&signed)?;
    let caller = Caller {
        state: &state,
        signed: &signed,
        request_id: request_id(id),
    };
    let outcome = caller
        .call_or_refuse("test_webhook_endpoint", json!({"id": endpoint_id}))
        .await?;
    // Only what the page shows: the answer's body (up to 1 KB) stays out of the session row.
    let kept = json!({
        "endpoint_id": endpoint_id,
        "succeeded": outcome["succeeded"],
        "response_status": outcome["response_status"],
        "duration_ms": outcome["duration_ms"],
        "error": outcome["error"],
    });
    session::set_flash(&state, &signed.session, &format!("{TEST_FLASH}{kept}")).await?;
    Ok(see_other(PAGE))
}

/// `POST /settings/webhooks/{endpoint_id}/enabled`: `enabled=true` or `false`.
pub async fn set_enabled(
    State(state): State<Arc<AppState>>,
    id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    Path(endpoint_id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (signed, form) = super::signed_in_form(&state, &headers, &body, PAGE).await?;
    refuse_unless_manager(&signed)?;
    let enabled = match form.get("enabled") {
        "true" => true,
        "false" => false,
        other => {
            return Err(PageError::message(
                StatusCode::BAD_REQUEST,
                "Not done",
                format!("`enabled` must be `true` or `false`, not `{other}`."),
            )
            .back_to(PAGE));
        }
    };
    let caller = Caller {
        state: &state,
        signed: &signed,
        request_id: request_id(id),
    };
    caller
        .call_or_refuse(
            "update_webhook_endpoint",
            json!({"id": endpoint_id, "enabled": enabled}),
        )
        .await?;
    Ok(see_other(PAGE))
}

/// `GET /settings/webhooks/{endpoint_id}/delete`: asks first.
pub async fn confirm_delete(
    State(state): State<Arc<AppState>>,
    id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    Path(endpoint_id): Path<String>,
    uri: Uri,
) -> Result<Response, PageError> {
    let signed = super::signed_in(&state, &headers, uri.path()).await?;
    refuse_unless_manager(&signed)?;
    let caller = Caller {
        state: &state,
        signed: &signed,
        request_id: request_id(id),
    };
    let endpoint = caller
        .call_or_refuse("get_webhook_endpoint", json!({"id": endpoint_id}))
        .await?;
    Ok(render(
        StatusCode::OK,
        &ConfirmPage {
            nav: signed.nav("webhooks", PAGE),
            title: "Delete webhook endpoint".into(),
            question: format!("Delete the endpoint {}?", text(&endpoint, "url")),
            detail: "Its pending deliveries are dropped and it receives nothing more. \
                     This cannot be undone; disabling it instead keeps it for later."
                .into(),
            form_id: "confirm-delete-webhook",
            action: uri.path().to_owned(),
            submit: "Delete endpoint",
            cancel: PAGE,
        },
    ))
}

/// `POST /settings/webhooks/{endpoint_id}/delete`.
pub async fn delete(
    State(state): State<Arc<AppState>>,
    id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    Path(endpoint_id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (signed, _) = super::signed_in_form(&state, &headers, &body, PAGE).await?;
    refuse_unless_manager(&signed)?;
    let caller = Caller {
        state: &state,
        signed: &signed,
        request_id: request_id(id),
    };
    caller
        .call_or_refuse("delete_webhook_endpoint", json!({"id": endpoint_id}))
        .await?;
    Ok(see_other(PAGE))
}
