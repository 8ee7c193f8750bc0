//! Unipile's side of inbound delivery: the routes it calls back, and the poller per sender.
//!
//! - `POST /api/v1/network/webhooks/unipile` takes Unipile's webhooks. The secret header
//!   (`Unipile-Auth`, compared in constant time) is all that proves where a call came from: a
//!   call without it, or with a wrong one, is 401 and nothing is stored. A body is stored raw
//!   (`network::unipile::inbox`), answered 200 at once (Unipile gives up after 30 s), and applied
//!   right after through the same `ingest` the sandbox uses; a body that is not JSON is kept for
//!   inspection and answered 400. An account no sender is bound to is answered 200 and logged.
//! - `POST /api/v1/network/unipile/notify?token=...` is where a hosted sign-in ends
//!   (`network::unipile::connect`).
//! - The `unipile_sync` job, one per bound sender, asks Unipile what webhooks may have missed:
//!   the pending invitations and the relations every few hours (an invitation gone from the
//!   pending list and present among the relations was accepted; gone and absent, withdrawn or
//!   declined), and the chats' messages since its watermark, every few minutes while one of the
//!   sender's conversations is live. What it finds is stored like a webhook, under the same keys,
//!   so a dropped webhook costs latency, never an event, and one heard both ways counts once.

use outreach_runtime::prelude::{
    ApiError, CallbackCtx, CallbackReply, CallbackRequest, Clock, Db, JobArgs, JobCtx, JobError,
    JobOutcome, JobResult, NewJob, jobs,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sqlx::{AnyConnection, Row};
use subtle::ConstantTimeEq as _;

use super::inbound::deliver_due;
use crate::network::unipile::connect::{self, Refusal};
use crate::network::unipile::inbox::{self, INVITATION_GONE, Source, Stored};
use crate::network::unipile::{Unipile, WEBHOOK_SECRET_HEADER, public_id, truthy};
use crate::network::{
    Account, ConnectionState, Network, NetworkError, NetworkProvider, network_for,
};
use crate::provider::{self, Provider};

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 60 * MINUTE_MS;
const DAY_MS: i64 = 24 * HOUR_MS;

/// How often a sender's pending invitations and relations are read.
pub const RELATIONS_EVERY_MS: i64 = 3 * HOUR_MS;
/// How often a sender's chats are read while one of its conversations is live.
pub const LIVE_MESSAGES_EVERY_MS: i64 = 5 * MINUTE_MS;
/// How long after its last message sent a sender's conversations count as live (they are live
/// too while an enrollment of it was accepted and has messages to come).
const LIVE_FOR_MS: i64 = 14 * DAY_MS;
/// How far back a sender's first read of its chats goes.
const FIRST_LOOK_BACK_MS: i64 = DAY_MS;
/// How old a pending invitation must be before the poller reads its fate.
const SETTLE_AFTER_MS: i64 = 10 * MINUTE_MS;
/// How soon the poller looks again after Unipile failed.
const AFTER_FAILURE_MS: i64 = 10 * MINUTE_MS;

async fn webhook(ctx: CallbackCtx, request: CallbackRequest) -> CallbackReply {
    let settings = provider::settings(&ctx.config);
    let (Ok(Provider::Unipile), Some(unipile)) =
        (provider::configured(&ctx.config), settings.unipile.as_ref())
    else {
        return CallbackReply::error(
            404,
            "not_found",
            "Unipile is not configured on this server.",
        );
    };
    let sent = request
        .headers
        .get(WEBHOOK_SECRET_HEADER)
        .map(|value| value.as_bytes())
        .unwrap_or_default();
    if !bool::from(sent.ct_eq(unipile.webhook_secret.as_bytes())) {
        return CallbackReply::error(
            401,
            "unauthorized",
            format!("The `{WEBHOOK_SECRET_HEADER}` header is missing or wrong."),
        );
    }
    let raw = String::from_utf8_lossy(&request.body).into_owned();
    let now = ctx.clock.now_ms();
    let stored = match store(&ctx.db, Source::Webhook, &raw, now).await {
        Ok(stored) => stored,
        Err(error) => {
            tracing::error!(?error, "storing a Unipile webhook failed");
            // Not 200: Unipile tries again.
            return CallbackReply::error(
                503,
                "unavailable",
                "The webhook could not be stored; send it again.",
            );
        }
    };
    match stored {
        Stored::Invalid => CallbackReply::error(400, "invalid_request", "The body is not JSON."),
        Stored::Due { workspace_id } => {
            // Applied after the answer; a failure here leaves the row for the next poll.
            tokio::spawn(async move {
                if let Err(error) = apply_now(&ctx, &workspace_id).await {
                    tracing::warn!(
                        workspace_id,
                        ?error,
                        "applying a Unipile webhook failed; the poll will"
                    );
                }
            });
            CallbackReply::ok(json!({"received": true}))
        }
        Stored::Duplicate => CallbackReply::ok(json!({"received": true, "duplicate": true})),
        Stored::Ignored(why) => {
            tracing::info!(why, "a Unipile webhook changes nothing");
            CallbackReply::ok(json!({"received": true, "ignored": why}))
        }
    }
}

outreach_runtime::prelude::callback!("/api/v1/network/webhooks/unipile", webhook);

async fn apply_now(ctx: &CallbackCtx, workspace_id: &str) -> Result<u64, ApiError> {
    let network = network_for(&ctx.config, &ctx.db, &ctx.clock)?;
    deliver_due(&network, &ctx.db, &ctx.clock, workspace_id).await
}

async fn store(db: &Db, source: Source, raw: &str, now: i64) -> Result<Stored, ApiError> {
    let mut tx = db.begin_write().await?;
    let stored = inbox::store(&mut tx, source, raw, now).await?;
    tx.commit().await?;
    Ok(stored)
}

async fn notify(ctx: CallbackCtx, request: CallbackRequest) -> CallbackReply {
    let token = url::form_urlencoded::parse(request.query.as_bytes())
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default();
    let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
        return CallbackReply::error(400, "invalid_request", "The body is not JSON.");
    };
    let now = ctx.clock.now_ms();
    let result = async {
        let mut tx = ctx.db.begin_write().await?;
        let bound = connect::bind_account(&mut tx, &token, &body, now).await?;
        if let Ok(sender_id) = &bound {
            enqueue_sync(&mut tx, &ctx.clock, sender_id, now).await?;
        }
        tx.commit().await?;
        Ok::<_, ApiError>(bound)
    }
    .await;
    match result {
        Ok(Ok(sender_id)) => {
            CallbackReply::ok(json!({"sender_id": sender_id, "status": "connected"}))
        }
        Ok(Err(Refusal::UnknownLink)) => {
            CallbackReply::error(401, "unauthorized", "This link's token is unknown.")
        }
        Ok(Err(Refusal::Spent)) => CallbackReply::error(
            410,
            "link_spent",
            "This link was used already, or expired; ask `connect_sender` for a new one.",
        ),
        Ok(Err(Refusal::Invalid(why))) => CallbackReply::error(400, "invalid_request", why),
        Err(error) => {
            tracing::error!(?error, "binding a Unipile account failed");
            CallbackReply::error(
                503,
                "unavailable",
                "The account could not be bound; try again.",
            )
        }
    }
}

