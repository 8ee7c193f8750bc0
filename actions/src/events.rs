//! Events: every change a user's own systems may want to hear about, kept 30 days.
//!
//! The rule, in one sentence: **an owner's verb that makes a change calls [`record`] in the same
//! transaction as the change**, so an event exists exactly when its change committed (an outbox:
//! a call that fails or rolls back leaves none, and nothing happens without its event). This
//! module owns the `events` table; it sits at the bottom of the layers, so every owner can write
//! one, and it knows none of them.
//!
//! An event is thin: the ids involved and a few display fields ([`EventType::data_keys`] lists
//! them for each type, [`record`] refuses others), never a copy of the objects, so a consumer reads
//! the current state with the `get_*` actions. `docs/events.md` carries the same table; a test
//! keeps the two equal.

use outreach_runtime::prelude::{
    ApiError, Bind, Columns, Ctx, Cursor, FromColumns, OrderTerm, Page, PageParams, SortedQuery,
    Timestamp, Total, action, ids, paged_sorted, text_enum,
};
use std::collections::HashMap;
use std::sync::LazyLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sqlx::{AnyConnection, AssertSqlSafe};

use crate::common::IdKind;

outreach_runtime::prelude::resource_tag!(
    "events",
    toolset = "workspace",
    "Events: each change the workspace's systems may want to hear about (an acceptance, a reply, a finished run), kept 30 days."
);

/// How long events are kept.
pub const KEPT_DAYS: i64 = 30;
pub const KEPT_MS: i64 = KEPT_DAYS * 24 * 60 * 60 * 1000;

/// The most bytes an event's `data` may take as JSON: events are thin.
pub const MAX_DATA_BYTES: usize = 20 * 1024;

