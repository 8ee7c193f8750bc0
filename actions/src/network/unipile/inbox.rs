//! What Unipile tells us, kept raw in `unipile_inbox` and handed over to the engine from there.
//!
//! Unipile's webhooks carry no event id and no signature, arrive late or twice, and stop after 5
//! failed tries; its poll answers (pending invitations, relations, messages) overlap the webhooks.
//! So both only [`store`] what they learn, in the webhook's own shape, under a key that names the
//! fact (`message:{message_id}`, `relation:{account_id}:{user_provider_id}`): a fact heard twice
//! is one row. [`hand_over`] (the adapter's `poll`) turns the rows still `received` into the
//! engine's inbound events in the caller's transaction, and marks them there, so each is applied
//! once whichever instance and whichever path got it first. An account's status is applied here
//! directly (it is the sender's, not a person's): [`account_status_of`] is that table.
//!
//! Echoes are dropped when stored: Unipile's `message_received` fires for the account's own sends
//! too (its sender is the account's `user_id`).

use outreach_runtime::prelude::{ApiError, ids};
use serde_json::Value;
use sqlx::{AnyConnection, Row};

use crate::network::{AccountStatus, InboundEvent};
use crate::senders::{self, SenderStatus};

use super::profile_url_for;

/// Where a stored body came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Webhook,
    Poll,
}

impl Source {
    fn as_str(self) -> &'static str {
        match self {
            Self::Webhook => "webhook",
            Self::Poll => "poll",
        }
    }
}

/// What became of a stored body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    /// Kept, to be handed over to `workspace_id`.
    Due { workspace_id: String },
    /// A fact already stored (a redelivery, or found by both the webhook and the poller).
    Duplicate,
    /// Kept for inspection, not applied, with why (an unknown account, an echo, an unknown event).
    Ignored(String),
    /// Not JSON: kept for inspection, nothing applied.
    Invalid,
}

/// The event a poll found that the poller stores as a webhook would: an invitation that left
/// the pending list without becoming a relation (withdrawn on the network, or declined).
pub const INVITATION_GONE: &str = "invitation_gone";

