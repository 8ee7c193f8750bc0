//! Webhook endpoints: where a workspace's events are delivered, signed to Standard Webhooks 1.0.
//!
//! An endpoint is a URL, the event types it wants (all of them by default) and a signing secret
//! answered once, at creation and at each rotation. This module owns `webhook_endpoints`; the
//! deliveries themselves are rows of `deliveries` (below), queued with each event in the event's
//! own transaction. [`deliver`] attempts them (the job), [`send`] makes one attempt, [`signing`]
//! signs it, [`address`] keeps it off inward addresses, [`seal`] keeps the secret sealed at rest,
//! and [`history`] shows and repeats what was sent.
//!
//! An endpoint is disabled by its owner (`update_webhook_endpoint` with `enabled: false`), by a
//! `410 Gone`, or once its deliveries have all failed for 5 days in a row: the last two write a
//! `webhook_endpoint.disabled` event and keep the reason in `disabled_reason`. Disabling fails
//! its pending deliveries; enabling it again starts afresh (replay what was missed).

pub mod address;
pub mod deliver;
pub mod history;
pub mod seal;
pub mod send;
pub mod signing;

use outreach_runtime::prelude::{
    ApiError, Backend, Ctx, Page, PageParams, Timestamp, action, error_codes, ids, paged,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, AssertSqlSafe, Row};

use crate::common::{Deleted, IdKind, json_text};
use crate::events::EventType;
use address::Reach;
use seal::WebhookSettings;

outreach_runtime::prelude::resource_tag!(
    "webhook-endpoints",
    toolset = "webhooks",
    "Webhook endpoints: URLs that receive the workspace's events as signed POSTs (Standard Webhooks 1.0), with each delivery's attempts."
);

/// The endpoints a workspace may have.
pub const MAX_ENDPOINTS: i64 = 16;
/// The longest description.
pub const MAX_DESCRIPTION_CHARS: usize = 500;
/// How long a rotated secret keeps signing beside the new one.
pub const ROTATION_OVERLAP_MS: i64 = 24 * 3_600_000;

error_codes! {
    pub TOO_MANY_WEBHOOK_ENDPOINTS = ("too_many_webhook_endpoints", 409, "webhooks: a workspace has at most 16 endpoints");
    pub WEBHOOK_ENDPOINT_DISABLED = ("webhook_endpoint_disabled", 422, "webhooks: a replay or redelivery to a disabled endpoint (enable it first)");
    pub EVENT_TYPE_NOT_SUBSCRIBED = ("event_type_not_subscribed", 422, "webhooks: a redelivery of an event whose type the endpoint does not take");
}

/// A webhook endpoint as the API shows it (never its secret).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WebhookEndpoint {
    /// The endpoint's id (`whe_...`).
    pub id: String,
    /// Where deliveries are POSTed.
    pub url: String,
    pub description: Option<String>,
    /// The event types it receives; `null`: every type.
    #[schemars(schema_with = "event_types_schema")]
    pub event_types: Option<Vec<EventType>>,
    /// A disabled endpoint receives nothing.
    pub enabled: bool,
    /// Why the service disabled it (a `410 Gone`, or 5 days of failed deliveries); `null` when
    /// enabled or disabled by a person.
    pub disabled_reason: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// An endpoint with its signing secret: answered by `create_webhook_endpoint` and
/// `rotate_webhook_secret`, and never again.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WebhookEndpointWithSecret {
    #[serde(flatten)]
    pub endpoint: WebhookEndpoint,
    /// The signing secret (`whsec_...`): verify each delivery's `webhook-signature` with it.
    /// Shown only now; keep it.
    pub secret: String,
}

/// The schema of `event_types`: the types' names only (each event's `type` documents itself).
fn event_types_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let names: Vec<&str> = EventType::ALL.iter().map(|kind| kind.as_str()).collect();
    schemars::json_schema!({
        "type": ["array", "null"],
        "items": {"type": "string", "enum": names},
    })
}

// SQL built with format! here interpolates only constants and `$n` placeholders; values are bound.

const COLUMNS: &str =
    "id, url, description, event_types, enabled, disabled_reason, created_at, updated_at";

