//! `/settings/webhooks`: the workspace's webhook endpoints with their latest deliveries, and the
//! forms to create one, send it a test, rotate its secret, disable or enable it, and delete it.
//!
//! Unlike the other settings pages, which share [`crate::admin`] with the CLI, this one calls the
//! webhook actions through the one [`Dispatcher`], as the signed-in person: a
//! [`CredentialKind::WebSession`](crate::principal::CredentialKind) principal with their role's
//! scope, read afresh on every request ([`auth::session_principal`]). The actions live above this
//! crate and keep their rules (the address checks, the 16-endpoint cap, `write` to change), so the
//! page cannot drift from the API: an action's refusal is shown with its own sentence and status,
//! and the event types offered are the enum of `create_webhook_endpoint`'s input schema. The
//! answers are read into this module's own structs, so a renamed field is a fault, not a wrong
//! page.
//!
//! A new or rotated secret is shown on the answer to the POST itself, never stored for a later
//! page: the service keeps secrets sealed at rest (`OUTREACH_WEBHOOK_KEY`), and a session's
//! flash is plain text. (A reload of that answer asks the browser to send the form again.) A
//! test's outcome holds no secret and reaches the page through the flash, after a redirect.
//! Every form names the workspace it was shown for; a POST after the person switched workspace in
//! another tab is refused rather than applied to the other one.

use std::sync::Arc;

use askama::Template;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};

use super::acting::Caller;
use super::keys::ConfirmPage;
use super::{FormData, Nav, PageError, SignedIn, display_time, render, see_other};
use crate::error::ApiError;
use crate::request_id::RequestId;
use crate::session;
use crate::state::AppState;

const PAGE: &str = "/settings/webhooks";

/// The flash of a test's outcome: this prefix and [`TestOutcome`]'s JSON.
const TEST_FLASH: &str = "webhook_test:";

/// How many of each endpoint's latest deliveries the page shows.
const RECENT_DELIVERIES: u32 = 10;

/// An endpoint as the actions answer it (the fields this page shows).
#[derive(Deserialize)]
struct Endpoint {
    id: String,
    url: String,
    description: Option<String>,
    event_types: Option<Vec<String>>,
    enabled: bool,
    disabled_reason: Option<String>,
    created_at: String,
}

/// A delivery as `list_webhook_deliveries` answers it.
#[derive(Deserialize)]
struct Delivery {
    event_id: String,
    event_type: String,
    status: String,
    attempt: i64,
    response_status: Option<i64>,
    duration_ms: Option<i64>,
    error: Option<String>,
    next_attempt_at: Option<String>,
    created_at: String,
}

/// A page of a list action.
#[derive(Deserialize)]
struct Listed<T> {
    items: Vec<T>,
}

/// `create_webhook_endpoint`'s and `rotate_webhook_secret`'s answer: the endpoint and its secret,
/// shown once on the page that answers the form.
#[derive(Deserialize)]
struct WithSecret {
    id: String,
    url: String,
    secret: String,
}

/// `test_webhook_endpoint`'s answer, and what the flash keeps of it for the next page.
#[derive(Deserialize, serde::Serialize)]
struct TestOutcome {
    #[serde(default)]
    endpoint_id: String,
    succeeded: bool,
    response_status: Option<i64>,
    duration_ms: i64,
    error: Option<String>,
}

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

/// A test's outcome, shown once after it.
struct TestLine {
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
    new_secret: Option<WithSecret>,
    test: Option<TestLine>,
    error: Option<String>,
}

