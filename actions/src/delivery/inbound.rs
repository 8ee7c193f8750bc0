//! What an inbound event changes: the conversation, the prospect and the enrollments.
//!
//! [`crate::network::ingest`] records an event once and calls [`apply`] in the same transaction,
//! whichever way the event came (the sandbox's poll, its test helpers, later a provider's
//! webhook). An acceptance connects the prospect and lets every enrollment that waited for it go
//! on after its next step's delay; a message lands in the conversation, sets `last_replied_at`
//! and ends the live enrollments of that prospect whose sequence stops on reply (a person who
//! answered is not followed up by automation, whichever sender they answered).
//!
//! The `network_poll` job asks the network for what arrived, for every workspace with senders,
//! every few minutes of service time: acceptances can be signalled late, so polling is the model.

use outreach_runtime::prelude::{
    ApiError, Clock, JobCtx, JobOutcome, JobResult, NewJob, enqueue, jobs,
};
use sqlx::{AnyConnection, Row};

use crate::conversations::{Inbound, record_inbound};
use crate::enrollments::record_event;
use crate::network::{InboundEvent, NetworkProvider, network_for};

/// The job kind that polls the network.
pub const POLL_JOB: &str = "network_poll";
/// How often the network is polled (service time).
pub const POLL_EVERY_MS: i64 = 5 * 60 * 1000;

const HOUR_MS: i64 = 3_600_000;

/// Applies a newly recorded inbound event in the caller's transaction.
pub async fn apply(
    conn: &mut AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    event: &InboundEvent,
) -> Result<(), ApiError> {
    match event {
        InboundEvent::InvitationAccepted {
            sender_id,
            profile_url,
            at_ms,
        } => accepted(conn, clock, workspace_id, sender_id, profile_url, *at_ms).await,
        InboundEvent::MessageReceived {
            sender_id,
            profile_url,
            text,
            at_ms,
            provider_message_id,
        } => {
            let Some(prospect_id) = prospect_of(conn, workspace_id, profile_url).await? else {
                return Ok(());
            };
            super::lock_steps_of_people(conn, workspace_id, &[prospect_id.as_str()]).await?;
            let inbound = Inbound {
                workspace_id,
                sender_id,
                prospect_id: &prospect_id,
                text,
                at_ms: *at_ms,
                provider_message_id,
            };
            if record_inbound(conn, &inbound, clock.now_ms())
                .await?
                .is_none()
            {
                return Ok(());
            }
            replied(conn, clock, workspace_id, &prospect_id, *at_ms).await
        }
    }
}

async fn prospect_of(
    conn: &mut AnyConnection,
    workspace_id: &str,
    profile_url: &str,
) -> Result<Option<String>, ApiError> {
    let row = sqlx::query("select id from prospects where workspace_id = $1 and profile_url = $2")
        .bind(workspace_id)
        .bind(profile_url)
        .fetch_optional(conn)
        .await?;
    row.map(|row| row.try_get("id"))
        .transpose()
        .map_err(Into::into)
}

