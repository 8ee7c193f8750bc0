//! Replies a person writes in a conversation: queued, then sent by the scheduler like any step.
//!
//! `reply_to_conversation` stores the message `queued` with the time it is due (the sender's next
//! working window) and enqueues a `send_reply` job in the same transaction. The job goes through
//! the same gate as a sequence's steps ([`super::gate`]: working hours, limits, the gap between a
//! sender's actions) and the same intent discipline, so a reply is counted against the sender's
//! `messages_per_day`, never exceeds it, and never goes twice.

use outreach_runtime::prelude::{
    ApiError, Clock, Ctx, ErrorCode, JobCtx, JobError, JobOutcome, JobResult, NewJob, action,
    enqueue,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::{AnyConnection, Row};

use super::intents::{self, IntentStatus, NewIntent};
use super::{Turn, account_refusal, gate, next_window};
use crate::conversations::{self, MessageStatus, Outbound as OutboundMessage, settle_outbound};
use crate::network::{Account, NetworkError, NetworkProvider, Outbound, network_for};
use crate::senders::{self, QuotaKind, SenderStatus};

/// The job kind that sends a queued reply.
pub const REPLY_JOB: &str = "send_reply";
/// The longest reply.
pub const MAX_REPLY_CHARS: usize = 8_000;

/// The input of `reply_to_conversation`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReplyInput {
    /// The conversation's id (`cnv_...`).
    pub id: String,
    /// What to send: 1 to 8,000 characters.
    pub text: String,
}

/// Reply in a conversation.
///
/// Queues a message from the conversation's sender account to the prospect, sent by the scheduler
/// inside the sender's working hours and limits (it counts against `messages_per_day`). Returns
/// the message: `queued` with `at` the time it is due, then `sent` (or `failed` with the network's
/// error) once it went; read it again with `list_messages`. This reaches a real person: check the
/// conversation first. A disconnected sender, or a prospect marked do-not-contact, is a 409
/// `invalid_state`. Send an `Idempotency-Key` to retry safely: the same key never queues a second
/// message. Costs nothing.
#[action(scope = "send", idempotent, http = "POST /conversations/{id}/messages")]
pub async fn reply_to_conversation(
    ctx: Ctx,
    input: ReplyInput,
) -> Result<conversations::Message, ApiError> {
    let text = input.text.trim();
    if text.is_empty() || text.chars().count() > MAX_REPLY_CHARS {
        return Err(ApiError::invalid_request(format!(
            "`text` must be 1 to {MAX_REPLY_CHARS} characters; got {}.",
            text.chars().count()
        )));
    }
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let planned = plan_reply(&mut tx, ctx.workspace_id(), &input.id, now).await?;
    let message_id = queue_reply(
        &mut tx,
        ctx.clock(),
        ctx.workspace_id(),
        &planned,
        text,
        Some(&ctx.principal().person_id),
        now,
    )
    .await?;
    conversations::fetch_message(&mut tx, ctx.workspace_id(), &message_id).await
}

/// A reply that may be queued: its conversation's sender can send, the prospect may be contacted.
pub(crate) struct PlannedReply {
    pub sender_id: String,
    pub prospect_id: String,
    /// When it is due: the start of the sender's next working window.
    pub due: i64,
}

/// Checks that a reply can go out in a conversation, and when (reads only): a 404 for an
/// unknown conversation, a 409 for a deleted or unconnected sender, a do-not-contact prospect or a
/// sender without working hours.
pub(crate) async fn plan_reply(
    conn: &mut AnyConnection,
    workspace_id: &str,
    conversation_id: &str,
    now: i64,
) -> Result<PlannedReply, ApiError> {
    let conversation = conversations::fetch(conn, workspace_id, conversation_id).await?;
    let sender = senders::load(conn, workspace_id, &conversation.sender_id)
        .await
        .map_err(|_| {
            ApiError::new(
                ErrorCode::InvalidState,
                format!(
                    "The sender account `{}` of this conversation was deleted; nothing can be sent from it.",
                    conversation.sender_id
                ),
            )
        })?;
    if sender.status != SenderStatus::Connected {
        return Err(ApiError::new(
            ErrorCode::InvalidState,
            format!(
                "The sender account `{}` is `{}`; replies go out only from a `connected` account. Reconnect it first.",
                sender.id,
                sender.status.as_str()
            ),
        )
        .with_extra("sender_status", sender.status.as_str()));
    }
    let do_not_contact: i64 = sqlx::query("select do_not_contact from prospects where id = $1")
        .bind(&conversation.prospect_id)
        .fetch_one(&mut *conn)
        .await?
        .try_get("do_not_contact")?;
    if do_not_contact != 0 {
        return Err(ApiError::new(
            ErrorCode::InvalidState,
            format!(
                "Prospect `{}` is marked do-not-contact; nothing is sent to them.",
                conversation.prospect_id
            ),
        ));
    }
    let Some(due) = next_window(&sender, None, now) else {
        return Err(ApiError::new(
            ErrorCode::InvalidState,
            format!(
                "The sender account `{}` has no working hours, so a reply could never go out. Give it working hours first.",
                sender.id
            ),
        ));
    };
    Ok(PlannedReply {
        sender_id: sender.id,
        prospect_id: conversation.prospect_id,
        due,
    })
}