impl WebhooksPage {
    /// The refusal with its `code` spans as `<code>`, as message pages show sentences.
    fn error_html(&self) -> Option<String> {
        self.error.as_deref().map(crate::oauth::code_spans)
    }
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

/// An RFC 3339 time of an answer as the pages show times.
fn when(at: &str) -> String {
    time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
        .ok()
        .and_then(|at| i64::try_from(at.unix_timestamp_nanos() / 1_000_000).ok())
        .map_or_else(|| at.to_owned(), display_time)
}

fn delivery_row(delivery: Delivery) -> DeliveryRow {
    DeliveryRow {
        when: when(&delivery.created_at),
        event_type: delivery.event_type,
        event_id: delivery.event_id,
        status: delivery.status,
        attempt: delivery.attempt,
        response: delivery
            .response_status
            .map_or_else(|| "—".to_owned(), |status| status.to_string()),
        duration: delivery
            .duration_ms
            .map_or_else(|| "—".to_owned(), |ms| format!("{ms} ms")),
        next_attempt: delivery
            .next_attempt_at
            .as_deref()
            .map_or_else(|| "—".to_owned(), when),
        error: delivery.error.unwrap_or_default(),
    }
}

async fn endpoint_rows(caller: &Caller<'_>) -> Result<Vec<EndpointRow>, PageError> {
    // The cap is 16 endpoints, so one page of 100 holds them all.
    let listed: Listed<Endpoint> = caller
        .call_or_refuse(PAGE, "list_webhook_endpoints", json!({"limit": 100}))
        .await?;
    let mut rows = Vec::with_capacity(listed.items.len());
    for endpoint in listed.items {
        let deliveries = caller
            .call::<Listed<Delivery>>(
                "list_webhook_deliveries",
                json!({"endpoint_id": endpoint.id, "limit": RECENT_DELIVERIES}),
            )
            .await?;
        // Deleted since it was listed (by someone else, a moment ago): not shown.
        let Ok(deliveries) = deliveries else { continue };
        let event_types = match endpoint.event_types {
            Some(types) if !types.is_empty() => types.join(", "),
            _ => "every event type".to_owned(),
        };
        rows.push(EndpointRow {
            id: endpoint.id,
            url: endpoint.url,
            description: endpoint.description.unwrap_or_default(),
            event_types,
            enabled: endpoint.enabled,
            disabled_reason: endpoint.disabled_reason.unwrap_or_default(),
            created: when(&endpoint.created_at),
            deliveries: deliveries.items.into_iter().map(delivery_row).collect(),
        });
    }
    Ok(rows)
}

/// What a form, a secret or a test adds to the page.
#[derive(Default)]
struct Extras {
    form: EndpointForm,
    error: Option<String>,
    new_secret: Option<WithSecret>,
    test: Option<TestOutcome>,
}

async fn page(
    caller: &Caller<'_>,
    status: StatusCode,
    extras: Extras,
) -> Result<Response, PageError> {
    let endpoints = endpoint_rows(caller).await?;
    let url_of = |id: &str| {
        endpoints
            .iter()
            .find(|e| e.id == id)
            .map_or_else(String::new, |e| e.url.clone())
    };
    let test = extras.test.map(|outcome| {
        let answer = outcome
            .response_status
            .map_or_else(|| "no answer".to_owned(), |s| format!("HTTP {s}"));
        let took = outcome.duration_ms;
        let summary = match outcome.error.filter(|error| !error.is_empty()) {
            Some(error) => format!("{answer} in {took} ms: {error}"),
            None => format!("{answer} in {took} ms"),
        };
        TestLine {
            url: url_of(&outcome.endpoint_id),
            succeeded: outcome.succeeded,
            summary,
        }
    });
    let template = WebhooksPage {
        nav: caller.signed.nav("webhooks", PAGE),
        endpoints,
        event_types: event_types(caller.state),
        form: extras.form,
        manage: caller.signed.can_manage(),
        new_secret: extras.new_secret,
        test,
        error: extras.error,
    };
    Ok(render(status, &template))
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
    let caller = Caller::new(&state, &signed, id).await?;
    let test = session::take_flash(&state, &signed.session, TEST_FLASH)
        .await?
        .and_then(|kept| serde_json::from_str(&kept).ok());
    let extras = Extras {
        test,
        ..Extras::default()
    };
    page(&caller, StatusCode::OK, extras).await
}

/// Refuses a member: the dispatch would refuse them too (members hold only `read`); this says
/// it in the page's words, before anything is asked of an action.
fn managers_only(signed: &SignedIn) -> Result<(), PageError> {
    if signed.can_manage() {
        return Ok(());
    }
    Err(PageError::forbidden(
        "Your role in this workspace is member, which may only look at webhook endpoints; \
         an owner or admin can change them.",
    )
    .back_to(PAGE))
}

/// A POST of this page by an owner or admin, for the workspace the page was shown for: the
/// person and the form, whose CSRF token has been checked.
async fn posted(
    state: &AppState,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(SignedIn, FormData), PageError> {
    let (signed, form) = super::signed_in_workspace_form(state, headers, body, PAGE).await?;
    managers_only(&signed)?;
    Ok((signed, form))
}

/// `POST /settings/webhooks`: creates an endpoint and shows its secret, once, on the answer.
pub async fn create(
    State(state): State<Arc<AppState>>,
    id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PageError> {
    let (signed, form) = posted(&state, &headers, &body).await?;
    let caller = Caller::new(&state, &signed, id).await?;
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
    let (status, extras) = match caller.call("create_webhook_endpoint", input).await? {
        Ok(created) => (
            StatusCode::OK,
            Extras {
                new_secret: Some(created),
                ..Extras::default()
            },
        ),
        Err(error) => (
            error.status(),
            Extras {
                form: entered,
                error: Some(format!("No endpoint was created: {}", error.message)),
                ..Extras::default()
            },
        ),
    };
    page(&caller, status, extras).await
}

/// `POST /settings/webhooks/{endpoint_id}/rotate`: a new secret, shown once on the answer; the
/// old one keeps signing beside it for 24 hours.
pub async fn rotate(
    State(state): State<Arc<AppState>>,
    id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    Path(endpoint_id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (signed, _) = posted(&state, &headers, &body).await?;
    let caller = Caller::new(&state, &signed, id).await?;
    let rotated: WithSecret = caller
        .call_or_refuse(PAGE, "rotate_webhook_secret", json!({"id": endpoint_id}))
        .await?;
    let extras = Extras {
        new_secret: Some(rotated),
        ..Extras::default()
    };
    page(&caller, StatusCode::OK, extras).await
}

/// `POST /settings/webhooks/{endpoint_id}/test`: sends a signed `webhook.test` now.
pub async fn test(
    State(state): State<Arc<AppState>>,
    id: Option<Extension<RequestId>>,
    headers: HeaderMap,
    Path(endpoint_id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (signed, _) = posted(&state, &headers, &body).await?;
    let caller = Caller::new(&state, &signed, id).await?;
    let mut outcome: TestOutcome = caller
        .call_or_refuse(PAGE, "test_webhook_endpoint", json!({"id": endpoint_id}))
        .await?;
    outcome.endpoint_id = endpoint_id;
    let kept = serde_json::to_string(&outcome).map_err(ApiError::internal)?;
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
    let (signed, form) = posted(&state, &headers, &body).await?;
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
    let caller = Caller::new(&state, &signed, id).await?;
    let _: Endpoint = caller
        .call_or_refuse(
            PAGE,
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
    managers_only(&signed)?;
    let caller = Caller::new(&state, &signed, id).await?;
    let endpoint: Endpoint = caller
        .call_or_refuse(PAGE, "get_webhook_endpoint", json!({"id": endpoint_id}))
        .await?;
    Ok(render(
        StatusCode::OK,
        &ConfirmPage {
            nav: signed.nav("webhooks", PAGE),
            title: "Delete webhook endpoint".into(),
            question: format!("Delete the endpoint {}?", endpoint.url),
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
    let (signed, _) = posted(&state, &headers, &body).await?;
    let caller = Caller::new(&state, &signed, id).await?;
    let _: Value = caller
        .call_or_refuse(PAGE, "delete_webhook_endpoint", json!({"id": endpoint_id}))
        .await?;
    Ok(see_other(PAGE))
}