impl WebhookEndpoint {
    fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        let types: Option<String> = row.try_get("event_types")?;
        let event_types = match types {
            None => None,
            Some(text) => {
                let names: Vec<String> = serde_json::from_str(&text).map_err(ApiError::internal)?;
                Some(
                    names
                        .iter()
                        .map(|name| EventType::from_db(name))
                        .collect::<Result<_, _>>()?,
                )
            }
        };
        Ok(Self {
            id: row.try_get("id")?,
            url: row.try_get("url")?,
            description: row.try_get("description")?,
            event_types,
            enabled: row.try_get::<i64, _>("enabled")? != 0,
            disabled_reason: row.try_get("disabled_reason")?,
            created_at: Timestamp(row.try_get("created_at")?),
            updated_at: Timestamp(row.try_get("updated_at")?),
        })
    }

    /// Whether it receives events of `kind`.
    pub fn wants(&self, kind: &str) -> bool {
        self.event_types
            .as_ref()
            .is_none_or(|types| types.iter().any(|t| t.as_str() == kind))
    }
}

/// Reads one endpoint of the workspace, or 404.
pub(crate) async fn fetch(
    conn: &mut AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<WebhookEndpoint, ApiError> {
    IdKind::WebhookEndpoint.check(id)?;
    let row = sqlx::query(AssertSqlSafe(format!(
        "select {COLUMNS} from webhook_endpoints where workspace_id = $1 and id = $2"
    )))
    .bind(workspace_id)
    .bind(id)
    .fetch_optional(conn)
    .await?
    .ok_or_else(|| IdKind::WebhookEndpoint.not_found(id))?;
    WebhookEndpoint::from_row(&row)
}

/// The stored form of a type list: `None` (and an empty list) for every type.
fn types_text(types: Option<&[EventType]>) -> Result<Option<String>, ApiError> {
    match types {
        None | Some([]) => Ok(None),
        Some(types) => {
            let mut names: Vec<&str> = types.iter().map(|kind| kind.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            json_text(&names).map(Some)
        }
    }
}

/// A description as stored: trimmed, `None` when blank. Its length is judged as sent, as the
/// schema's `maxLength` judges it.
fn check_description(text: Option<&str>) -> Result<Option<String>, ApiError> {
    let Some(text) = text else {
        return Ok(None);
    };
    if text.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(ApiError::invalid_request(format!(
            "`description` is longer than {MAX_DESCRIPTION_CHARS} characters."
        )));
    }
    let text = text.trim();
    Ok((!text.is_empty()).then(|| text.to_owned()))
}

/// Disables an endpoint for `reason` (a `410`, or days of failures), fails its pending
/// deliveries and writes `webhook_endpoint.disabled`, in the caller's transaction; does nothing
/// to one already disabled.
pub(crate) async fn disable(
    conn: &mut AnyConnection,
    workspace_id: &str,
    endpoint_id: &str,
    reason: &str,
    now_ms: i64,
) -> Result<bool, ApiError> {
    let changed = sqlx::query(
        "update webhook_endpoints set enabled = 0, disabled_reason = $2, updated_at = $3 \
         where id = $1 and enabled = 1",
    )
    .bind(endpoint_id)
    .bind(reason)
    .bind(now_ms)
    .execute(&mut *conn)
    .await?
    .rows_affected()
        > 0;
    if changed {
        crate::deliveries::fail_pending(
            conn,
            endpoint_id,
            &format!("the endpoint was disabled: {reason}"),
            now_ms,
        )
        .await?;
        crate::events::record(
            conn,
            workspace_id,
            now_ms,
            EventType::WebhookEndpointDisabled,
            serde_json::json!({"webhook_endpoint_id": endpoint_id, "reason": reason}),
        )
        .await?;
    }
    Ok(changed)
}

/// A gap between two failed attempts longer than this ends a run of failures: a delivery's own
/// retries span about 27.6 hours (30.4 with all their jitter), so a longer gap means nothing
/// was tried in between, not that every try failed.
const FAILURE_GAP_MS: i64 = 31 * 3_600_000;

/// Notes an attempt's outcome on its endpoint (in the caller's transaction): a success ends a
/// run of failures; a failure starts one (after a success, or a gap of [`FAILURE_GAP_MS`]), or
/// disables the endpoint once its run of failures has lasted [`deliver::FAILING_DAYS`] days.
pub(crate) async fn note_outcome(
    conn: &mut AnyConnection,
    workspace_id: &str,
    endpoint_id: &str,
    succeeded: bool,
    now_ms: i64,
) -> Result<(), ApiError> {
    if succeeded {
        sqlx::query(
            "update webhook_endpoints set failing_since = null, last_failed_at = null \
             where id = $1 and failing_since is not null",
        )
        .bind(endpoint_id)
        .execute(&mut *conn)
        .await?;
        return Ok(());
    }
    let row =
        sqlx::query("select failing_since, last_failed_at from webhook_endpoints where id = $1")
            .bind(endpoint_id)
            .fetch_optional(&mut *conn)
            .await?;
    let Some(row) = row else {
        return Ok(());
    };
    let since: Option<i64> = row.try_get("failing_since")?;
    let last: Option<i64> = row.try_get("last_failed_at")?;
    let since = match (since, last) {
        (Some(since), Some(last)) if now_ms - last <= FAILURE_GAP_MS => since,
        _ => now_ms,
    };
    sqlx::query(
        "update webhook_endpoints set failing_since = $2, last_failed_at = $3 where id = $1",
    )
    .bind(endpoint_id)
    .bind(since)
    .bind(now_ms)
    .execute(&mut *conn)
    .await?;
    if now_ms - since >= deliver::FAILING_MS {
        let reason = format!(
            "every delivery failed for {} days in a row",
            deliver::FAILING_DAYS
        );
        disable(conn, workspace_id, endpoint_id, &reason, now_ms).await?;
    }
    Ok(())
}

// ----- actions -----

/// The input of `create_webhook_endpoint`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhookEndpointInput {
    /// `https`, on a host that is not private or link-local.
    ///
    /// In development and test also `http`, and loopback; the host must not be or resolve to a
    /// private, link-local or (but in those) loopback address.
    #[schemars(length(min = 1, max = 2000), regex(pattern = address::URL_PATTERN))]
    pub url: String,
    /// Absent or empty: every type.
    #[schemars(schema_with = "event_types_schema")]
    #[serde(default)]
    pub event_types: Option<Vec<EventType>>,
    #[schemars(length(max = 500))]
    pub description: Option<String>,
}

