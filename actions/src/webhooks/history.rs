//! What was sent to an endpoint, and sending it again: the deliveries, a redelivery of one event,
//! a replay of a time range, and a test message.

use outreach_runtime::prelude::{ApiError, Ctx, Page, PageParams, Timestamp, action, ids, paged};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::{AssertSqlSafe, Row};

use super::address::Reach;
use super::seal::WebhookSettings;
use super::{EVENT_TYPE_NOT_SUBSCRIBED, WEBHOOK_ENDPOINT_DISABLED, WebhookEndpoint, fetch};
use crate::common::IdKind;
use crate::deliveries::{self, DELIVERY_COLUMNS, Delivery, DeliveryStatus};
use crate::events::{KEPT_DAYS, KEPT_MS};

/// The longest time range a replay covers.
pub const MAX_REPLAY_DAYS: i64 = KEPT_DAYS;

/// The input of `list_webhook_deliveries`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListWebhookDeliveriesInput {
    /// `whe_...`
    pub endpoint_id: String,
    /// Only deliveries in this state.
    pub status: Option<DeliveryStatus>,
    /// `evt_...`
    pub event_id: Option<String>,
    #[serde(flatten)]
    pub page: PageParams,
}

/// List an endpoint's deliveries, newest first.
///
/// Per event sent (or to send): its `status`, attempts, the last answer and the next attempt's
/// time.
///
/// The status is `pending`, `succeeded` or `failed`; the last answer's status, duration and first
/// 1 KB are kept.
#[action(
    scope = "read",
    http = "GET /webhook-endpoints/{endpoint_id}/deliveries"
)]
pub async fn list_webhook_deliveries(
    ctx: Ctx,
    input: ListWebhookDeliveriesInput,
) -> Result<Page<Delivery>, ApiError> {
    {
        let mut conn = ctx.db().pool().acquire().await?;
        fetch(&mut conn, ctx.workspace_id(), &input.endpoint_id).await?;
    }
    let status = input.status.map(DeliveryStatus::as_str);
    let filter = "workspace_id = $1 and endpoint_id = $2 \
                  and ($3 is null or status = $3) and ($4 is null or event_id = $4)";
    paged(
        ctx.db().pool(),
        input.page,
        format!("select count(*) from webhook_deliveries where {filter}"),
        format!(
            "select {DELIVERY_COLUMNS} from webhook_deliveries where {filter} \
             order by seq desc limit $5 offset $6"
        ),
        |query| {
            query
                .bind(ctx.workspace_id())
                .bind(&input.endpoint_id)
                .bind(status)
                .bind(input.event_id.as_deref())
        },
        Delivery::from_row,
    )
    .await
}

outreach_runtime::prelude::example!(list_webhook_deliveries,
    request: {"endpoint_id": "whe_K3mN8pQ2rS5tU7vW9xY1", "limit": 1},
    response: {
        "count": 1,
        "has_more": true,
        "items": [{
            "attempt": 1,
            "created_at": "2026-11-27T10:05:00.000Z",
            "duration_ms": 84,
            "endpoint_id": "whe_K3mN8pQ2rS5tU7vW9xY1",
            "error": null,
            "event_id": "evt_P9oI7uY5tR3eW1qA9sD7",
            "event_type": "connection.accepted",
            "id": "whd_T4rE6wQ8aS0dF2gH4jK6",
            "last_attempt_at": "2026-11-27T10:05:00.112Z",
            "next_attempt_at": null,
            "response_body": "ok",
            "response_status": 200,
            "status": "succeeded",
            "updated_at": "2026-11-27T10:05:00.112Z"
        }],
        "next_offset": 1,
        "offset": 0,
        "total": 12
    }
);

outreach_runtime::prelude::parity!(list_webhook_deliveries, read,
    ok: {"endpoint_id": "$webhook_endpoint", "limit": 5},
    fails: {"endpoint_id": "$missing:whe"} => NOT_FOUND
);

/// Refuses a disabled endpoint, for what would queue deliveries to it.
fn check_enabled(endpoint: &WebhookEndpoint, what: &str) -> Result<(), ApiError> {
    if endpoint.enabled {
        return Ok(());
    }
    Err(ApiError::new(
        WEBHOOK_ENDPOINT_DISABLED,
        format!(
            "The webhook endpoint `{}` is disabled, so nothing can be {what} to it; enable it first (`update_webhook_endpoint` with `enabled: true`).",
            endpoint.id
        ),
    ))
}

/// The input of `redeliver_event`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RedeliverEventInput {
    /// `whe_...`
    pub endpoint_id: String,
    /// `evt_...`
    pub event_id: String,
}