/// Queues a planned reply in the caller's transaction with the job that sends it; the message id.
pub(crate) async fn queue_reply(
    conn: &mut AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    planned: &PlannedReply,
    text: &str,
    created_by: Option<&str>,
    now: i64,
) -> Result<String, ApiError> {
    let message_id = conversations::record_outbound(
        conn,
        &OutboundMessage {
            workspace_id,
            sender_id: &planned.sender_id,
            prospect_id: &planned.prospect_id,
            sequence_id: None,
            enrollment_id: None,
            step_index: None,
            created_by,
            text,
            status: MessageStatus::Queued,
            at_ms: planned.due,
        },
        now,
    )
    .await?;
    enqueue(
        conn,
        clock,
        NewJob::new(REPLY_JOB, serde_json::json!({"message_id": message_id}))
            .workspace(workspace_id)
            .run_at(planned.due)
            .unique_key(format!("message:{message_id}")),
    )
    .await?;
    Ok(message_id)
}

#[derive(Debug, Serialize, Deserialize)]
struct ReplyPayload {
    message_id: String,
}

/// A queued reply as the job needs it.
struct QueuedReply {
    workspace_id: String,
    sender_id: String,
    prospect_id: String,
    text: String,
    status: String,
}

async fn load_reply(
    conn: &mut AnyConnection,
    message_id: &str,
) -> Result<Option<QueuedReply>, ApiError> {
    let row = sqlx::query(
        "select m.workspace_id, c.sender_id, c.prospect_id, m.text, m.status from messages m \
         join conversations c on c.id = m.conversation_id where m.id = $1",
    )
    .bind(message_id)
    .fetch_optional(conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    Ok(Some(QueuedReply {
        workspace_id: row.try_get("workspace_id")?,
        sender_id: row.try_get("sender_id")?,
        prospect_id: row.try_get("prospect_id")?,
        text: row.try_get("text")?,
        status: row.try_get("status")?,
    }))
}

async fn postpone(conn: &mut AnyConnection, message_id: &str, at: i64) -> Result<(), ApiError> {
    sqlx::query("update messages set at = $2 where id = $1 and status = 'queued'")
        .bind(message_id)
        .bind(at)
        .execute(conn)
        .await?;
    Ok(())
}

async fn send_reply(job: JobCtx) -> JobResult {
    let payload: ReplyPayload = job.payload_as()?;
    let message_id = payload.message_id;
    let now = job.now_ms();
    let (reply, profile_url, intent_id, reconcile) = {
        let mut tx = job.tx().await?;
        let Some(reply) = load_reply(&mut tx, &message_id).await? else {
            return Ok(JobOutcome::Done);
        };
        if reply.status != MessageStatus::Queued.as_str() {
            return Ok(JobOutcome::Done);
        }
        let prospect =
            sqlx::query("select profile_url, do_not_contact from prospects where id = $1")
                .bind(&reply.prospect_id)
                .fetch_one(&mut *tx)
                .await?;
        let profile_url: Option<String> = prospect.try_get("profile_url")?;
        let do_not_contact = prospect.try_get::<i64, _>("do_not_contact")? != 0;
        let Some(profile_url) = profile_url else {
            settle_outbound(&mut tx, &message_id, Err("the prospect has no profile URL")).await?;
            return Ok(JobOutcome::Done);
        };
        if let Some(intent) = intents::of_message(&mut tx, &message_id).await? {
            if intent.status != IntentStatus::Pending {
                return Ok(JobOutcome::Done);
            }
            (reply, profile_url, intent.id, true)
        } else {
            // Marked do-not-contact since the reply was queued (an unsubscribe read meanwhile):
            // nothing goes out. (A reply already handed to the network is reconciled above.)
            if do_not_contact {
                settle_outbound(
                    &mut tx,
                    &message_id,
                    Err("the prospect was marked do-not-contact before it went out"),
                )
                .await?;
                return Ok(JobOutcome::Done);
            }
            let Ok(sender) = senders::load(&mut tx, &reply.workspace_id, &reply.sender_id).await
            else {
                settle_outbound(&mut tx, &message_id, Err("the sender account was deleted"))
                    .await?;
                return Ok(JobOutcome::Done);
            };
            let usage_id = match gate(
                &mut tx,
                job.clock(),
                None,
                &sender,
                None,
                QuotaKind::Message,
                Turn::First,
                now,
            )
            .await?
            {
                Ok(usage_id) => usage_id,
                Err(wait) => {
                    postpone(&mut tx, &message_id, wait.until).await?;
                    return Ok(JobOutcome::Snooze {
                        until_ms: wait.until,
                    });
                }
            };
            let intent_id = intents::insert(
                &mut tx,
                &NewIntent {
                    workspace_id: &reply.workspace_id,
                    sender_id: &reply.sender_id,
                    prospect_id: &reply.prospect_id,
                    kind: "message",
                    enrollment_id: None,
                    step_index: None,
                    message_id: Some(&message_id),
                    text: Some(&reply.text),
                    usage_id: Some(&usage_id),
                },
                now,
            )
            .await?;
            (reply, profile_url, intent_id, false)
        }
    };
    job.commit().await?;

    let network = network_for(job.config(), job.db(), job.clock())?;
    let to = Outbound {
        account: Account {
            workspace_id: &reply.workspace_id,
            sender_id: &reply.sender_id,
        },
        profile_url: &profile_url,
        prospect_id: Some(&reply.prospect_id),
        intent: &intent_id,
    };
    let earlier = if reconcile {
        network
            .find_outbound(to.account, &intent_id)
            .await
            .map_err(|error| JobError::retry(format!("asking the network: {error:?}")))?
    } else {
        None
    };
    let result = match earlier {
        Some(record) => super::outcome_of(record),
        None => network.send_message(to, &reply.text).await,
    };
    if let Err(NetworkError::Transient(cause)) = &result {
        return Err(JobError::retry(format!("the network failed: {cause}")));
    }
    let mut tx = job.tx().await?;
    let usage_id: Option<String> =
        sqlx::query("select usage_id from outbound_intents where id = $1")
            .bind(&intent_id)
            .fetch_one(&mut *tx)
            .await?
            .try_get("usage_id")?;
    match result {
        Ok(sent) => {
            intents::complete(&mut tx, &intent_id, IntentStatus::Sent, "sent", now).await?;
            settle_outbound(&mut tx, &message_id, Ok(sent.at_ms)).await?;
            sqlx::query("update prospects set last_contacted_at = $2 where id = $1")
                .bind(&reply.prospect_id)
                .bind(sent.at_ms)
                .execute(&mut *tx)
                .await?;
            Ok(JobOutcome::Done)
        }
        Err(error) => {
            if let Some(usage_id) = &usage_id {
                senders::release_quota(&mut tx, usage_id).await?;
            }
            if let Some(until) = account_refusal(&mut tx, &reply.sender_id, &error, now).await? {
                intents::forget(&mut tx, &intent_id).await?;
                postpone(&mut tx, &message_id, until).await?;
                return Ok(JobOutcome::Snooze { until_ms: until });
            }
            let code = error.code();
            intents::complete(
                &mut tx,
                &intent_id,
                IntentStatus::Failed,
                code.as_str(),
                now,
            )
            .await?;
            let api: ApiError = error.into();
            settle_outbound(&mut tx, &message_id, Err(&api.message)).await?;
            Ok(JobOutcome::Done)
        }
    }
}

outreach_runtime::prelude::job!("send_reply", send_reply);
