//! What an inbound event changes: the conversation, the prospect and the enrollments.
//!
//! [`ingest`] records an event once and calls [`apply`] in the same transaction,
//! whichever way the event came (the sandbox's poll, its test helpers, later a provider's
//! webhook). An acceptance connects the prospect and lets every enrollment that waited for it go
//! on after its next step's delay; a message lands in the conversation, sets `last_replied_at`
//! and ends the live enrollments of that prospect whose sequence stops on reply (a person who
//! answered is not followed up by automation, whichever sender they answered).
//!
//! The `network_poll` job asks the network for what arrived, for every workspace with senders,
//! every few minutes of service time: acceptances can be signalled late, so polling is the model.

use outreach_runtime::prelude::{
    ApiError, Clock, Db, ErrorCode, JobArgs, JobCtx, JobOutcome, JobResult, ids, jobs,
};
use serde_json::json;
use sqlx::{AnyConnection, Row};

use crate::conversations::{Inbound, record_inbound};
use crate::enrollments::{self, EnrollmentEventKind, record_event};
use crate::events::{self, EventType};
use crate::network::{InboundEvent, Network, NetworkProvider, network_for};
use crate::person_lock::PersonTx;
use crate::sequences::StepType;

/// How often the network is polled (service time).
pub const POLL_EVERY_MS: i64 = 5 * 60 * 1000;

const HOUR_MS: i64 = 3_600_000;

/// The one entry of inbound events, whatever their source: records `event` for the workspace in
/// the caller's transaction (`conn`), once per provider event id, and applies it there
/// ([`apply`]: the conversation, the prospect, the enrollments). Answers
/// whether it was new; a redelivered event changes nothing.
pub async fn ingest(
    conn: &mut AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    event: &InboundEvent,
) -> Result<bool, ApiError> {
    let now_ms = clock.now_ms();
    let (sender_id, profile_url, text, at_ms) = match event {
        InboundEvent::InvitationAccepted {
            sender_id,
            profile_url,
            at_ms,
        }
        | InboundEvent::InvitationWithdrawn {
            sender_id,
            profile_url,
            at_ms,
        } => (sender_id, profile_url, None, *at_ms),
        InboundEvent::MessageReceived {
            sender_id,
            profile_url,
            text,
            at_ms,
            ..
        } => (sender_id, profile_url, Some(text), *at_ms),
    };
    // `on conflict do nothing` is the same on both backends and keeps a redelivery from aborting
    // the caller's transaction (PostgreSQL aborts it on a failed insert).
    let inserted = sqlx::query(
        "insert into inbound_events (id, workspace_id, provider_event_id, kind, sender_id, profile_url, text, at, received_at) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         on conflict (workspace_id, provider_event_id) do nothing",
    )
    .bind(ids::new_id("ibe"))
    .bind(workspace_id)
    .bind(event.provider_event_id())
    .bind(event.kind())
    .bind(sender_id)
    .bind(profile_url)
    .bind(text)
    .bind(at_ms)
    .bind(now_ms)
    .execute(&mut *conn)
    .await?;
    if inserted.rows_affected() == 0 {
        return Ok(false);
    }
    apply(conn, clock, workspace_id, event).await?;
    Ok(true)
}