/// Create a webhook endpoint.
///
/// Events are POSTed to `url` as they happen, signed to Standard Webhooks 1.0 with the `secret`
/// answered here and never again. At most 16 endpoints.
///
/// The events are the workspace's, of `event_types` or all; the signature headers are
/// `webhook-id`, `webhook-timestamp` and `webhook-signature`. Failed deliveries are retried 7
/// times over about 28 hours.
#[action(scope = "write", http = "POST /webhook-endpoints")]
pub async fn create_webhook_endpoint(
    ctx: Ctx,
    input: CreateWebhookEndpointInput,
) -> Result<WebhookEndpointWithSecret, ApiError> {
    let reach = Reach::of(&ctx.config().environment);
    let url = address::check_url(reach, &input.url).await?;
    let description = check_description(input.description.as_deref())?;
    let event_types = types_text(input.event_types.as_deref())?;
    let secret = signing::new_secret();
    let stored = seal::seal(&WebhookSettings::of(ctx.config()), &secret)?;
    let now = ctx.now_ms();
    let id = ids::new_id(IdKind::WebhookEndpoint.prefix());
    let mut tx = ctx.tx().await?;
    if Backend::of(&tx) == Backend::Postgres {
        // Creations in one workspace queue here, so two at once cannot both be the 16th.
        sqlx::query("select id from workspaces where id = $1 for no key update")
            .bind(ctx.workspace_id())
            .execute(&mut *tx)
            .await?;
    }
    let count: i64 =
        sqlx::query_scalar("select count(*) from webhook_endpoints where workspace_id = $1")
            .bind(ctx.workspace_id())
            .fetch_one(&mut *tx)
            .await?;
    if count >= MAX_ENDPOINTS {
        return Err(ApiError::new(
            TOO_MANY_WEBHOOK_ENDPOINTS,
            format!(
                "This workspace has {count} webhook endpoints, the most it may have; delete one first."
            ),
        ));
    }
    sqlx::query(
        "insert into webhook_endpoints (id, workspace_id, url, description, event_types, secret, \
         enabled, created_at, updated_at) values ($1, $2, $3, $4, $5, $6, 1, $7, $7)",
    )
    .bind(&id)
    .bind(ctx.workspace_id())
    .bind(&url)
    .bind(&description)
    .bind(&event_types)
    .bind(&stored)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    let endpoint = fetch(&mut tx, ctx.workspace_id(), &id).await?;
    Ok(WebhookEndpointWithSecret { endpoint, secret })
}