text_enum! {
    /// What happened. Each type's `data` carries the keys listed with it.
    pub enum EventType {
        /// An agent run finished its work and needs nothing more. `data`: `run_id`, `agent_id`, `kind`.
        RunCompleted => "run.completed",
        /// An agent run failed. `data`: `run_id`, `agent_id`, `kind`, `error`.
        RunFailed => "run.failed",
        /// An agent run finished its work and its proposals wait for a person. `data`: `run_id`, `agent_id`, `kind`, `approvals_pending`.
        RunAwaitingApproval => "run.awaiting_approval",
        /// An approval item was created and waits for a decision. `data`: `approval_id`, `kind`, `sequence_id`, `prospect_id`, `run_id`.
        ApprovalRequested => "approval.requested",
        /// An approval item expired undecided. `data`: `approval_id`, `sequence_id`, `prospect_id`.
        ApprovalExpired => "approval.expired",
        /// An approved enrollment's outreach began: its first step was performed. `data`: `enrollment_id`, `sequence_id`, `prospect_id`, `sender_id`.
        EnrollmentStarted => "enrollment.started",
        /// The person replied for the first time in an enrollment. `data`: `enrollment_id`, `sequence_id`, `prospect_id`, `conversation_id`.
        EnrollmentReplied => "enrollment.replied",
        /// An enrollment ended. `data`: `enrollment_id`, `sequence_id`, `prospect_id`, `exit_reason`.
        EnrollmentFinished => "enrollment.finished",
        /// An enrollment failed (the person cannot be reached, or a step kept failing). `data`: `enrollment_id`, `sequence_id`, `prospect_id`, `error`.
        EnrollmentFailed => "enrollment.failed",
        /// A sender visited the person's profile (a `view_profile` step). `data`: `enrollment_id`, `sequence_id`, `prospect_id`, `sender_id`.
        ProfileViewed => "profile.viewed",
        /// A sender sent the person an invitation. `data`: `enrollment_id`, `sequence_id`, `prospect_id`, `sender_id`.
        ConnectionRequested => "connection.requested",
        /// The network refused an invitation. `data`: `enrollment_id`, `sequence_id`, `prospect_id`, `sender_id`, `error`.
        ConnectionRequestFailed => "connection.request_failed",
        /// The person accepted a sender's invitation. `data`: `prospect_id`, `sender_id`.
        ConnectionAccepted => "connection.accepted",
        /// A pending invitation was withdrawn on the network's side (by its owner, in the network's app; the enrollment and sequence are null when none waited for it). `data`: `enrollment_id`, `sequence_id`, `prospect_id`, `sender_id`.
        InvitationWithdrawn => "invitation.withdrawn",
        /// A message went out (a step or a reply). `data`: `message_id`, `conversation_id`, `prospect_id`, `sender_id`, `enrollment_id`.
        MessageSent => "message.sent",
        /// A message came in. `data`: `message_id`, `conversation_id`, `prospect_id`, `sender_id`.
        MessageReceived => "message.received",
        /// A message did not go: the network refused it, or it could no longer be sent (no profile URL, the person marked do-not-contact, the sender deleted). `data`: `enrollment_id`, `sequence_id`, `prospect_id`, `sender_id`, `error`.
        MessageFailed => "message.failed",
        /// The inbox triage agent classified a conversation's latest reply. `data`: `conversation_id`, `prospect_id`, `classification`.
        ConversationClassified => "conversation.classified",
        /// A sender's account was disconnected. `data`: `sender_id`, `status`.
        SenderDisconnected => "sender.disconnected",
        /// A sender's account is connected again. `data`: `sender_id`, `status`.
        SenderReconnected => "sender.reconnected",
        /// The network restricted a sender's account. `data`: `sender_id`, `status`.
        SenderRestricted => "sender.restricted",
        /// A sender used a whole daily (or weekly) limit. `data`: `sender_id`, `limit`, `used`, `max`.
        SenderLimitReached => "sender.limit_reached",
        /// A sender used 80% of a daily (or weekly) limit. `data`: `sender_id`, `limit`, `used`, `max`.
        SenderLimitApproaching => "sender.limit_approaching",
        /// A sequence was activated (or resumed). `data`: `sequence_id`.
        SequenceActivated => "sequence.activated",
        /// A sequence was paused. `data`: `sequence_id`.
        SequencePaused => "sequence.paused",
        /// Every enrollment of an active sequence ended. `data`: `sequence_id`.
        SequenceCompleted => "sequence.completed",
        /// An import wrote its prospects. `data`: `import_id`, `created`, `updated`, `invalid`.
        ImportCompleted => "import.completed",
        /// A scoring run scored its prospects. `data`: `scoring_run_id`, `targeting_id`, `scored`.
        ScoringRunCompleted => "scoring_run.completed",
        /// A list's processing finished. `data`: `list_id`, `scoring_run_id`.
        ListProcessed => "list.processed",
        /// A prospect was marked do-not-contact. `data`: `prospect_id`.
        ProspectDoNotContactAdded => "prospect.do_not_contact_added",
        /// A spend left the balance under the low mark. `data`: `balance`, `threshold`.
        CreditsLow => "credits.low",
        /// The service disabled a webhook endpoint: it answered `410 Gone`, or its deliveries failed for 5 days. `data`: `webhook_endpoint_id`, `reason`.
        WebhookEndpointDisabled => "webhook_endpoint.disabled",
    }
}