async fn accepted(
    conn: &mut AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    sender_id: &str,
    profile_url: &str,
    at_ms: i64,
) -> Result<(), ApiError> {
    let Some(prospect_id) = prospect_of(conn, workspace_id, profile_url).await? else {
        return Ok(());
    };
    super::lock_steps_of_people(conn, workspace_id, &[prospect_id.as_str()]).await?;
    sqlx::query("update prospects set connection_state = 'connected' where id = $1")
        .bind(&prospect_id)
        .execute(&mut *conn)
        .await?;
    // The enrollments of this sender that sent their invitation and wait for it.
    let waiting = sqlx::query(
        "select id, sequence_id, step_index, status from enrollments where workspace_id = $1 and prospect_id = $2 \
         and sender_id = $3 and invited_at is not null and accepted_at is null \
         and status in ('scheduled', 'active', 'paused')",
    )
    .bind(workspace_id)
    .bind(&prospect_id)
    .bind(sender_id)
    .fetch_all(&mut *conn)
    .await?;
    for row in waiting {
        let id: String = row.try_get("id")?;
        let sequence_id: String = row.try_get("sequence_id")?;
        let step_index: i64 = row.try_get("step_index")?;
        let status: String = row.try_get("status")?;
        let sequence = crate::sequences::fetch_row(conn, workspace_id, &sequence_id).await?;
        let delay = usize::try_from(step_index)
            .ok()
            .and_then(|index| sequence.steps.get(index))
            .map_or(0, |step| i64::from(step.delay_hours));
        let next_at = at_ms + delay * HOUR_MS;
        sqlx::query("update enrollments set accepted_at = $2, next_step_at = $3 where id = $1")
            .bind(&id)
            .bind(at_ms)
            .bind(next_at)
            .execute(&mut *conn)
            .await?;
        record_event(conn, workspace_id, &id, at_ms, "accepted", None, None, None).await?;
        if status != "paused" {
            super::schedule(conn, clock, workspace_id, &id, next_at).await?;
        }
    }
    Ok(())
}

async fn replied(
    conn: &mut AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    prospect_id: &str,
    at_ms: i64,
) -> Result<(), ApiError> {
    sqlx::query("update prospects set last_replied_at = $2 where id = $1")
        .bind(prospect_id)
        .bind(at_ms)
        .execute(&mut *conn)
        .await?;
    let live = sqlx::query(
        "select e.id, e.sequence_id, s.settings from enrollments e join sequences s on s.id = e.sequence_id \
         where e.workspace_id = $1 and e.prospect_id = $2 and e.status in ('scheduled', 'active', 'paused')",
    )
    .bind(workspace_id)
    .bind(prospect_id)
    .fetch_all(&mut *conn)
    .await?;
    let now = clock.now_ms();
    for row in live {
        let id: String = row.try_get("id")?;
        let sequence_id: String = row.try_get("sequence_id")?;
        let settings: crate::sequences::Settings =
            serde_json::from_str(&row.try_get::<String, _>("settings")?)
                .map_err(ApiError::internal)?;
        if !settings.stop_on_reply {
            continue;
        }
        sqlx::query(
            "update enrollments set status = 'finished', exit_reason = 'replied', next_step_at = null, updated_at = $2 \
             where id = $1",
        )
        .bind(&id)
        .bind(now)
        .execute(&mut *conn)
        .await?;
        record_event(
            conn,
            workspace_id,
            &id,
            at_ms,
            "finished",
            None,
            None,
            Some("replied"),
        )
        .await?;
        jobs::cancel_unique(&mut *conn, clock, super::STEP_JOB, &super::step_key(&id)).await?;
        super::complete_sequence_if_done(conn, &sequence_id, now).await?;
    }
    Ok(())
}

/// Makes sure the network is being polled (in the caller's transaction): one `network_poll` job
/// for the whole database, which keeps itself going.
pub async fn ensure_polling(conn: &mut AnyConnection, clock: &Clock) -> Result<(), ApiError> {
    enqueue(
        conn,
        clock,
        NewJob::new(POLL_JOB, serde_json::json!({})).unique_key(POLL_JOB),
    )
    .await?;
    Ok(())
}

async fn poll(job: JobCtx) -> JobResult {
    let workspaces: Vec<String> = {
        let rows =
            sqlx::query("select distinct workspace_id from senders where deleted_at is null")
                .fetch_all(job.db().pool())
                .await?;
        rows.iter()
            .map(|row| row.try_get("workspace_id"))
            .collect::<Result<_, _>>()?
    };
    let network = network_for(job.config(), job.db(), job.clock())?;
    for workspace_id in workspaces {
        if let Err(error) = network.poll(&workspace_id).await {
            tracing::warn!(workspace_id, ?error, "polling the network failed");
        }
    }
    Ok(JobOutcome::Snooze {
        until_ms: job.now_ms() + POLL_EVERY_MS,
    })
}

outreach_runtime::prelude::job!("network_poll", poll);
