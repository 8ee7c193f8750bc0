//! Replies a person writes in a conversation: queued, then sent by the scheduler like any step.
//!
//! `reply_to_conversation` stores the message `queued` with the time it is due (the sender's next
//! working window) and enqueues a `send_reply` job in the same transaction. The job goes through
//! the same gate as a sequence's steps ([`super::gate`]: working hours, limits, the gap between a
//! sender's actions) and the same intent discipline, so a reply is counted against the sender's
//! `messages_per_day`, never exceeds it, and never goes twice.

use outreach_runtime::prelude::{
    ApiError, Clock, Ctx, ErrorCode, JobArgs, JobCtx, JobError, JobOutcome, JobResult, NewJob,
    action, enqueue,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::{AnyConnection, Row};

use super::intents::{self, IntentStatus, NewIntent};
use super::{Turn, account_refusal, gate};
use crate::conversations::{self, MessageStatus, Outbound as OutboundMessage, settle_outbound};
use crate::network::{Account, NetworkError, NetworkProvider, Outbound, Sent, network_for};
use crate::person_lock::{self, PersonTx};
use crate::senders::{self, QuotaKind, SenderRow, SenderStatus};

/// The longest reply.
pub const MAX_REPLY_CHARS: usize = 8_000;

/// The input of `reply_to_conversation`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReplyInput {
    /// `cnv_...`
    pub id: String,
    #[schemars(length(min = 1, max = 8000), regex(pattern = crate::common::NOT_BLANK))]
    pub text: String,
}

/// Reply in a conversation.
///
/// Answers the message `queued`; it is sent within the sender's hours and limits, then `sent` or
/// `failed` (`list_messages`). A do-not-contact prospect or a disconnected sender is a 409
/// `invalid_state`.
///
/// The message goes from the conversation's sender to the prospect. Returns the message, `queued`
/// with `at` its due time; it becomes `sent`, or `failed` with the network's error
/// (`list_messages`). The limit is the sender's `messages_per_day`. A disconnected sender or a
/// do-not-contact prospect is a 409 `invalid_state`.
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
    // The conversation's person first (see `person_lock`): the reply is written to it.
    let person = conversations::person_of(&mut tx, ctx.workspace_id(), &input.id).await?;
    let mut tx = person_lock::lock(&mut tx, ctx.workspace_id(), [person.as_str()]).await?;
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

outreach_runtime::prelude::example!(reply_to_conversation,
    request: {"id": "cnv_Qm3VbT8rKx2LpN7sYw4D", "text": "Great! Does Tuesday work?"},
    response: {
        "at": "2026-11-25T15:00:00.000Z",
        "conversation_id": "cnv_Qm3VbT8rKx2LpN7sYw4D",
        "created_at": "2026-11-25T14:31:09.412Z",
        "created_by": "psn_H2jK4lM6nP8qR0sT2uV4",
        "direction": "outbound",
        "enrollment_id": null,
        "error": null,
        "id": "msg_B5cD7eF9gH1jK3lM5nP7",
        "status": "queued",
        "text": "Great! Does Tuesday work?"
    }
);

outreach_runtime::prelude::parity!(reply_to_conversation, write,
    ok: {"id": "$conversation", "text": "Thanks, Ada. Does Tuesday suit you?"},
    fails: {"id": "$missing:cnv", "text": "Hello"} => NOT_FOUND
);

/// A reply that may be queued: its conversation's sender can send, the prospect may be contacted.
pub(crate) struct PlannedReply {
    pub sender_id: String,
    pub prospect_id: String,
    /// When it is due: the earliest moment the sender may send a message, by the gate's rules.
    pub due: i64,
}

/// Checks that a reply can go out in a conversation, and when (reads only): a 404 for an
/// unknown conversation, a 409 for a deleted or unconnected sender, a do-not-contact prospect or a
/// sender that can never send a message (no working hours, a message limit of 0).
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
                ErrorCode::INVALID_STATE,
                format!(
                    "The sender account `{}` of this conversation was deleted; nothing can be sent from it.",
                    conversation.sender_id
                ),
            )
        })?;
    if sender.status != SenderStatus::Connected {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
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
            ErrorCode::INVALID_STATE,
            format!(
                "Prospect `{}` is marked do-not-contact; nothing is sent to them.",
                conversation.prospect_id
            ),
        ));
    }
    // When the gate would let a message of this sender through: its hours, a pause, its message
    // limit, the gap after its last call.
    let due =
        senders::earliest_call(conn, &sender, Some(QuotaKind::Message), None, now, now).await?;
    let Some(due) = due else {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "The sender account `{}` cannot send a message as things stand (it has no working hours, or its \
                 `messages_per_day` is 0), so a reply could never go out. Give it working hours or a message limit first.",
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
    conn: &mut PersonTx<'_>,
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
        reply_job(&message_id)
            .workspace(workspace_id)
            .run_at(planned.due),
    )
    .await?;
    Ok(message_id)
}

