//! Intent rows: what the scheduler is about to do on the network, durable before it does it.
//!
//! The order is the whole point. An intent (and the sender's quota unit) commits *before* the
//! provider call; the outcome is written *after* it. A job that finds a `pending` or
//! `unanswered` intent cannot know whether the call happened (its process may have died between
//! the call and the commit, or the call failed without an answer), so it asks the network by the
//! intent's id ([`crate::network::NetworkProvider::find_outbound`]) and never sends blindly again.
//! When the network has no record, the intent becomes `unsent`: it is sent again only through the
//! gate (working hours, the gap, the limits at that moment), under the same id, with a quota unit
//! taken at the moment of the call ([`rearm`]). The unique index on (enrollment, step) makes a
//! second intent for the same step impossible, whatever the workers do.
//!
//! A `pending` intent also holds its sender: while one is open the gate lets no other call of
//! that sender through ([`call_under_way`]), so two calls never reach the network closer than the
//! gap, even when a call is slow, the clock jumps, or its process died mid-call.

use outreach_runtime::prelude::{ApiError, ids, text_enum};
use sqlx::{AnyConnection, Row};

text_enum! {
    /// Where an intent is.
    pub enum IntentStatus {
        /// Committed before the call; the call is under way, or its process died: ask the network.
        Pending => "pending",
        /// The call came back without an outcome (a transient fault): ask the network.
        Unanswered => "unanswered",
        /// The network has no record of it: it goes again through the gate, under the same id.
        Unsent => "unsent",
        /// The network performed it.
        Sent => "sent",
        /// The network refused it; nothing reached the person.
        Failed => "failed",
    }
}

impl IntentStatus {
    /// Whether the network must be asked what came of the call before anything else happens.
    pub fn outcome_unknown(self) -> bool {
        matches!(self, Self::Pending | Self::Unanswered)
    }
}

/// One intent as stored.
#[derive(Debug, Clone)]
pub struct Intent {
    pub id: String,
    pub status: IntentStatus,
    pub usage_id: Option<String>,
    pub sender_id: String,
    pub prospect_id: String,
    /// The A/B variant of the step it sends, if the step has variants.
    pub variant: Option<String>,
}

/// What a new intent is about.
#[derive(Debug, Clone, Copy)]
pub struct NewIntent<'a> {
    pub workspace_id: &'a str,
    pub sender_id: &'a str,
    pub prospect_id: &'a str,
    /// `profile_view`, `invitation` or `message` (the network's kinds).
    pub kind: &'a str,
    pub enrollment_id: Option<&'a str>,
    pub step_index: Option<i64>,
    pub message_id: Option<&'a str>,
    pub text: Option<&'a str>,
    pub variant: Option<&'a str>,
    pub usage_id: Option<&'a str>,
}

fn from_row(row: &sqlx::any::AnyRow) -> Result<Intent, ApiError> {
    Ok(Intent {
        id: row.try_get("id")?,
        status: IntentStatus::from_db(&row.try_get::<String, _>("status")?)?,
        usage_id: row.try_get("usage_id")?,
        sender_id: row.try_get("sender_id")?,
        prospect_id: row.try_get("prospect_id")?,
        variant: row.try_get("variant")?,
    })
}

const INTENT_COLUMNS: &str = "id, status, usage_id, sender_id, prospect_id, variant";

/// The intent of an enrollment's step, if one was written.
pub async fn of_step(
    conn: &mut AnyConnection,
    enrollment_id: &str,
    step_index: i64,
) -> Result<Option<Intent>, ApiError> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "select {INTENT_COLUMNS} from outbound_intents where enrollment_id = $1 and step_index = $2"
    )))
    .bind(enrollment_id)
    .bind(step_index)
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// The intent of a queued reply, if one was written.
pub async fn of_message(
    conn: &mut AnyConnection,
    message_id: &str,
) -> Result<Option<Intent>, ApiError> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "select {INTENT_COLUMNS} from outbound_intents where message_id = $1 and enrollment_id is null"
    )))
    .bind(message_id)
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// Writes a `pending` intent; its id is the token the network sees.
pub async fn insert(
    conn: &mut AnyConnection,
    intent: &NewIntent<'_>,
    now_ms: i64,
) -> Result<String, ApiError> {
    let id = ids::new_id("int");
    sqlx::query(
        "insert into outbound_intents (id, workspace_id, sender_id, prospect_id, kind, enrollment_id, step_index, \
         message_id, text, variant, usage_id, status, created_at) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'pending', $12)",
    )
    .bind(&id)
    .bind(intent.workspace_id)
    .bind(intent.sender_id)
    .bind(intent.prospect_id)
    .bind(intent.kind)
    .bind(intent.enrollment_id)
    .bind(intent.step_index)
    .bind(intent.message_id)
    .bind(intent.text)
    .bind(intent.variant)
    .bind(intent.usage_id)
    .bind(now_ms)
    .execute(conn)
    .await?;
    Ok(id)
}