/// Takes what the network has for the workspace ([`NetworkProvider::poll`]) and applies each
/// event through [`ingest`], in one transaction; answers how many were new.
pub async fn deliver_due(
    network: &Network,
    db: &Db,
    clock: &Clock,
    workspace_id: &str,
) -> Result<u64, ApiError> {
    let mut tx = db.begin_write().await?;
    let events = network.poll(&mut tx, workspace_id).await?;
    let mut delivered = 0;
    for event in &events {
        delivered += u64::from(ingest(&mut tx, clock, workspace_id, event).await?);
    }
    tx.commit().await?;
    Ok(delivered)
}

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
        InboundEvent::InvitationWithdrawn {
            sender_id,
            profile_url,
            at_ms,
        } => withdrawn(conn, clock, workspace_id, sender_id, profile_url, *at_ms).await,
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
            let conn =
                &mut crate::person_lock::lock(conn, workspace_id, [prospect_id.as_str()]).await?;
            let inbound = Inbound {
                workspace_id,
                sender_id,
                prospect_id: &prospect_id,
                text,
                at_ms: *at_ms,
                provider_message_id,
            };
            match record_inbound(conn, &inbound, clock.now_ms()).await {
                Ok(Some(_)) => {}
                // Already recorded; or the person was deleted meanwhile, and the message has
                // no one to belong to.
                Ok(None) => return Ok(()),
                Err(error) if error.code == ErrorCode::NOT_FOUND => return Ok(()),
                Err(error) => return Err(error),
            }
            replied(
                conn,
                clock,
                workspace_id,
                sender_id,
                &prospect_id,
                text,
                *at_ms,
            )
            .await
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
    let conn = &mut crate::person_lock::lock(conn, workspace_id, [prospect_id.as_str()]).await?;
    crate::prospects::mark_connected(conn, &prospect_id).await?;
    let data = json!({"prospect_id": prospect_id, "sender_id": sender_id});
    events::record(
        conn,
        workspace_id,
        clock.now_ms(),
        EventType::ConnectionAccepted,
        data,
    )
    .await?;
    // The enrollments of this sender that sent their invitation and wait for it.
    let waiting = sqlx::query(
        "select id, sequence_id, step_index, status, condition_until from enrollments where workspace_id = $1 and prospect_id = $2 \
         and sender_id = $3 and invited_at is not null and accepted_at is null \
         and status in ('scheduled', 'active', 'paused')",
    )
    .bind(workspace_id)
    .bind(&prospect_id)
    .bind(sender_id)
    .fetch_all(&mut **conn)
    .await?;
    for row in waiting {
        let id: String = row.try_get("id")?;
        let sequence_id: String = row.try_get("sequence_id")?;
        let step_index: i64 = row.try_get("step_index")?;
        let status: String = row.try_get("status")?;
        let waiting_on_condition = row.try_get::<Option<i64>, _>("condition_until")?.is_some();
        let sequence = crate::sequences::fetch_row(conn, workspace_id, &sequence_id).await?;
        let step = usize::try_from(step_index)
            .ok()
            .and_then(|index| sequence.steps.get(index));
        // A step that waited for the acceptance is due its delay after it. A condition is
        // decided when it comes due (at once, if it is waiting for this), and an InMail goes at
        // its own time: neither moves.
        let next_at = match step.map(|step| step.kind) {
            Some(StepType::Condition | StepType::Inmail) => None,
            _ => Some(at_ms + step.map_or(0, |s| i64::from(s.delay_hours)) * HOUR_MS),
        };
        enrollments::mark_accepted(conn, &id, at_ms, next_at).await?;
        record_event(
            conn,
            workspace_id,
            &id,
            at_ms,
            EnrollmentEventKind::Accepted,
            None,
            None,
            None,
        )
        .await?;
        if waiting_on_condition {
            enrollments::wake_condition(conn, clock, workspace_id, &id, at_ms).await?;
        } else if let Some(next_at) = next_at
            && status != "paused"
        {
            crate::step_jobs::schedule(conn, clock, workspace_id, &id, next_at).await?;
        }
    }
    Ok(())
}