outreach_runtime::prelude::example!(create_webhook_endpoint,
    request: {
        "description": "CRM sync",
        "event_types": ["connection.accepted", "enrollment.replied"],
        "url": "https://hooks.example.com/outreach"
    },
    response: {
        "created_at": "2026-11-27T10:02:11.402Z",
        "description": "CRM sync",
        "disabled_reason": null,
        "enabled": true,
        "event_types": ["connection.accepted", "enrollment.replied"],
        "id": "whe_K3mN8pQ2rS5tU7vW9xY1",
        "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw8dyhQFDc0Ng=",
        "updated_at": "2026-11-27T10:02:11.402Z",
        "url": "https://hooks.example.com/outreach"
    }
);

outreach_runtime::prelude::parity!(create_webhook_endpoint, write,
    ok: {"url": "http://127.0.0.1:9/hooks", "event_types": ["sequence.completed"]},
    fails: {"url": "http://10.0.0.1/hooks"} => INVALID_REQUEST
);

/// The input of `get_webhook_endpoint`, `delete_webhook_endpoint`,
/// `rotate_webhook_secret` and `test_webhook_endpoint`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WebhookEndpointId {
    /// `whe_...`
    pub id: String,
}

/// Get a webhook endpoint by id.
///
/// Never its secret: rotate it for a new one.
///
/// Its URL, types, whether it is enabled and why not.
#[action(scope = "read", http = "GET /webhook-endpoints/{id}")]
pub async fn get_webhook_endpoint(
    ctx: Ctx,
    input: WebhookEndpointId,
) -> Result<WebhookEndpoint, ApiError> {
    let mut conn = ctx.db().pool().acquire().await?;
    fetch(&mut conn, ctx.workspace_id(), &input.id).await
}

outreach_runtime::prelude::example!(get_webhook_endpoint,
    request: {"id": "whe_K3mN8pQ2rS5tU7vW9xY1"},
    response: {
        "created_at": "2026-11-27T10:02:11.402Z",
        "description": "CRM sync",
        "disabled_reason": null,
        "enabled": true,
        "event_types": ["connection.accepted", "enrollment.replied"],
        "id": "whe_K3mN8pQ2rS5tU7vW9xY1",
        "updated_at": "2026-11-27T10:02:11.402Z",
        "url": "https://hooks.example.com/outreach"
    }
);

outreach_runtime::prelude::parity!(get_webhook_endpoint, read,
    ok: {"id": "$webhook_endpoint"},
    fails: {"id": "$missing:whe"} => NOT_FOUND
);

/// The input of `list_webhook_endpoints`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListWebhookEndpointsInput {
    #[serde(flatten)]
    pub page: PageParams,
}

/// List webhook endpoints, newest first.
#[action(scope = "read", http = "GET /webhook-endpoints")]
pub async fn list_webhook_endpoints(
    ctx: Ctx,
    input: ListWebhookEndpointsInput,
) -> Result<Page<WebhookEndpoint>, ApiError> {
    paged(
        ctx.db().pool(),
        input.page,
        "select count(*) from webhook_endpoints where workspace_id = $1".to_owned(),
        format!(
            "select {COLUMNS} from webhook_endpoints where workspace_id = $1 \
             order by created_at desc, id desc limit $2 offset $3"
        ),
        |query| query.bind(ctx.workspace_id()),
        WebhookEndpoint::from_row,
    )
    .await
}