/// Stores one body Unipile sent (or the poller found), in the caller's transaction.
pub async fn store(
    conn: &mut AnyConnection,
    source: Source,
    raw: &str,
    now_ms: i64,
) -> Result<Stored, ApiError> {
    let Ok(body) = serde_json::from_str::<Value>(raw) else {
        insert(
            conn,
            source,
            None,
            None,
            None,
            raw,
            "invalid",
            Some("not JSON"),
            now_ms,
        )
        .await?;
        return Ok(Stored::Invalid);
    };
    let status_body = body.get("AccountStatus");
    let account_id = status_body
        .unwrap_or(&body)
        .get("account_id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let event = body.get("event").and_then(Value::as_str).unwrap_or("");
    let dedup_key = match (event, status_body) {
        (_, Some(_)) => None,
        ("message_received", _) => body
            .get("message_id")
            .and_then(Value::as_str)
            .map(|id| format!("message:{id}")),
        // A relation is made once; an invitation leaves the pending list once (a later one to the
        // same person has an id of its own).
        ("new_relation", _) => body
            .get("user_provider_id")
            .and_then(Value::as_str)
            .zip(account_id.as_deref())
            .map(|(person, account)| format!("relation:{account}:{person}")),
        (INVITATION_GONE, _) => body
            .get("invitation_id")
            .and_then(Value::as_str)
            .zip(account_id.as_deref())
            .map(|(invitation, account)| format!("gone:{account}:{invitation}")),
        _ => None,
    };
    let workspace_id = match &account_id {
        Some(account_id) => workspace_of(conn, account_id).await?,
        None => None,
    };
    let ignored = if workspace_id.is_none() {
        Some(match &account_id {
            Some(id) => format!("no sender is bound to the Unipile account `{id}`"),
            None => "the body names no account".to_owned(),
        })
    } else if status_body.is_none()
        && !matches!(event, "message_received" | "new_relation" | INVITATION_GONE)
    {
        Some(format!("an event this server does not use (`{event}`)"))
    } else if event == "message_received" && is_echo(&body) {
        Some("an echo of the account's own message".to_owned())
    } else {
        None
    };
    let status = if ignored.is_some() {
        "ignored"
    } else {
        "received"
    };
    // Only a body to apply holds its fact's key: one that changes nothing must not keep a later,
    // better one of the same fact out.
    let dedup_key = dedup_key.filter(|_| ignored.is_none());
    let inserted = insert(
        conn,
        source,
        dedup_key.as_deref(),
        account_id.as_deref(),
        workspace_id.as_deref(),
        raw,
        status,
        ignored.as_deref(),
        now_ms,
    )
    .await?;
    Ok(match (inserted, ignored, workspace_id) {
        (false, _, _) => Stored::Duplicate,
        (true, None, Some(workspace_id)) => Stored::Due { workspace_id },
        // `ignored` is set whenever the workspace is not.
        (true, why, _) => Stored::Ignored(why.unwrap_or_default()),
    })
}

#[allow(clippy::too_many_arguments)]
async fn insert(
    conn: &mut AnyConnection,
    source: Source,
    dedup_key: Option<&str>,
    account_id: Option<&str>,
    workspace_id: Option<&str>,
    raw: &str,
    status: &str,
    note: Option<&str>,
    now_ms: i64,
) -> Result<bool, ApiError> {
    let done = (status != "received").then_some(now_ms);
    let inserted = sqlx::query(
        "insert into unipile_inbox (id, source, dedup_key, account_id, workspace_id, body, status, note, received_at, processed_at) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) on conflict (dedup_key) do nothing",
    )
    .bind(ids::new_id("uin"))
    .bind(source.as_str())
    .bind(dedup_key)
    .bind(account_id)
    .bind(workspace_id)
    .bind(raw)
    .bind(status)
    .bind(note)
    .bind(now_ms)
    .bind(done)
    .execute(conn)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// Whether a `message_received` is the account's own message coming back.
fn is_echo(body: &Value) -> bool {
    let own = body
        .get("account_info")
        .and_then(|info| info.get("user_id"))
        .and_then(Value::as_str);
    let from = body
        .get("sender")
        .and_then(|sender| sender.get("attendee_provider_id"))
        .and_then(Value::as_str);
    own.is_some() && own == from
}

/// The workspace of the sender bound to a Unipile account, if one is.
async fn workspace_of(
    conn: &mut AnyConnection,
    account_id: &str,
) -> Result<Option<String>, ApiError> {
    Ok(sqlx::query_scalar(
        "select workspace_id from senders where provider_account_id = $1 and deleted_at is null limit 1",
    )
    .bind(account_id)
    .fetch_optional(conn)
    .await?)
}

async fn sender_of(
    conn: &mut AnyConnection,
    workspace_id: &str,
    account_id: &str,
) -> Result<Option<String>, ApiError> {
    Ok(sqlx::query_scalar(
        "select id from senders where workspace_id = $1 and provider_account_id = $2 and deleted_at is null limit 1",
    )
    .bind(workspace_id)
    .bind(account_id)
    .fetch_optional(conn)
    .await?)
}

/// How many stored rows one hand-over takes.
const HAND_OVER_BATCH: i64 = 500;

/// Turns the workspace's rows still `received` into inbound events, in the caller's transaction,
/// and marks each one `applied` or `ignored` there; an account status is applied here. The
/// caller ingests the events in the same transaction.
pub async fn hand_over(
    conn: &mut AnyConnection,
    now_ms: i64,
    workspace_id: &str,
) -> Result<Vec<InboundEvent>, ApiError> {
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "select id, body, received_at from unipile_inbox where workspace_id = $1 and status = 'received' \
         order by received_at, id limit {HAND_OVER_BATCH}"
    )))
    .bind(workspace_id)
    .fetch_all(&mut *conn)
    .await?;
    let mut events = Vec::new();
    for row in rows {
        let id: String = row.try_get("id")?;
        let raw: String = row.try_get("body")?;
        let received_at: i64 = row.try_get("received_at")?;
        let body: Value = serde_json::from_str(&raw).unwrap_or(Value::Null);
        let outcome = read_one(conn, workspace_id, &body, received_at, now_ms).await?;
        let (status, note) = match outcome {
            Ok(Some(event)) => {
                events.push(event);
                ("applied", None)
            }
            Ok(None) => ("applied", None),
            Err(why) => ("ignored", Some(why)),
        };
        // An ignored body gives its fact's key back (see `store`): the same fact heard again, by
        // the other path, with what this one lacked, is still applied.
        sqlx::query(
            "update unipile_inbox set status = $2, note = $3, processed_at = $4, \
             dedup_key = case when $2 = 'ignored' then null else dedup_key end where id = $1",
        )
        .bind(&id)
        .bind(status)
        .bind(note)
        .bind(now_ms)
        .execute(&mut *conn)
        .await?;
    }
    Ok(events)
}

