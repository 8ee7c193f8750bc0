//! The dashboard's outreach figures: what reached the network in the period, and what came back.
//!
//! Everything is counted from the rows the engine keeps as it works, never from counters of its
//! own: sends from the completed intents (one per step or reply that the network performed),
//! acceptances from the enrollments that sent an invitation in the period, replies from the
//! inbound messages, and each sender's usage from the same quota rows its limits are checked on.

use outreach_runtime::prelude::ApiError;
use schemars::JsonSchema;
use serde::Serialize;
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

use crate::senders::{self, Usage};
use crate::sequences::stats::{StepFigures, step_figures};

/// Outreach in the period.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OutreachFigures {
    /// Connection requests the network received in the period.
    pub invitations_sent: i64,
    /// Of those, how many were accepted (so far).
    pub invitations_accepted: i64,
    /// `invitations_accepted / invitations_sent`, 0 to 1; null when none were sent.
    pub acceptance_rate: Option<f64>,
    /// Messages the network received in the period (sequence steps, InMails included, and
    /// replies by people).
    pub messages_sent: i64,
    /// Profile views in the period.
    pub profile_views: i64,
    /// Prospects who wrote back in the period.
    pub replies: i64,
    /// `replies / prospects messaged in the period`, 0 to 1; null when nobody was messaged.
    pub reply_rate: Option<f64>,
    /// The same per sequence, most invitations first.
    pub by_sequence: Vec<SequenceFigures>,
    /// Per sender account, with its usage today and over 7 days against each limit.
    pub by_sender: Vec<SenderFigures>,
}

/// One sequence's outreach in the period.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SequenceFigures {
    pub sequence_id: String,
    pub name: String,
    pub invitations_sent: i64,
    pub invitations_accepted: i64,
    pub acceptance_rate: Option<f64>,
    pub messages_sent: i64,
    /// Enrollments that ended because the prospect replied, in the period.
    pub replies: i64,
    pub reply_rate: Option<f64>,
    /// The same by step, for the steps sent in the period (as `get_sequence_stats` counts them).
    pub steps: Vec<StepFigures>,
}

/// One sender account's outreach in the period, and where it stands against its limits.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SenderFigures {
    pub sender_id: String,
    pub name: String,
    pub invitations_sent: i64,
    pub messages_sent: i64,
    pub profile_views: i64,
    /// Messages it received in the period.
    pub replies: i64,
    pub usage: Usage,
}