/// The sender's invitation to the person was withdrawn: `invitation.withdrawn` for each of the
/// sender's live enrollments of the person that sent it and wait for its acceptance, or whose
/// invitation is still being sent (an intent not yet settled: the withdrawal can come before the
/// call is recorded), and those enrollments finish as `invitation_withdrawn`. Without such an
/// enrollment, one event without an enrollment, if the person was pending. The person is no longer
/// `pending` unless another sender's invitation may still be.
async fn withdrawn(
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
    let conn = &mut crate::person_lock::lock(conn, workspace_id, [prospect_id.as_str()]).await?;
    let now = clock.now_ms();
    let waiting = sqlx::query(
        "select e.id, e.sequence_id from enrollments e where e.workspace_id = $1 and e.prospect_id = $2 \
         and e.sender_id = $3 and e.accepted_at is null and e.status in ('scheduled', 'active', 'paused') \
         and (e.invited_at is not null or exists (select 1 from outbound_intents i \
              where i.enrollment_id = e.id and i.kind = 'invitation' and i.status in ('pending', 'unanswered'))) \
         order by e.created_at, e.id",
    )
    .bind(workspace_id)
    .bind(&prospect_id)
    .bind(sender_id)
    .fetch_all(&mut **conn)
    .await?;
    // Another sender's invitation may still be pending: one sent and neither accepted nor ended
    // by its own withdrawal or deadline.
    let others_waiting: i64 = sqlx::query_scalar(
        "select count(*) from enrollments where workspace_id = $1 and prospect_id = $2 \
         and sender_id <> $3 and invited_at is not null and accepted_at is null \
         and coalesce(exit_reason, '') not in ('not_accepted', 'invitation_withdrawn')",
    )
    .bind(workspace_id)
    .bind(&prospect_id)
    .bind(sender_id)
    .fetch_one(&mut **conn)
    .await?;
    let others_wait = others_waiting > 0;
    let mut ending = Vec::with_capacity(waiting.len());
    for row in &waiting {
        let id: String = row.try_get("id")?;
        let sequence_id: String = row.try_get("sequence_id")?;
        let data = json!({
            "enrollment_id": id,
            "sequence_id": sequence_id,
            "prospect_id": prospect_id,
            "sender_id": sender_id,
        });
        events::record(
            conn,
            workspace_id,
            now,
            EventType::InvitationWithdrawn,
            data,
        )
        .await?;
        ending.push(id);
    }
    if ending.is_empty() && crate::prospects::is_pending(conn, &prospect_id).await? {
        let data = json!({
            "enrollment_id": null,
            "sequence_id": null,
            "prospect_id": prospect_id,
            "sender_id": sender_id,
        });
        events::record(
            conn,
            workspace_id,
            now,
            EventType::InvitationWithdrawn,
            data,
        )
        .await?;
    }
    if !others_wait {
        crate::prospects::mark_invitation_gone(conn, &prospect_id).await?;
    }
    let reason = enrollments::ExitReason::InvitationWithdrawn.as_str();
    enrollments::finish(conn, clock, workspace_id, &ending, reason, now).await?;
    for id in &ending {
        record_event(
            conn,
            workspace_id,
            id,
            at_ms,
            EnrollmentEventKind::Finished,
            None,
            None,
            Some(reason),
        )
        .await?;
        jobs::cancel_unique(
            conn,
            clock,
            <crate::step_jobs::StepJob as JobArgs>::KIND,
            &crate::step_jobs::step_key(id),
        )
        .await?;
    }
    Ok(())
}