/// One stored body: its inbound event (`None` when it was applied here, as an account status
/// is), or why it changes nothing.
async fn read_one(
    conn: &mut AnyConnection,
    workspace_id: &str,
    body: &Value,
    received_at: i64,
    now_ms: i64,
) -> Result<Result<Option<InboundEvent>, String>, ApiError> {
    let text =
        |value: &Value, field: &str| value.get(field).and_then(Value::as_str).map(str::to_owned);
    if let Some(status) = body.get("AccountStatus") {
        let (Some(account_id), Some(message)) =
            (text(status, "account_id"), text(status, "message"))
        else {
            return Ok(Err(
                "an account status without `account_id` or `message`".to_owned()
            ));
        };
        let Some(sender_id) = sender_of(conn, workspace_id, &account_id).await? else {
            return Ok(Err("the account's sender is gone".to_owned()));
        };
        apply_account_status(conn, &sender_id, &message, now_ms).await?;
        return Ok(Ok(None));
    }
    let Some(account_id) = text(body, "account_id") else {
        return Ok(Err("no `account_id`".to_owned()));
    };
    let Some(sender_id) = sender_of(conn, workspace_id, &account_id).await? else {
        return Ok(Err("the account's sender is gone".to_owned()));
    };
    let event = body.get("event").and_then(Value::as_str).unwrap_or("");
    match event {
        "new_relation" | INVITATION_GONE => {
            let person = text(body, "user_provider_id");
            let profile_url = match person_url(
                conn,
                &sender_id,
                person.as_deref(),
                body,
                "user_public_identifier",
                "user_profile_url",
            )
            .await?
            {
                Some(url) => url,
                None => return Ok(Err("the person is not one this sender reached".to_owned())),
            };
            if event == "new_relation" {
                let state: Option<String> = sqlx::query_scalar(
                    "select connection_state from prospects where workspace_id = $1 and profile_url = $2",
                )
                .bind(workspace_id)
                .bind(&profile_url)
                .fetch_optional(&mut *conn)
                .await?
                .flatten();
                if state.as_deref() == Some("connected") {
                    return Ok(Err("already connected".to_owned()));
                }
            }
            forget_invitation(conn, &sender_id, &profile_url).await?;
            let at_ms = super::timestamp_ms(body).unwrap_or(received_at);
            Ok(Ok(Some(if event == "new_relation" {
                InboundEvent::InvitationAccepted {
                    sender_id,
                    profile_url,
                    at_ms,
                }
            } else {
                InboundEvent::InvitationWithdrawn {
                    sender_id,
                    profile_url,
                    at_ms,
                }
            })))
        }
        "message_received" => {
            let sender = body.get("sender").cloned().unwrap_or(Value::Null);
            let person = text(&sender, "attendee_provider_id");
            let Some(profile_url) = person_url(
                conn,
                &sender_id,
                person.as_deref(),
                &sender,
                "attendee_public_identifier",
                "attendee_profile_url",
            )
            .await?
            else {
                return Ok(Err("the person is not one this sender reached".to_owned()));
            };
            let (Some(message_id), Some(message)) =
                (text(body, "message_id"), text(body, "message"))
            else {
                return Ok(Err("a message without `message_id` or `message`".to_owned()));
            };
            // The chat our messages to the person go to: only a chat of the two of them (a group
            // chat holds people nobody approved).
            let attendees = body
                .get("attendees")
                .and_then(Value::as_array)
                .map(Vec::len);
            if let (Some(person), Some(chat_id), Some(1..=2)) =
                (&person, text(body, "chat_id"), attendees)
            {
                remember_chat(conn, &sender_id, &profile_url, person, &chat_id, now_ms).await?;
            }
            Ok(Ok(Some(InboundEvent::MessageReceived {
                sender_id,
                profile_url,
                text: message,
                at_ms: super::timestamp_ms(body).unwrap_or(received_at),
                provider_message_id: message_id,
            })))
        }
        other => Ok(Err(format!(
            "an event this server does not use (`{other}`)"
        ))),
    }
}

/// The profile URL of a person Unipile names: the one the sender's lookups learnt for their
/// Unipile id, else their public identifier or profile address in the body.
async fn person_url(
    conn: &mut AnyConnection,
    sender_id: &str,
    provider_id: Option<&str>,
    body: &Value,
    public_field: &str,
    url_field: &str,
) -> Result<Option<String>, ApiError> {
    if let Some(provider_id) = provider_id {
        let known: Option<String> = sqlx::query_scalar(
            "select profile_url from unipile_people where sender_id = $1 and provider_id = $2 limit 1",
        )
        .bind(sender_id)
        .bind(provider_id)
        .fetch_optional(&mut *conn)
        .await?;
        if known.is_some() {
            return Ok(known);
        }
    }
    if let Some(public) = body
        .get(public_field)
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
    {
        return Ok(profile_url_for(public));
    }
    let url = body
        .get(url_field)
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(crate::prospects::normalize::profile_url(url).ok().flatten())
}