fn rate(part: i64, whole: i64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

fn count(row: &AnyRow, column: &str) -> Result<i64, ApiError> {
    Ok(row.try_get::<Option<i64>, _>(column)?.unwrap_or(0))
}

// Sums are cast to bigint: PostgreSQL sums bigints into numeric.
const SENT_BY_KIND: &str = "cast(coalesce(sum(case when i.kind = 'invitation' then 1 else 0 end), 0) as bigint) as invitations, \
    cast(coalesce(sum(case when i.kind in ('message', 'inmail') then 1 else 0 end), 0) as bigint) as messages, \
    cast(coalesce(sum(case when i.kind = 'profile_view' then 1 else 0 end), 0) as bigint) as views";

/// The outreach figures of `workspace_id` since `since` (epoch ms), as of `now`.
pub async fn figures(
    conn: &mut AnyConnection,
    workspace_id: &str,
    since: i64,
    now: i64,
) -> Result<OutreachFigures, ApiError> {
    let sent = sqlx::query(sqlx::AssertSqlSafe(format!(
        "select {SENT_BY_KIND}, count(distinct case when i.kind in ('message', 'inmail') then i.prospect_id end) as messaged \
         from outbound_intents i where i.workspace_id = $1 and i.status = 'sent' and i.completed_at >= $2"
    )))
    .bind(workspace_id)
    .bind(since)
    .fetch_one(&mut *conn)
    .await?;
    let invitations = sqlx::query(
        "select count(*) as invited, cast(coalesce(sum(case when accepted_at is not null then 1 else 0 end), 0) as bigint) as accepted \
         from enrollments where workspace_id = $1 and invited_at >= $2",
    )
    .bind(workspace_id)
    .bind(since)
    .fetch_one(&mut *conn)
    .await?;
    let replies = sqlx::query(
        "select count(distinct c.prospect_id) as replied from messages m join conversations c on c.id = m.conversation_id \
         where m.workspace_id = $1 and m.direction = 'inbound' and m.at >= $2",
    )
    .bind(workspace_id)
    .bind(since)
    .fetch_one(&mut *conn)
    .await?;

    let by_sequence = sqlx::query(
        "select s.id, s.name, \
         (select count(*) from enrollments e where e.sequence_id = s.id and e.invited_at >= $2) as invited, \
         (select count(*) from enrollments e where e.sequence_id = s.id and e.invited_at >= $2 and e.accepted_at is not null) as accepted, \
         (select count(*) from outbound_intents i join enrollments e on e.id = i.enrollment_id \
            where e.sequence_id = s.id and i.kind in ('message', 'inmail') and i.status = 'sent' and i.completed_at >= $2) as messages, \
         (select count(distinct i.enrollment_id) from outbound_intents i join enrollments e on e.id = i.enrollment_id \
            where e.sequence_id = s.id and i.kind in ('message', 'inmail') and i.status = 'sent' and i.completed_at >= $2) as messaged, \
         (select count(*) from enrollments e where e.sequence_id = s.id and e.exit_reason = 'replied' and e.updated_at >= $2) as replied \
         from sequences s where s.workspace_id = $1 and s.status <> 'draft' order by invited desc, s.created_at, s.id",
    )
    .bind(workspace_id)
    .bind(since)
    .fetch_all(&mut *conn)
    .await?;
    let mut steps = step_figures(conn, workspace_id, None, Some(since)).await?;
    let by_sequence = by_sequence
        .iter()
        .map(|row| {
            let invited = count(row, "invited")?;
            let accepted = count(row, "accepted")?;
            let replied = count(row, "replied")?;
            Ok(SequenceFigures {
                sequence_id: row.try_get("id")?,
                name: row.try_get("name")?,
                invitations_sent: invited,
                invitations_accepted: accepted,
                acceptance_rate: rate(accepted, invited),
                messages_sent: count(row, "messages")?,
                replies: replied,
                reply_rate: rate(replied, count(row, "messaged")?),
                steps: steps
                    .remove(&row.try_get::<String, _>("id")?)
                    .unwrap_or_default(),
            })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;

    let sender_rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "select s.id, {SENT_BY_KIND}, \
         (select count(*) from messages m join conversations c on c.id = m.conversation_id \
            where c.sender_id = s.id and m.direction = 'inbound' and m.at >= $2) as replies \
         from senders s left join outbound_intents i on i.sender_id = s.id and i.status = 'sent' and i.completed_at >= $2 \
         where s.workspace_id = $1 and s.deleted_at is null group by s.id, s.created_at order by s.created_at, s.id"
    )))
    .bind(workspace_id)
    .bind(since)
    .fetch_all(&mut *conn)
    .await?;
    let mut by_sender = Vec::with_capacity(sender_rows.len());
    for row in &sender_rows {
        let id: String = row.try_get("id")?;
        let sender = senders::load(conn, workspace_id, &id).await?;
        let usage = senders::limits::usage(conn, &sender, now).await?;
        by_sender.push(SenderFigures {
            sender_id: id,
            name: sender.name,
            invitations_sent: count(row, "invitations")?,
            messages_sent: count(row, "messages")?,
            profile_views: count(row, "views")?,
            replies: count(row, "replies")?,
            usage,
        });
    }

    // The acceptance rate is over the invitations sent in the period, whenever they were accepted.
    let invited = count(&invitations, "invited")?;
    let accepted = count(&invitations, "accepted")?;
    let replied = count(&replies, "replied")?;
    Ok(OutreachFigures {
        invitations_sent: count(&sent, "invitations")?,
        invitations_accepted: accepted,
        acceptance_rate: rate(accepted, invited),
        messages_sent: count(&sent, "messages")?,
        profile_views: count(&sent, "views")?,
        replies: replied,
        reply_rate: rate(replied, count(&sent, "messaged")?),
        by_sequence,
        by_sender,
    })
}