impl EventType {
    /// The keys of this type's `data`, as its documentation lists them (the text after `data:`).
    pub fn data_keys(self) -> Vec<&'static str> {
        let doc = self.doc();
        doc.split_once("`data`:")
            .map(|(_, keys)| {
                keys.split(',')
                    .filter_map(|key| key.trim().trim_end_matches('.').strip_prefix('`'))
                    .filter_map(|key| key.strip_suffix('`'))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Writes an event of `kind` with `data` (an object with exactly the type's keys) in the caller's
/// transaction, at `now_ms`. The caller is the owner of the change, inside the transaction that
/// makes it.
pub async fn record(
    conn: &mut AnyConnection,
    workspace_id: &str,
    now_ms: i64,
    kind: EventType,
    data: Value,
) -> Result<(), ApiError> {
    record_many(
        conn,
        workspace_id,
        now_ms,
        kind,
        std::slice::from_ref(&data),
    )
    .await
}

/// Writes one event of `kind` for each of `data` (as [`record`] does), a hundred per statement:
/// for the changes made in bulk (a list enrolled at once, a sequence's items expired).
pub async fn record_many(
    conn: &mut AnyConnection,
    workspace_id: &str,
    now_ms: i64,
    kind: EventType,
    data: &[Value],
) -> Result<(), ApiError> {
    for chunk in data.chunks(100) {
        let mut values = Vec::with_capacity(chunk.len());
        let mut texts = Vec::with_capacity(chunk.len());
        for (i, one) in chunk.iter().enumerate() {
            texts.push(checked_text(kind, one)?);
            let n = 4 + 2 * i;
            values.push(format!("(${n}, $1, $2, $3, ${})", n + 1));
        }
        let sql = format!(
            "insert into events (id, workspace_id, type, created_at, data) values {}",
            values.join(", ")
        );
        // One row (nearly every event) is one statement, worth preparing once per connection.
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .persistent(chunk.len() == 1)
            .bind(workspace_id)
            .bind(kind.as_str())
            .bind(now_ms);
        let mut written = Vec::with_capacity(texts.len());
        for text in texts {
            let id = ids::new_id("evt");
            query = query.bind(id.clone()).bind(text);
            written.push((id, kind.as_str()));
        }
        query.execute(&mut *conn).await?;
        // The webhook deliveries of these events, in the same transaction: they exist exactly
        // when the events do.
        crate::deliveries::fan_out(conn, workspace_id, now_ms, &written).await?;
    }
    Ok(())
}

/// Each type's data keys, read from its doc once.
static DATA_KEYS: LazyLock<HashMap<EventType, Vec<&'static str>>> = LazyLock::new(|| {
    EventType::ALL
        .iter()
        .map(|kind| (*kind, kind.data_keys()))
        .collect()
});

/// `data` as the JSON text stored. It must be an object of exactly the type's keys, and small:
/// a fault of ours otherwise.
fn checked_text(kind: EventType, data: &Value) -> Result<String, ApiError> {
    let Value::Object(fields) = data else {
        return Err(ApiError::internal(format!(
            "the data of a `{kind}` event is not an object"
        )));
    };
    let expected = DATA_KEYS.get(&kind).map_or(&[][..], Vec::as_slice);
    if fields.len() != expected.len() || !expected.iter().all(|key| fields.contains_key(*key)) {
        let keys: Vec<&String> = fields.keys().collect();
        return Err(ApiError::internal(format!(
            "a `{kind}` event's data has the keys {keys:?}, not {expected:?}"
        )));
    }
    let text = data.to_string();
    if text.len() > MAX_DATA_BYTES {
        return Err(ApiError::internal(format!(
            "a `{kind}` event's data is over {MAX_DATA_BYTES} bytes"
        )));
    }
    Ok(text)
}

/// Deletes the events older than [`KEPT_DAYS`]; run by the runtime's housekeeping.
async fn purge(db: &outreach_runtime::prelude::Db, now_ms: i64) -> Result<u64, ApiError> {
    Ok(sqlx::query("delete from events where created_at < $1")
        .bind(now_ms - KEPT_MS)
        .execute(db.writes())
        .await?
        .rows_affected())
}

outreach_runtime::prelude::purge!("events older than 30 days", purge);

/// An event as the API shows it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Event {
    /// The event's id (`evt_...`): the same in every delivery of it.
    pub id: String,
    /// What happened.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// When it happened (the service's clock).
    pub created_at: Timestamp,
    /// The ids involved and a few display fields; `type` says which keys.
    pub data: Map<String, Value>,
}

const EVENT_COLUMNS: &str = "id, type, created_at, data";

impl FromColumns for Event {
    fn from_columns<R: Columns + ?Sized>(row: &mut Cursor<'_, R>) -> Result<Self, ApiError> {
        let id = row.required_text("id")?;
        let kind = EventType::from_db(&row.required_text("type")?)?;
        let created_at = Timestamp(row.required_int("created_at")?);
        let data = serde_json::from_str(&row.required_text("data")?).map_err(ApiError::internal)?;
        Ok(Self {
            id,
            kind,
            created_at,
            data,
        })
    }
}

/// The input of `list_events`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListEventsInput {
    /// Any of these types.
    ///
    /// What each says is in the `type` of the events answered.
    #[schemars(schema_with = "type_filter_schema")]
    #[serde(default, rename = "type")]
    pub types: Vec<EventType>,
    /// At or after this time.
    pub created_after: Option<Timestamp>,
    /// Strictly before this time.
    pub created_before: Option<Timestamp>,
    /// `false`: events some webhook endpoint has not yet received; `true`: those every endpoint
    /// received.
    ///
    /// Not yet received: its delivery to the endpoint is pending or failed, and none of the event
    /// to it succeeded. Every endpoint: every endpoint the event was sent to.
    pub delivery_success: Option<bool>,
    #[serde(flatten)]
    pub page: PageParams,
}

