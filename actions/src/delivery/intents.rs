//! Intent rows: what the scheduler is about to do on the network, durable before it does it.
//!
//! The order is the whole point. An intent (and the sender's quota unit) commits *before* the
//! provider call; the outcome is written *after* it. A job that finds a `pending` intent cannot
//! know whether the call happened (its process may have died between the call and the commit),
//! so it asks the network by the intent's id ([`crate::network::NetworkProvider::find_outbound`])
//! and never sends blindly again. The unique index on (enrollment, step) makes a second intent
//! for the same step impossible, whatever the workers do.

use outreach_runtime::prelude::{ApiError, ids, text_enum};
use sqlx::{AnyConnection, Row};

text_enum! {
    /// Where an intent is.
    pub enum IntentStatus {
        /// Committed before the call; the outcome is not known yet.
        Pending => "pending",
        /// The network performed it.
        Sent => "sent",
        /// The network refused it; nothing reached the person.
        Failed => "failed",
    }
}

/// One intent as stored.
#[derive(Debug, Clone)]
pub struct Intent {
    pub id: String,
    pub status: IntentStatus,
    pub usage_id: Option<String>,
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
    pub usage_id: Option<&'a str>,
}

fn from_row(row: &sqlx::any::AnyRow) -> Result<Intent, ApiError> {
    Ok(Intent {
        id: row.try_get("id")?,
        status: IntentStatus::from_db(&row.try_get::<String, _>("status")?)?,
        usage_id: row.try_get("usage_id")?,
    })
}

/// The intent of an enrollment's step, if one was written.
pub async fn of_step(
    conn: &mut AnyConnection,
    enrollment_id: &str,
    step_index: i64,
) -> Result<Option<Intent>, ApiError> {
    let row = sqlx::query(
        "select id, status, usage_id from outbound_intents where enrollment_id = $1 and step_index = $2",
    )
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
    let row = sqlx::query(
        "select id, status, usage_id from outbound_intents where message_id = $1 and enrollment_id is null",
    )
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
         message_id, text, usage_id, status, created_at) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'pending', $11)",
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

/// Removes an intent that definitely did not reach the network (refused for the account, not
/// the person), so the step can be tried again later with a fresh one.
pub async fn forget(conn: &mut AnyConnection, id: &str) -> Result<(), ApiError> {
    sqlx::query("delete from outbound_intents where id = $1")
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}