/// Records what came of an intent.
pub async fn complete(
    conn: &mut AnyConnection,
    id: &str,
    status: IntentStatus,
    outcome: &str,
    now_ms: i64,
) -> Result<(), ApiError> {
    sqlx::query(
        "update outbound_intents set status = $2, outcome = $3, completed_at = $4 where id = $1",
    )
    .bind(id)
    .bind(status.as_str())
    .bind(outcome)
    .bind(now_ms)
    .execute(conn)
    .await?;
    Ok(())
}

/// Marks a `pending` intent whose call came back without an outcome (a transient fault).
pub async fn mark_unanswered(conn: &mut AnyConnection, id: &str) -> Result<(), ApiError> {
    sqlx::query(
        "update outbound_intents set status = 'unanswered' where id = $1 and status = 'pending'",
    )
    .bind(id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Marks an intent the network has no record of: it no longer holds a quota unit (the caller gave
/// it back) and is sent again only through the gate ([`rearm`]).
pub async fn mark_unsent(conn: &mut AnyConnection, id: &str) -> Result<(), ApiError> {
    sqlx::query(
        "update outbound_intents set status = 'unsent', usage_id = null where id = $1          and status in ('pending', 'unanswered')",
    )
    .bind(id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Makes an `unsent` intent `pending` again with the quota unit the gate just took: its call is
/// about to be made, under the same id.
pub async fn rearm(conn: &mut AnyConnection, id: &str, usage_id: &str) -> Result<(), ApiError> {
    sqlx::query("update outbound_intents set status = 'pending', usage_id = $2 where id = $1 and status = 'unsent'")
        .bind(id)
        .bind(usage_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Whether a call of `sender_id` is under way: a `pending` intent, whose call may be reaching the
/// network now, or whose process died mid-call. The gate lets no other call of the sender through
/// until it is settled. (A caller at the gate never holds a `pending` intent itself: one is
/// settled before its step goes on.)
pub async fn call_under_way(conn: &mut AnyConnection, sender_id: &str) -> Result<bool, ApiError> {
    let row = sqlx::query(
        "select id from outbound_intents where sender_id = $1 and status = 'pending' limit 1",
    )
    .bind(sender_id)
    .fetch_optional(conn)
    .await?;
    Ok(row.is_some())
}

/// The intents whose outcome is unknown (`pending`, `unanswered`): what recovery makes sure a job
/// is settling. (workspace id, enrollment id, message id) of each, oldest first, at most `limit`.
pub async fn unsettled(
    conn: &mut AnyConnection,
    limit: i64,
) -> Result<Vec<(String, Option<String>, Option<String>)>, ApiError> {
    let rows = sqlx::query(
        "select workspace_id, enrollment_id, message_id from outbound_intents          where status in ('pending', 'unanswered') order by created_at limit $1",
    )
    .bind(limit)
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|row| {
            Ok((
                row.try_get("workspace_id")?,
                row.try_get("enrollment_id")?,
                row.try_get("message_id")?,
            ))
        })
        .collect()
}

/// What an intent was for, when that is gone (its prospect was deleted, and with it the
/// enrollment or the conversation's message).
#[derive(Debug, Clone, Copy)]
pub enum Subject<'a> {
    Enrollment(&'a str),
    Message(&'a str),
}

/// Closes the intents of a deleted `subject` whose outcome is unknown: `failed` with the outcome
/// `abandoned`, their quota units kept (the call may have happened, so they count against the
/// limits). Returns their senders: the caller restarts their gap (the call may have happened at
/// any moment until now), and they no longer hold a call under way.
pub async fn abandon(
    conn: &mut AnyConnection,
    subject: Subject<'_>,
    now_ms: i64,
) -> Result<Vec<String>, ApiError> {
    let filter = match subject {
        Subject::Enrollment(_) => "enrollment_id = $1",
        Subject::Message(_) => "message_id = $1 and enrollment_id is null",
    };
    let (Subject::Enrollment(id) | Subject::Message(id)) = subject;
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "update outbound_intents set status = 'failed', outcome = 'abandoned', completed_at = $2 \
         where {filter} and status in ('pending', 'unanswered') returning sender_id"
    )))
    .bind(id)
    .bind(now_ms)
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|row| row.try_get("sender_id").map_err(ApiError::from))
        .collect()
}

/// Removes an intent that definitely did not reach the network (refused for the account, not
/// the person), so the step can be tried again later with a fresh one.
pub async fn forget(conn: &mut AnyConnection, id: &str) -> Result<(), ApiError> {
    sqlx::query("delete from outbound_intents where id = $1")
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}