outreach_runtime::prelude::example!(list_webhook_endpoints,
    request: {"limit": 25},
    response: {
        "count": 1,
        "has_more": false,
        "items": [{
            "created_at": "2026-11-27T10:02:11.402Z",
            "description": "CRM sync",
            "disabled_reason": null,
            "enabled": true,
            "event_types": null,
            "id": "whe_K3mN8pQ2rS5tU7vW9xY1",
            "updated_at": "2026-11-27T10:02:11.402Z",
            "url": "https://hooks.example.com/outreach"
        }],
        "next_offset": null,
        "offset": 0,
        "total": 1
    }
);

outreach_runtime::prelude::parity!(list_webhook_endpoints, read,
    ok: {"limit": 5},
    fails: {"limit": 0} => INVALID_REQUEST
);

/// The input of `update_webhook_endpoint`: what is absent stays as it is.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateWebhookEndpointInput {
    /// `whe_...`
    pub id: String,
    /// Checked as at creation.
    #[schemars(length(min = 1, max = 2000), regex(pattern = address::URL_PATTERN))]
    pub url: Option<String>,
    /// Empty: every type.
    #[schemars(schema_with = "event_types_schema")]
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    pub event_types: Option<Option<Vec<EventType>>>,
    /// Empty or `null` clears it.
    #[schemars(length(max = 500))]
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    pub description: Option<Option<String>>,
    /// `false` fails the pending deliveries; `true` delivers from now on.
    pub enabled: Option<bool>,
}

/// Update a webhook endpoint.
///
/// Enabling clears `disabled_reason`; replay what it missed with `replay_webhook_endpoint`.
///
/// Changes its `url`, `event_types`, `description`, or `enabled`. Disabling fails its pending
/// deliveries; enabling delivers what happens from then on.
#[action(scope = "write", idempotent, http = "PATCH /webhook-endpoints/{id}")]
pub async fn update_webhook_endpoint(
    ctx: Ctx,
    input: UpdateWebhookEndpointInput,
) -> Result<WebhookEndpoint, ApiError> {
    let reach = Reach::of(&ctx.config().environment);
    let url = match &input.url {
        Some(url) => Some(address::check_url(reach, url).await?),
        None => None,
    };
    let description = match &input.description {
        Some(text) => Some(check_description(text.as_deref())?),
        None => None,
    };
    let event_types = match &input.event_types {
        Some(types) => Some(types_text(types.as_deref())?),
        None => None,
    };
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let before = fetch(&mut tx, ctx.workspace_id(), &input.id).await?;
    sqlx::query(
        "update webhook_endpoints set url = coalesce($3, url), \
         description = case when $4 = 1 then $5 else description end, \
         event_types = case when $6 = 1 then $7 else event_types end, updated_at = $8 \
         where workspace_id = $1 and id = $2",
    )
    .bind(ctx.workspace_id())
    .bind(&input.id)
    .bind(&url)
    .bind(i64::from(description.is_some()))
    .bind(description.flatten())
    .bind(i64::from(event_types.is_some()))
    .bind(event_types.flatten())
    .bind(now)
    .execute(&mut *tx)
    .await?;
    match input.enabled {
        Some(false) if before.enabled => {
            sqlx::query(
                "update webhook_endpoints set enabled = 0, disabled_reason = null where id = $1",
            )
            .bind(&input.id)
            .execute(&mut *tx)
            .await?;
            crate::deliveries::fail_pending(
                &mut tx,
                &input.id,
                "the endpoint was disabled by a member",
                now,
            )
            .await?;
        }
        Some(true) if !before.enabled => {
            sqlx::query(
                "update webhook_endpoints set enabled = 1, disabled_reason = null, \
                 failing_since = null, last_failed_at = null where id = $1",
            )
            .bind(&input.id)
            .execute(&mut *tx)
            .await?;
        }
        _ => {}
    }
    fetch(&mut tx, ctx.workspace_id(), &input.id).await
}