outreach_runtime::prelude::callback!("/api/v1/network/unipile/notify", notify);

/// The poller of one sender.
#[derive(Debug, Serialize, Deserialize)]
pub struct SyncJob {
    pub sender_id: String,
}

impl JobArgs for SyncJob {
    const KIND: &'static str = "unipile_sync";
}

fn sync_job(sender_id: &str) -> NewJob {
    NewJob::of(&SyncJob {
        sender_id: sender_id.to_owned(),
    })
    .unique_key(format!("unipile_sync:{sender_id}"))
}

/// Makes sure the sender's poller exists, and runs it now (a new sign-in, a recovery).
pub async fn enqueue_sync(
    conn: &mut AnyConnection,
    clock: &Clock,
    sender_id: &str,
    now: i64,
) -> Result<(), ApiError> {
    jobs::enqueue_if_absent(conn, clock, sync_job(sender_id).run_at(now)).await?;
    Ok(())
}

/// What the poller reads of its sender.
struct Bound {
    workspace_id: String,
    account_id: String,
    messages_after: Option<i64>,
    relations_checked_at: Option<i64>,
    live: bool,
}

async fn bound(
    conn: &mut AnyConnection,
    sender_id: &str,
    now: i64,
) -> Result<Option<Bound>, ApiError> {
    let row = sqlx::query(
        "select s.workspace_id, s.provider_account_id, y.messages_after, y.relations_checked_at, \
         (exists (select 1 from outbound_intents i where i.sender_id = s.id and i.kind in ('message', 'inmail') and i.created_at > $2) \
          or exists (select 1 from enrollments e where e.sender_id = s.id and e.accepted_at is not null \
                     and e.status in ('scheduled', 'active', 'paused'))) as live \
         from senders s left join unipile_sync y on y.sender_id = s.id \
         where s.id = $1 and s.deleted_at is null",
    )
    .bind(sender_id)
    .bind(now - LIVE_FOR_MS)
    .fetch_optional(conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let Some(account_id) = row.try_get::<Option<String>, _>("provider_account_id")? else {
        return Ok(None);
    };
    let live: bool = match row.try_get::<bool, _>("live") {
        Ok(live) => live,
        Err(_) => row.try_get::<i64, _>("live")? != 0,
    };
    Ok(Some(Bound {
        workspace_id: row.try_get("workspace_id")?,
        account_id,
        messages_after: row.try_get("messages_after")?,
        relations_checked_at: row.try_get("relations_checked_at")?,
        live,
    }))
}

async fn run_sync(job: JobCtx) -> JobResult {
    let SyncJob { sender_id } = job.args()?;
    let now = job.now_ms();
    let found = {
        let mut conn = job.db().pool().acquire().await.map_err(ApiError::from)?;
        bound(&mut conn, &sender_id, now).await?
    };
    // Deleted, or not bound (any more): a new sign-in enqueues it again.
    let Some(sender) = found else {
        return Ok(JobOutcome::Done);
    };
    let network = network_for(job.config(), job.db(), job.clock())?;
    let Network::Unipile(unipile) = &network else {
        return Ok(JobOutcome::Done);
    };
    let relations_due = sender
        .relations_checked_at
        .is_none_or(|at| now - at >= RELATIONS_EVERY_MS);
    let messages_due = sender
        .messages_after
        .is_none_or(|_| relations_due || sender.live);
    let polled = poll_sender(
        unipile,
        &job,
        &sender_id,
        &sender,
        relations_due,
        messages_due,
    )
    .await;
    match polled {
        Ok(()) => {}
        Err(NetworkError::Transient(cause)) => {
            tracing::warn!(sender_id, cause, "polling Unipile failed");
            return Ok(JobOutcome::Snooze {
                until_ms: now + AFTER_FAILURE_MS,
            });
        }
        Err(error) => {
            tracing::info!(sender_id, ?error, "Unipile refused the poll");
            return Ok(JobOutcome::Snooze {
                until_ms: now + HOUR_MS,
            });
        }
    }
    deliver_due(&network, job.db(), job.clock(), &sender.workspace_id)
        .await
        .map_err(JobError::from)?;
    // What this round learnt (an acceptance) can make a conversation live.
    let live_now = {
        let mut conn = job.db().pool().acquire().await.map_err(ApiError::from)?;
        bound(&mut conn, &sender_id, now)
            .await?
            .is_some_and(|s| s.live)
    };
    let every = if live_now {
        LIVE_MESSAGES_EVERY_MS
    } else {
        RELATIONS_EVERY_MS
    };
    Ok(JobOutcome::Snooze {
        until_ms: now + every,
    })
}

outreach_runtime::prelude::job!(<SyncJob as JobArgs>::KIND, run_sync);

/// One round of the poller: what Unipile shows, stored as webhooks would be.
async fn poll_sender(
    unipile: &Unipile,
    job: &JobCtx,
    sender_id: &str,
    sender: &Bound,
    relations_due: bool,
    messages_due: bool,
) -> Result<(), NetworkError> {
    let now = job.now_ms();
    let mut found: Vec<Value> = Vec::new();
    if relations_due {
        found.extend(invitations_settled(unipile, job.db(), sender_id, sender, now).await?);
    }
    let mut watermark = sender.messages_after;
    if messages_due {
        let after = sender.messages_after.unwrap_or(now - FIRST_LOOK_BACK_MS);
        for (chat, message) in unipile
            .messages_after(&sender.account_id, sender_id, after)
            .await?
        {
            let at = crate::network::unipile::timestamp_ms(&message).unwrap_or(after);
            watermark = Some(watermark.map_or(at, |w| w.max(at)));
            if message.get("is_sender").is_some_and(truthy) {
                continue;
            }
            let from = message
                .get("sender_id")
                .and_then(Value::as_str)
                .or_else(|| chat.get("attendee_provider_id").and_then(Value::as_str));
            // Someone this sender never reached (they wrote first): their profile names them.
            let known = match from {
                Some(from) => unipile.profile_url_of(sender_id, from).await?.is_some(),
                None => false,
            };
            let public = match from {
                Some(from) if !known => {
                    unipile
                        .public_identifier_of(&sender.account_id, sender_id, from)
                        .await?
                }
                _ => None,
            };
            found.push(json!({
                "event": "message_received",
                "account_id": sender.account_id,
                "chat_id": chat.get("id"),
                "message_id": message.get("id"),
                "message": message.get("text"),
                "timestamp": message.get("timestamp"),
                "sender": {"attendee_provider_id": from, "attendee_public_identifier": public},
            }));
        }
        if watermark.is_none() {
            watermark = Some(after);
        }
    }
    let mut tx = job
        .tx()
        .await
        .map_err(|error| NetworkError::Transient(error.to_string()))?;
    for body in &found {
        inbox::store(&mut tx, Source::Poll, &body.to_string(), now).await?;
    }
    crate::network::unipile::save_sync_place(
        &mut tx,
        sender_id,
        watermark,
        if relations_due {
            Some(now)
        } else {
            sender.relations_checked_at
        },
        now,
    )
    .await?;
    drop(tx);
    job.commit()
        .await
        .map_err(|error| NetworkError::Transient(error.to_string()))?;
    Ok(())
}

/// The sender's invitations the adapter knows as pending that left Unipile's pending list: a
/// `new_relation` body for each one now a relation (among the newest relations, or by a profile
/// read), an `invitation_gone` one for each that is not. An invitation younger than
/// [`SETTLE_AFTER_MS`] is left for the next round (Unipile's lists can lag its own answers).
async fn invitations_settled(
    unipile: &Unipile,
    db: &Db,
    sender_id: &str,
    sender: &Bound,
    now: i64,
) -> Result<Vec<Value>, NetworkError> {
    let waiting = sqlx::query(
        "select profile_url, provider_id, invitation_id from unipile_people \
         where sender_id = $1 and invitation_id is not null and invited_at <= $2",
    )
    .bind(sender_id)
    .bind(now - SETTLE_AFTER_MS)
    .fetch_all(db.pool())
    .await?;
    if waiting.is_empty() {
        return Ok(Vec::new());
    }
    let pending = unipile
        .pending_invitation_ids(&sender.account_id, sender_id)
        .await?;
    let relations = unipile.relation_ids(&sender.account_id, sender_id).await?;
    let account = Account {
        workspace_id: &sender.workspace_id,
        sender_id,
    };
    let mut found = Vec::new();
    for row in waiting {
        let profile_url: String = row.try_get("profile_url")?;
        let provider_id: String = row.try_get("provider_id")?;
        let invitation_id: String = row.try_get("invitation_id")?;
        let public = public_id(&profile_url)?;
        if pending.contains(&provider_id) || pending.contains(&public.to_lowercase()) {
            continue;
        }
        let related =
            relations.contains(&provider_id) || relations.contains(&public.to_lowercase());
        let event = if related {
            "new_relation"
        } else {
            // Gone from pending and not among the newest relations: the profile says which.
            match unipile.connection_state(account, &profile_url).await? {
                ConnectionState::Connected => "new_relation",
                ConnectionState::Pending => continue,
                ConnectionState::NotConnected => INVITATION_GONE,
            }
        };
        found.push(json!({
            "event": event,
            "account_id": sender.account_id,
            "user_provider_id": provider_id,
            "user_public_identifier": public,
            "invitation_id": invitation_id,
        }));
    }
    Ok(found)
}

outreach_runtime::prelude::recovery!("Unipile senders without a poller", recover_pollers);

/// Gives every bound Unipile sender its poller (one lost with a discarded job comes back).
async fn recover_pollers(db: &Db, clock: &Clock) -> Result<u64, ApiError> {
    let senders: Vec<String> = sqlx::query_scalar(
        "select id from senders where provider = 'unipile' and provider_account_id is not null and deleted_at is null",
    )
    .fetch_all(db.pool())
    .await?;
    if senders.is_empty() {
        return Ok(0);
    }
    let mut tx = db.begin_write().await?;
    let mut written = 0;
    for sender_id in senders {
        if jobs::enqueue_if_absent(&mut tx, clock, sync_job(&sender_id))
            .await?
            .is_some()
        {
            written += 1;
        }
    }
    tx.commit().await?;
    Ok(written)
}