/// The schema of `list_events`' `type`: the types' names only, since every event answered
/// carries the documented type (the tool list stays small).
fn type_filter_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let names: Vec<&str> = EventType::ALL.iter().map(|kind| kind.as_str()).collect();
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "string", "enum": names},
        "maxItems": names.len(),
        "default": [],
    })
}

/// List events, newest first.
///
/// Changes other systems may want to hear of (an acceptance, a reply, a run finished), kept 30
/// days.
///
/// Each is written with the change itself. Filter by `type` (one or several), a time range, or
/// `delivery_success: false` for the events a webhook endpoint has not yet received.
#[action(scope = "read", http = "GET /events")]
pub async fn list_events(ctx: Ctx, input: ListEventsInput) -> Result<Page<Event>, ApiError> {
    if let (Some(after), Some(before)) = (input.created_after, input.created_before)
        && before.ms() <= after.ms()
    {
        return Err(ApiError::invalid_request(format!(
            "`created_before` ({before}) must be after `created_after` ({after})."
        )));
    }
    // Events past their 30 days are gone, whether or not housekeeping has deleted them yet.
    let mut filter = String::from("workspace_id = $1 and created_at >= $2");
    let kept_since = ctx.now_ms() - KEPT_MS;
    let mut binds: Vec<Bind> = vec![
        Bind::Text(ctx.workspace_id().to_owned()),
        Bind::Int(kept_since),
    ];
    if !input.types.is_empty() {
        let mut types: Vec<&str> = input.types.iter().map(|kind| kind.as_str()).collect();
        types.sort_unstable();
        types.dedup();
        let mut slots = Vec::with_capacity(types.len());
        for kind in types {
            binds.push(Bind::Text(kind.to_owned()));
            slots.push(format!("${}", binds.len()));
        }
        filter.push_str(&format!(" and type in ({})", slots.join(", ")));
    }
    if let Some(after) = input.created_after {
        binds.push(Bind::Int(after.ms()));
        filter.push_str(&format!(" and created_at >= ${}", binds.len()));
    }
    if let Some(success) = input.delivery_success {
        let unreceived = "exists (select 1 from webhook_deliveries d where d.event_id = events.id \
             and d.status <> 'succeeded' and not exists (select 1 from webhook_deliveries s \
             where s.event_id = d.event_id and s.endpoint_id = d.endpoint_id \
             and s.status = 'succeeded'))";
        if success {
            filter.push_str(&format!(
                " and exists (select 1 from webhook_deliveries r where r.event_id = events.id) \
                 and not {unreceived}"
            ));
        } else {
            filter.push_str(&format!(" and {unreceived}"));
        }
    }
    if let Some(before) = input.created_before {
        binds.push(Bind::Int(before.ms()));
        filter.push_str(&format!(" and created_at < ${}", binds.len()));
    }
    let order = [
        OrderTerm::new("created_at", true),
        // One transaction's events share a time: they come in the order they were written.
        OrderTerm::new("seq", true),
    ];
    let query = SortedQuery {
        table: "events",
        columns: EVENT_COLUMNS,
        filter: &filter,
        order: &order,
    };
    paged_sorted(ctx.db(), input.page, query, Total::Count, binds).await
}