async fn forget_invitation(
    conn: &mut AnyConnection,
    sender_id: &str,
    profile_url: &str,
) -> Result<(), ApiError> {
    sqlx::query(
        "update unipile_people set invitation_id = null where sender_id = $1 and profile_url = $2",
    )
    .bind(sender_id)
    .bind(profile_url)
    .execute(conn)
    .await?;
    Ok(())
}

async fn remember_chat(
    conn: &mut AnyConnection,
    sender_id: &str,
    profile_url: &str,
    provider_id: &str,
    chat_id: &str,
    now_ms: i64,
) -> Result<(), ApiError> {
    sqlx::query(
        "insert into unipile_people (sender_id, profile_url, provider_id, chat_id, updated_at) values ($1, $2, $3, $4, $5) \
         on conflict (sender_id, profile_url) do update set chat_id = $4, updated_at = $5",
    )
    .bind(sender_id)
    .bind(profile_url)
    .bind(provider_id)
    .bind(chat_id)
    .bind(now_ms)
    .execute(conn)
    .await?;
    Ok(())
}

/// What a Unipile account status means for its sender: the status it takes, and the reason
/// kept with it (`None` clears a halt); `None` for `CONNECTING` and the statuses this table does
/// not know, which change nothing.
pub fn account_status_of(status: &str) -> Option<(AccountStatus, Option<String>)> {
    Some(match status {
        "CREDENTIALS" => (
            AccountStatus::NeedsReauth,
            Some("Unipile needs the account's owner to sign in again (CREDENTIALS)".to_owned()),
        ),
        "ERROR" | "STOPPED" => (
            AccountStatus::Disconnected,
            Some(format!(
                "Unipile reports the account `{status}`: it cannot act until it is reconnected"
            )),
        ),
        "DELETED" => (
            AccountStatus::Disconnected,
            Some("the account was deleted from Unipile: connect the sender again".to_owned()),
        ),
        "OK" | "RECONNECTED" | "SYNC_SUCCESS" | "CREATION_SUCCESS" => {
            (AccountStatus::Connected, None)
        }
        _ => return None,
    })
}

/// Applies a Unipile account status to its sender (with the sender's events), in `conn`.
pub async fn apply_account_status(
    conn: &mut AnyConnection,
    sender_id: &str,
    status: &str,
    now_ms: i64,
) -> Result<(), ApiError> {
    let Some((account, reason)) = account_status_of(status) else {
        return Ok(());
    };
    let sender_status = match account {
        AccountStatus::Connected => SenderStatus::Connected,
        AccountStatus::NeedsReauth => SenderStatus::NeedsReauth,
        AccountStatus::Restricted => SenderStatus::Restricted,
        AccountStatus::Disconnected => SenderStatus::Disconnected,
    };
    if sender_status == SenderStatus::Connected {
        // A routine `OK` clears what an account status set (a lost session, `ERROR`), never a
        // restriction the network's own refusal set: that one ends with a new sign-in.
        let current: Option<String> =
            sqlx::query_scalar("select status from senders where id = $1")
                .bind(sender_id)
                .fetch_optional(&mut *conn)
                .await?;
        if current.as_deref() == Some(SenderStatus::Restricted.as_str()) {
            return Ok(());
        }
    }
    senders::set_sender_status(conn, sender_id, sender_status, now_ms).await?;
    senders::note_provider_status(conn, sender_id, reason.as_deref(), status == "DELETED").await
}

/// How long a handled body is kept for inspection.
const KEPT_MS: i64 = 30 * 24 * 3_600_000;

/// Deletes the bodies handled more than 30 days ago; run by the runtime's housekeeping. A fact
/// heard again after that is still applied once: a message by its id in `inbound_events`, a
/// relation by the prospect's connection state.
async fn purge(db: &outreach_runtime::prelude::Db, now_ms: i64) -> Result<u64, ApiError> {
    Ok(
        sqlx::query("delete from unipile_inbox where status <> 'received' and received_at < $1")
            .bind(now_ms - KEPT_MS)
            .execute(db.writes())
            .await?
            .rows_affected(),
    )
}

outreach_runtime::prelude::purge!("Unipile bodies handled more than 30 days ago", purge);