/// Send one event to one endpoint again, now.
///
/// Queues a new delivery (same `webhook-id`), delivered before or not. The endpoint must be enabled
/// and take the event's type.
///
/// Answers the delivery as `pending`.
#[action(
    scope = "write",
    idempotent,
    http = "POST /webhook-endpoints/{endpoint_id}/redeliver"
)]
pub async fn redeliver_event(ctx: Ctx, input: RedeliverEventInput) -> Result<Delivery, ApiError> {
    IdKind::Event.check(&input.event_id)?;
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let endpoint = fetch(&mut tx, ctx.workspace_id(), &input.endpoint_id).await?;
    let kind: String = sqlx::query_scalar(
        "select type from events where workspace_id = $1 and id = $2 and created_at >= $3",
    )
    .bind(ctx.workspace_id())
    .bind(&input.event_id)
    .bind(now - KEPT_MS)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or_else(|| IdKind::Event.not_found(&input.event_id))?;
    check_enabled(&endpoint, "redelivered")?;
    if !endpoint.wants(&kind) {
        return Err(ApiError::new(
            EVENT_TYPE_NOT_SUBSCRIBED,
            format!(
                "The webhook endpoint `{}` does not take `{kind}` events; add the type to its `event_types` first.",
                endpoint.id
            ),
        ));
    }
    let queued = deliveries::queue(
        &mut tx,
        ctx.workspace_id(),
        &endpoint.id,
        now,
        &[(input.event_id.as_str(), kind.as_str())],
    )
    .await?;
    let id = queued
        .first()
        .ok_or_else(|| ApiError::internal("a redelivery queued nothing"))?;
    let row = sqlx::query(AssertSqlSafe(format!(
        "select {DELIVERY_COLUMNS} from webhook_deliveries where id = $1"
    )))
    .bind(id)
    .fetch_one(&mut *tx)
    .await?;
    Delivery::from_row(&row)
}

outreach_runtime::prelude::example!(redeliver_event,
    request: {"endpoint_id": "whe_K3mN8pQ2rS5tU7vW9xY1", "event_id": "evt_P9oI7uY5tR3eW1qA9sD7"},
    response: {
        "attempt": 0,
        "created_at": "2026-11-27T12:00:00.000Z",
        "duration_ms": null,
        "endpoint_id": "whe_K3mN8pQ2rS5tU7vW9xY1",
        "error": null,
        "event_id": "evt_P9oI7uY5tR3eW1qA9sD7",
        "event_type": "connection.accepted",
        "id": "whd_Z1xC3vB5nM7aS9dF1gH3",
        "last_attempt_at": null,
        "next_attempt_at": "2026-11-27T12:00:00.000Z",
        "response_body": null,
        "response_status": null,
        "status": "pending",
        "updated_at": "2026-11-27T12:00:00.000Z"
    }
);

outreach_runtime::prelude::parity!(redeliver_event, write,
    ok: {"endpoint_id": "$webhook_endpoint", "event_id": "$event"},
    fails: {"endpoint_id": "$webhook_endpoint", "event_id": "$missing:evt"} => NOT_FOUND
);

/// The input of `replay_webhook_endpoint`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReplayWebhookEndpointInput {
    /// `whe_...`
    pub id: String,
    /// Inclusive.
    pub since: Timestamp,
    /// Exclusive; default now, at most 30 days after `since`.
    pub until: Option<Timestamp>,
}

/// What a replay queued.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Replayed {
    /// The endpoint (`whe_...`).
    pub endpoint_id: String,
    /// The deliveries queued: one per event of the endpoint's types in the range.
    pub queued: i64,
}