outreach_runtime::prelude::example!(list_events,
    request: {"type": ["enrollment.replied", "connection.accepted"], "limit": 2},
    response: {
        "count": 2,
        "has_more": false,
        "items": [
            {
                "created_at": "2026-11-25T14:02:41.000Z",
                "data": {
                    "conversation_id": "cnv_Qm3VbT8rKx2LpN7sYw4D",
                    "enrollment_id": "enr_x8Ls0dQw3Vn6Ty1Pb4Zk",
                    "prospect_id": "prs_8Jk2LmN4pQ6rS8tU0vW2",
                    "sequence_id": "seq_G9hJ1kL3mN5pQ7rS9tU1"
                },
                "id": "evt_M2nB4vC6xZ8lK0jH2gF4",
                "type": "enrollment.replied"
            },
            {
                "created_at": "2026-11-25T09:40:12.000Z",
                "data": {
                    "prospect_id": "prs_8Jk2LmN4pQ6rS8tU0vW2",
                    "sender_id": "snd_T5uV7wX9yZ1aB3cD5eF7"
                },
                "id": "evt_P9oI7uY5tR3eW1qA9sD7",
                "type": "connection.accepted"
            }
        ],
        "next_offset": null,
        "offset": 0,
        "total": 2
    }
);

outreach_runtime::prelude::parity!(list_events, read,
    ok: {"type": ["sequence.paused", "sequence.activated"], "limit": 5},
    fails: {"type": ["sequence.deleted"]} => INVALID_REQUEST
);

/// The input of `get_event`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EventId {
    /// `evt_...`
    pub id: String,
}

/// Get an event by id.
///
/// Events are kept 30 days; an older one is not found.
#[action(scope = "read", http = "GET /events/{id}")]
pub async fn get_event(ctx: Ctx, input: EventId) -> Result<Event, ApiError> {
    IdKind::Event.check(&input.id)?;
    let row = sqlx::query(AssertSqlSafe(format!(
        "select {EVENT_COLUMNS} from events where workspace_id = $1 and id = $2 and created_at >= $3"
    )))
    .bind(ctx.workspace_id())
    .bind(&input.id)
    .bind(ctx.now_ms() - KEPT_MS)
    .fetch_optional(ctx.db().pool())
    .await?
    .ok_or_else(|| IdKind::Event.not_found(&input.id))?;
    Event::from_columns(&mut Cursor::new(&row))
}

outreach_runtime::prelude::example!(get_event,
    request: {"id": "evt_P9oI7uY5tR3eW1qA9sD7"},
    response: {
        "created_at": "2026-11-25T09:40:12.000Z",
        "data": {
            "prospect_id": "prs_8Jk2LmN4pQ6rS8tU0vW2",
            "sender_id": "snd_T5uV7wX9yZ1aB3cD5eF7"
        },
        "id": "evt_P9oI7uY5tR3eW1qA9sD7",
        "type": "connection.accepted"
    }
);

outreach_runtime::prelude::parity!(get_event, read,
    ok: {"id": "$event"},
    fails: {"id": "$missing:evt"} => NOT_FOUND
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_documents_its_data_and_its_text_is_its_wire_form() {
        for kind in EventType::ALL {
            assert!(!kind.data_keys().is_empty(), "{kind} lists no data keys");
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
        assert_eq!(
            EventType::RunFailed.data_keys(),
            ["run_id", "agent_id", "kind", "error"]
        );
    }

    #[test]
    fn data_must_have_exactly_the_documented_keys() {
        let kind = EventType::SequencePaused;
        assert!(checked_text(kind, &serde_json::json!({"sequence_id": "seq_1"})).is_ok());
        assert!(checked_text(kind, &serde_json::json!({})).is_err());
        assert!(
            checked_text(
                kind,
                &serde_json::json!({"sequence_id": "seq_1", "name": "x"})
            )
            .is_err()
        );
        assert!(checked_text(kind, &serde_json::json!(["seq_1"])).is_err());
    }
}