/// A reply from `prospect_id` to `sender_id`: each live enrollment of the person notes its first
/// reply (`enrollment.replied`), and those of sequences that stop on reply finish. An
/// out-of-office notice (as triage reads it) is no answer: it holds each live enrollment until
/// the return day it names, or the sequence's `out_of_office_hold_days`, instead ([`hold`]).
#[allow(clippy::too_many_arguments)]
async fn replied(
    conn: &mut PersonTx<'_>,
    clock: &Clock,
    workspace_id: &str,
    sender_id: &str,
    prospect_id: &str,
    text: &str,
    at_ms: i64,
) -> Result<(), ApiError> {
    let out_of_office =
        crate::reply_reading::classify(text).0 == crate::conversations::Classification::OutOfOffice;
    crate::prospects::note_replied(conn, prospect_id, at_ms).await?;
    let conversation_id: String = sqlx::query_scalar(
        "select id from conversations where workspace_id = $1 and sender_id = $2 and prospect_id = $3",
    )
    .bind(workspace_id)
    .bind(sender_id)
    .bind(prospect_id)
    .fetch_one(&mut **conn)
    .await?;
    let live = sqlx::query(
        "select e.id, e.sequence_id, e.status, e.next_step_at, s.settings from enrollments e \
         join sequences s on s.id = e.sequence_id \
         where e.workspace_id = $1 and e.prospect_id = $2 and e.status in ('scheduled', 'active', 'paused')",
    )
    .bind(workspace_id)
    .bind(prospect_id)
    .fetch_all(&mut **conn)
    .await?;
    let now = clock.now_ms();
    for row in live {
        let id: String = row.try_get("id")?;
        let sequence_id: String = row.try_get("sequence_id")?;
        let settings: crate::sequences::Settings =
            serde_json::from_str(&row.try_get::<String, _>("settings")?)
                .map_err(ApiError::internal)?;
        if out_of_office {
            let held = Held {
                status: row.try_get("status")?,
                next_step_at: row.try_get("next_step_at")?,
                hold_days: settings.out_of_office_hold_days,
            };
            hold(conn, clock, workspace_id, &id, held, text, at_ms).await?;
            continue;
        }
        if enrollments::mark_replied(conn, &id, at_ms).await? {
            let data = json!({
                "enrollment_id": id,
                "sequence_id": sequence_id,
                "prospect_id": prospect_id,
                "conversation_id": conversation_id,
            });
            events::record(conn, workspace_id, now, EventType::EnrollmentReplied, data).await?;
        }
        if !settings.stop_on_reply {
            // A `replied` condition waiting for this is decided now.
            enrollments::wake_condition(conn, clock, workspace_id, &id, at_ms).await?;
            continue;
        }
        enrollments::finish_replied(conn, &id, now).await?;
        record_event(
            conn,
            workspace_id,
            &id,
            at_ms,
            EnrollmentEventKind::Finished,
            None,
            None,
            Some("replied"),
        )
        .await?;
        jobs::cancel_unique(
            &mut *conn,
            clock,
            <crate::step_jobs::StepJob as JobArgs>::KIND,
            &crate::step_jobs::step_key(&id),
        )
        .await?;
        crate::sequences::complete_if_done(conn, &sequence_id, now).await?;
    }
    if !out_of_office {
        enrollments::note_reply_after_last_step(conn, workspace_id, prospect_id, sender_id, at_ms)
            .await?;
    }
    Ok(())
}

/// What [`hold`] needs of a live enrollment.
struct Held {
    status: String,
    next_step_at: Option<i64>,
    hold_days: u32,
}

/// Holds a live enrollment after an out-of-office reply: its next step waits until the day the
/// reply says its writer is back (`reply_reading::return_date`), or `hold_days` after the reply,
/// whichever the text allows; never earlier than it was due. The history says so (`held`).
async fn hold(
    conn: &mut PersonTx<'_>,
    clock: &Clock,
    workspace_id: &str,
    enrollment_id: &str,
    held: Held,
    text: &str,
    at_ms: i64,
) -> Result<(), ApiError> {
    let (until, why) = match crate::reply_reading::return_date(text, at_ms) {
        Some(back) => (
            back,
            format!(
                "Out of office: held until {}, the day the reply names.",
                &outreach_runtime::prelude::rfc3339(back)[..10]
            ),
        ),
        None => (
            at_ms + i64::from(held.hold_days) * 24 * HOUR_MS,
            format!(
                "Out of office: held for {} days (the reply names no return day).",
                held.hold_days
            ),
        ),
    };
    let next_at = held.next_step_at.unwrap_or(at_ms).max(until);
    enrollments::set_wait(conn, enrollment_id, next_at, None).await?;
    record_event(
        conn,
        workspace_id,
        enrollment_id,
        at_ms,
        EnrollmentEventKind::Held,
        None,
        Some(&why),
        Some("out_of_office"),
    )
    .await?;
    if held.status != "paused" {
        crate::step_jobs::schedule(conn, clock, workspace_id, enrollment_id, next_at).await?;
    }
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
        if let Err(error) = deliver_due(&network, job.db(), job.clock(), &workspace_id).await {
            tracing::warn!(workspace_id, ?error, "polling the network failed");
        }
    }
    Ok(JobOutcome::Snooze {
        until_ms: job.now_ms() + POLL_EVERY_MS,
    })
}

outreach_runtime::prelude::job!(<crate::senders::PollJob as JobArgs>::KIND, poll);