/// Send an endpoint every event of its types in a time range again.
///
/// Queues a new delivery of each, oldest first, delivered before or not. The endpoint must be
/// enabled.
///
/// For a receiver that lost data or was down. The range is at most 30 days, as events are kept
/// that long.
#[action(
    scope = "write",
    idempotent,
    http = "POST /webhook-endpoints/{id}/replay"
)]
pub async fn replay_webhook_endpoint(
    ctx: Ctx,
    input: ReplayWebhookEndpointInput,
) -> Result<Replayed, ApiError> {
    let now = ctx.now_ms();
    let until = input.until.map_or(now, |until| until.ms());
    let since = input.since.ms();
    if since >= until {
        return Err(ApiError::invalid_request(format!(
            "`since` ({}) must be before `until` ({}).",
            input.since,
            Timestamp(until)
        )));
    }
    if until - since > MAX_REPLAY_DAYS * 24 * 3_600_000 {
        return Err(ApiError::invalid_request(format!(
            "A replay covers at most {MAX_REPLAY_DAYS} days; `since` ({}) to `until` ({}) is longer.",
            input.since,
            Timestamp(until)
        )));
    }
    let mut tx = ctx.tx().await?;
    let endpoint = fetch(&mut tx, ctx.workspace_id(), &input.id).await?;
    check_enabled(&endpoint, "replayed")?;
    let rows = sqlx::query(
        "select id, type from events where workspace_id = $1 and created_at >= $2 \
         and created_at < $3 and created_at >= $4 order by created_at, seq",
    )
    .bind(ctx.workspace_id())
    .bind(since)
    .bind(until)
    .bind(now - KEPT_MS)
    .fetch_all(&mut *tx)
    .await?;
    let mut events = Vec::with_capacity(rows.len());
    for row in &rows {
        let id: String = row.try_get("id")?;
        let kind: String = row.try_get("type")?;
        if endpoint.wants(&kind) {
            events.push((id, kind));
        }
    }
    let pairs: Vec<(&str, &str)> = events
        .iter()
        .map(|(id, kind)| (id.as_str(), kind.as_str()))
        .collect();
    let queued = deliveries::queue(&mut tx, ctx.workspace_id(), &endpoint.id, now, &pairs).await?;
    Ok(Replayed {
        endpoint_id: endpoint.id,
        queued: i64::try_from(queued.len()).unwrap_or(i64::MAX),
    })
}

outreach_runtime::prelude::example!(replay_webhook_endpoint,
    request: {"id": "whe_K3mN8pQ2rS5tU7vW9xY1", "since": "2026-11-26T00:00:00Z"},
    response: {"endpoint_id": "whe_K3mN8pQ2rS5tU7vW9xY1", "queued": 42}
);

outreach_runtime::prelude::parity!(replay_webhook_endpoint, write,
    ok: {"id": "$webhook_endpoint", "since": "2026-01-01T00:00:00Z", "until": "2026-01-02T00:00:00Z"},
    fails: {"id": "$webhook_endpoint", "since": "2026-01-01T00:00:00Z", "until": "2026-03-01T00:00:00Z"} => INVALID_REQUEST
);

/// What a test message met.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TestDelivery {
    /// The test message's id (`evt_...`), sent as `webhook-id`; not an event of the workspace.
    pub id: String,
    /// Always `webhook.test`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Whether the endpoint answered with a 2xx.
    pub succeeded: bool,
    /// The answer's HTTP status, if one came.
    pub response_status: Option<i64>,
    pub duration_ms: i64,
    /// The first 1 KB of the answer's body.
    pub response_body: Option<String>,
    /// Why it failed, when it did.
    pub error: Option<String>,
}

/// Send a test message to a webhook endpoint now.
///
/// POSTs a signed `webhook.test` message (not retried) and answers what came back. Works on a
/// disabled endpoint too.
///
/// The message has its own id, not an event of the workspace: check a receiver's URL and
/// signature check before real events reach it.
#[action(
    scope = "write",
    idempotent,
    http = "POST /webhook-endpoints/{id}/test"
)]
pub async fn test_webhook_endpoint(
    ctx: Ctx,
    input: super::WebhookEndpointId,
) -> Result<TestDelivery, ApiError> {
    {
        let mut conn = ctx.db().pool().acquire().await?;
        fetch(&mut conn, ctx.workspace_id(), &input.id).await?;
    }
    let id = ids::new_id("evt");
    let attempt = super::deliver::send_test(
        ctx.db().pool(),
        Reach::of(&ctx.config().environment),
        &WebhookSettings::of(ctx.config()),
        &input.id,
        &id,
        ctx.now_ms(),
    )
    .await?;
    Ok(TestDelivery {
        id,
        kind: "webhook.test".to_owned(),
        succeeded: attempt.succeeded,
        response_status: attempt.response_status,
        duration_ms: attempt.duration_ms,
        response_body: attempt.response_body,
        error: attempt.error,
    })
}

outreach_runtime::prelude::example!(test_webhook_endpoint,
    request: {"id": "whe_K3mN8pQ2rS5tU7vW9xY1"},
    response: {
        "duration_ms": 91,
        "error": null,
        "id": "evt_B7nM9aS1dF3gH5jK7lQ9",
        "response_body": "ok",
        "response_status": 200,
        "succeeded": true,
        "type": "webhook.test"
    }
);

outreach_runtime::prelude::parity!(test_webhook_endpoint, write,
    ok: {"id": "$webhook_endpoint"},
    fails: {"id": "$missing:whe"} => NOT_FOUND
);