/// The job that sends a queued reply (one per message: its unique key).
pub(crate) fn reply_job(message_id: &str) -> NewJob {
    NewJob::of(&ReplyJob {
        message_id: message_id.to_owned(),
    })
    .unique_key(format!("message:{message_id}"))
}

/// The job that sends a queued reply: what it carries.
#[derive(Debug, Serialize, Deserialize)]
pub struct ReplyJob {
    pub message_id: String,
}

impl JobArgs for ReplyJob {
    const KIND: &'static str = "send_reply";
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

async fn postpone(conn: &mut PersonTx<'_>, message_id: &str, at: i64) -> Result<(), ApiError> {
    conversations::postpone_queued(conn, message_id, at).await
}

async fn send_reply(job: JobCtx) -> JobResult {
    let payload: ReplyJob = job.args()?;
    let message_id = payload.message_id;
    // Settling an unknown outcome ends the run, or leaves the intent `unsent`; the reply then goes
    // through the gate like a new one (so this loops at most twice).
    loop {
        let now = job.now_ms();
        let mut guard = job.tx().await?;
        // The reply's person first (see `person_lock`), then the reply read again under it.
        let who = load_reply(&mut guard, &message_id).await?;
        let (workspace_id, prospect_id) = who
            .map(|reply| (reply.workspace_id, reply.prospect_id))
            .unwrap_or_default();
        let mut tx = person_lock::lock(&mut guard, &workspace_id, [prospect_id.as_str()]).await?;
        let Some(reply) = load_reply(&mut tx, &message_id).await? else {
            // Deleted with its prospect: a call it left under way must stop holding its sender.
            let abandoned =
                intents::abandon(&mut tx, intents::Subject::Message(&message_id), now).await?;
            for sender_id in abandoned {
                senders::note_call(&mut tx, &sender_id, now).await?;
            }
            return Ok(JobOutcome::Done);
        };
        let earlier = intents::of_message(&mut tx, &message_id).await?;
        let unsent = match earlier {
            // A call whose outcome is unknown: ask the network before anything else.
            Some(intent) if intent.status.outcome_unknown() => {
                drop(tx);
                drop(guard);
                if let Some(outcome) = settle_unknown(&job, &message_id, &reply, intent).await? {
                    return Ok(outcome);
                }
                continue;
            }
            Some(intent) if intent.status == IntentStatus::Unsent => Some(intent.id),
            Some(_) => return Ok(JobOutcome::Done),
            None => None,
        };
        if reply.status != MessageStatus::Queued.as_str() {
            return Ok(JobOutcome::Done);
        }
        let Some((profile_url, sender)) = recipient(&mut tx, &message_id, &reply, now).await?
        else {
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
        let intent_id = arm(&mut tx, &message_id, &reply, unsent, &usage_id, now).await?;
        drop(tx);
        drop(guard);
        // The intent and its quota unit are durable before the network hears of it.
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
        let result = network.send_message(to, &reply.text).await;
        if let Err(NetworkError::Transient(cause)) = &result {
            // The call is over, its outcome unknown: the sender is free again, and the retry
            // asks the network before the reply goes again.
            let mut tx = job.tx().await?;
            intents::mark_unanswered(&mut tx, &intent_id).await?;
            senders::note_call(&mut tx, &reply.sender_id, job.now_ms()).await?;
            drop(tx);
            job.commit().await?;
            return Err(JobError::retry(format!("the network failed: {cause}")));
        }
        let mut guard = job.tx().await?;
        let mut tx = person_lock::lock(
            &mut guard,
            &reply.workspace_id,
            [reply.prospect_id.as_str()],
        )
        .await?;
        return record_reply(
            &mut tx,
            &job,
            &message_id,
            &reply,
            (&intent_id, Some(&usage_id)),
            result,
        )
        .await
        .map_err(JobError::from);
    }
}

/// Whom a queued reply goes to, checked again now: the prospect's profile URL and the sender.
/// `None` when it cannot go out any more (no profile URL, the prospect marked do-not-contact
/// since, the sender deleted): the message is settled as failed, with the reason.
async fn recipient(
    tx: &mut PersonTx<'_>,
    message_id: &str,
    reply: &QueuedReply,
    now: i64,
) -> Result<Option<(String, SenderRow)>, ApiError> {
    let prospect = sqlx::query("select profile_url, do_not_contact from prospects where id = $1")
        .bind(&reply.prospect_id)
        .fetch_one(&mut **tx)
        .await?;
    let profile_url: Option<String> = prospect.try_get("profile_url")?;
    let do_not_contact = prospect.try_get::<i64, _>("do_not_contact")? != 0;
    let Some(profile_url) = profile_url else {
        settle_outbound(tx, message_id, Err("the prospect has no profile URL"), now).await?;
        return Ok(None);
    };
    // Marked do-not-contact since the reply was queued (an unsubscribe read meanwhile):
    // nothing goes out. (A reply already handed to the network was settled above.)
    if do_not_contact {
        settle_outbound(
            tx,
            message_id,
            Err("the prospect was marked do-not-contact before it went out"),
            now,
        )
        .await?;
        return Ok(None);
    }
    let Ok(sender) = senders::load(tx, &reply.workspace_id, &reply.sender_id).await else {
        settle_outbound(tx, message_id, Err("the sender account was deleted"), now).await?;
        return Ok(None);
    };
    Ok(Some((profile_url, sender)))
}

/// The intent a reply's call goes under: its `unsent` one again with the unit the gate took now
/// (the network had no record of the earlier call), or a new one.
async fn arm(
    tx: &mut AnyConnection,
    message_id: &str,
    reply: &QueuedReply,
    unsent: Option<String>,
    usage_id: &str,
    now: i64,
) -> Result<String, ApiError> {
    Ok(match unsent {
        Some(intent_id) => {
            intents::rearm(tx, &intent_id, usage_id).await?;
            intent_id
        }
        None => {
            intents::insert(
                tx,
                &NewIntent {
                    workspace_id: &reply.workspace_id,
                    sender_id: &reply.sender_id,
                    prospect_id: &reply.prospect_id,
                    kind: "message",
                    enrollment_id: None,
                    step_index: None,
                    message_id: Some(message_id),
                    text: Some(&reply.text),
                    variant: None,
                    usage_id: Some(usage_id),
                },
                now,
            )
            .await?
        }
    })
}

/// Asks the network what came of a reply's earlier call and records it; `None` when the network
/// has no record (the unit goes back, the intent becomes `unsent`, and the reply goes through the
/// gate again).
async fn settle_unknown(
    job: &JobCtx,
    message_id: &str,
    reply: &QueuedReply,
    intent: intents::Intent,
) -> Result<Option<JobOutcome>, JobError> {
    job.commit().await?;
    let network = network_for(job.config(), job.db(), job.clock())?;
    let account = Account {
        workspace_id: &reply.workspace_id,
        sender_id: &intent.sender_id,
    };
    let found = network
        .find_outbound(account, &intent.id)
        .await
        .map_err(|error| JobError::retry(format!("asking the network: {error:?}")))?;
    let mut guard = job.tx().await?;
    let mut tx = person_lock::lock(
        &mut guard,
        &reply.workspace_id,
        [reply.prospect_id.as_str()],
    )
    .await?;
    match found {
        Some(record) => record_reply(
            &mut tx,
            job,
            message_id,
            reply,
            (&intent.id, intent.usage_id.as_deref()),
            super::outcome_of(record),
        )
        .await
        .map(Some)
        .map_err(JobError::from),
        None => {
            if let Some(usage_id) = &intent.usage_id {
                senders::release_quota(&mut tx, usage_id).await?;
            }
            intents::mark_unsent(&mut tx, &intent.id).await?;
            drop(tx);
            drop(guard);
            job.commit().await?;
            Ok(None)
        }
    }
}

/// What came of a reply's call, in the job's transaction; the sender's row last (its gap counts
/// from now, whatever came of the call).
async fn record_reply(
    tx: &mut PersonTx<'_>,
    job: &JobCtx,
    message_id: &str,
    reply: &QueuedReply,
    (intent_id, usage_id): (&str, Option<&str>),
    result: Result<Sent, NetworkError>,
) -> Result<JobOutcome, ApiError> {
    let now = job.now_ms();
    let outcome = match result {
        Ok(sent) => {
            intents::complete(tx, intent_id, IntentStatus::Sent, "sent", now).await?;
            settle_outbound(tx, message_id, Ok(sent.at_ms), now).await?;
            crate::prospects::note_contacted(tx, &reply.prospect_id, sent.at_ms).await?;
            if let Some(usage_id) = usage_id {
                let sender = senders::load_locked(tx, &reply.sender_id).await?;
                senders::restamp_quota(tx, &sender, usage_id, sent.at_ms).await?;
            }
            JobOutcome::Done
        }
        Err(error) => {
            if let Some(usage_id) = usage_id {
                senders::release_quota(tx, usage_id).await?;
            }
            if let Some(until) = account_refusal(tx, &reply.sender_id, &error, now).await? {
                intents::forget(tx, intent_id).await?;
                postpone(tx, message_id, until).await?;
                JobOutcome::Snooze { until_ms: until }
            } else {
                let code = error.code();
                intents::complete(tx, intent_id, IntentStatus::Failed, code.as_str(), now).await?;
                let api: ApiError = error.into();
                settle_outbound(tx, message_id, Err(&api.message), now).await?;
                JobOutcome::Done
            }
        }
    };
    senders::note_call(tx, &reply.sender_id, now).await?;
    Ok(outcome)
}

outreach_runtime::prelude::job!(ReplyJob::KIND, send_reply);