outreach_runtime::prelude::example!(update_webhook_endpoint,
    request: {"id": "whe_K3mN8pQ2rS5tU7vW9xY1", "enabled": false},
    response: {
        "created_at": "2026-11-27T10:02:11.402Z",
        "description": "CRM sync",
        "disabled_reason": null,
        "enabled": false,
        "event_types": ["connection.accepted", "enrollment.replied"],
        "id": "whe_K3mN8pQ2rS5tU7vW9xY1",
        "updated_at": "2026-11-27T11:40:00.000Z",
        "url": "https://hooks.example.com/outreach"
    }
);

outreach_runtime::prelude::parity!(update_webhook_endpoint, write,
    ok: {"id": "$webhook_endpoint", "description": "Checked ${tag}"},
    fails: {"id": "$webhook_endpoint", "url": "ftp://127.0.0.1/hooks"} => INVALID_REQUEST
);

/// Delete a webhook endpoint.
///
/// Its deliveries are forgotten.
#[action(scope = "write", idempotent, http = "DELETE /webhook-endpoints/{id}")]
pub async fn delete_webhook_endpoint(
    ctx: Ctx,
    input: WebhookEndpointId,
) -> Result<Deleted, ApiError> {
    IdKind::WebhookEndpoint.check(&input.id)?;
    let mut tx = ctx.tx().await?;
    let deleted = sqlx::query("delete from webhook_endpoints where workspace_id = $1 and id = $2")
        .bind(ctx.workspace_id())
        .bind(&input.id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if deleted == 0 {
        return Err(IdKind::WebhookEndpoint.not_found(&input.id));
    }
    Ok(Deleted {
        id: input.id,
        deleted: true,
    })
}

outreach_runtime::prelude::example!(delete_webhook_endpoint,
    request: {"id": "whe_K3mN8pQ2rS5tU7vW9xY1"},
    response: {"deleted": true, "id": "whe_K3mN8pQ2rS5tU7vW9xY1"}
);

outreach_runtime::prelude::parity!(delete_webhook_endpoint, write,
    ok: {"id": "$webhook_endpoint"},
    fails: {"id": "$missing:whe"} => NOT_FOUND
);

/// Rotate a webhook endpoint's signing secret.
///
/// Answers the new `secret` once; the old one keeps signing beside it for 24 hours.
///
/// Two signatures in `webhook-signature` meanwhile, so receivers can switch without losing a
/// delivery.
#[action(scope = "write", http = "POST /webhook-endpoints/{id}/rotate-secret")]
pub async fn rotate_webhook_secret(
    ctx: Ctx,
    input: WebhookEndpointId,
) -> Result<WebhookEndpointWithSecret, ApiError> {
    IdKind::WebhookEndpoint.check(&input.id)?;
    let secret = signing::new_secret();
    let stored = seal::seal(&WebhookSettings::of(ctx.config()), &secret)?;
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let changed = sqlx::query(
        "update webhook_endpoints set previous_secret = secret, previous_secret_until = $3, \
         secret = $4, updated_at = $5 where workspace_id = $1 and id = $2",
    )
    .bind(ctx.workspace_id())
    .bind(&input.id)
    .bind(now + ROTATION_OVERLAP_MS)
    .bind(&stored)
    .bind(now)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if changed == 0 {
        return Err(IdKind::WebhookEndpoint.not_found(&input.id));
    }
    let endpoint = fetch(&mut tx, ctx.workspace_id(), &input.id).await?;
    Ok(WebhookEndpointWithSecret { endpoint, secret })
}

outreach_runtime::prelude::example!(rotate_webhook_secret,
    request: {"id": "whe_K3mN8pQ2rS5tU7vW9xY1"},
    response: {
        "created_at": "2026-11-27T10:02:11.402Z",
        "description": "CRM sync",
        "disabled_reason": null,
        "enabled": true,
        "event_types": null,
        "id": "whe_K3mN8pQ2rS5tU7vW9xY1",
        "secret": "whsec_4qB0bD3m0pS6Q0CwEJXLtqtd8lIrmpdlS9ScBFQ3ZBo=",
        "updated_at": "2026-11-27T12:00:00.000Z",
        "url": "https://hooks.example.com/outreach"
    }
);

outreach_runtime::prelude::parity!(rotate_webhook_secret, write,
    ok: {"id": "$webhook_endpoint"},
    fails: {"id": "$missing:whe"} => NOT_FOUND
);
