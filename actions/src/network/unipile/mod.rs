//! Unipile (API v1), the first real network provider, behind [`NetworkProvider`].
//!
//! Selected with `OUTREACH_NETWORK=unipile`, `UNIPILE_DSN`, `UNIPILE_API_KEY` and
//! `UNIPILE_WEBHOOK_SECRET` ([`UnipileSettings`]); docs/unipile.md is the operator's manual. Each
//! sender is one Unipile account (`senders.provider_account_id`, bound when its hosted sign-in
//! ends: [`connect`]). The engine speaks of people by profile URL and Unipile by its own ids,
//! which differ for each viewing account, so the adapter keeps, per sender and person, Unipile's
//! id of them, the pending invitation's id and the chat's id (`unipile_people`), learnt from the
//! sender's own lookups.
//!
//! What it must never do is act twice. Unipile takes no idempotency key, so an action whose
//! outcome is unknown (a 5xx, a timeout, a chat started with a null id) is answered as
//! [`NetworkError::Transient`], and the engine asks [`Unipile::find_outbound`] before anything is
//! sent again: it looks for the person among the pending invitations and the relations for an
//! invitation, and among the chat's messages since the intent for a message. A failure of
//! Unipile itself also backs the sender off for a few minutes, with the reason on `get_sender`.
//!
//! Inbound, Unipile calls our webhook route and the poller asks it on a schedule; both only store
//! what they learn in `unipile_inbox` ([`inbox`]), and [`Unipile::poll`] hands it over to the
//! engine's `ingest` in the caller's transaction, as the sandbox's poll does.

pub mod client;
pub mod connect;
pub mod inbox;

use outreach_runtime::prelude::{ApiError, Clock, Db};
use serde_json::{Value, json};
use sqlx::Row;

use super::{
    Account, AccountStatus, ChatDirection, ChatMessage, ConnectionState, InboundEvent,
    MAX_MESSAGE_CHARS, MAX_NOTE_CHARS, NetworkError, NetworkProvider, OUTCOME_OK, Outbound,
    OutboundKind, OutboundRecord, Sent, Viewed,
};
use crate::provider::UnipileSettings;
use client::{Client, Failure, Op, classify};

/// The header Unipile's webhooks carry our secret in (set when they are registered).
pub const WEBHOOK_SECRET_HEADER: &str = "Unipile-Auth";

/// How long a sender backs off after Unipile failed without an answer.
pub const BACK_OFF_MS: i64 = 10 * 60 * 1000;

/// The share of the network's invitation limit (Unipile's `usage`) from which a sender stops
/// inviting for the day.
pub const USAGE_BACK_OFF_PERCENT: f64 = 90.0;

const DAY_MS: i64 = 24 * 3_600_000;
/// How far before an intent was written its message is looked for (clocks differ).
const RECONCILE_MARGIN_MS: i64 = 5 * 60 * 1000;

/// The Unipile network: its client, and our database for what the adapter keeps.
#[derive(Debug, Clone)]
pub struct Unipile {
    client: Client,
    db: Db,
    clock: Clock,
}

/// What the adapter keeps of one person for one sender.
#[derive(Debug, Clone, Default)]
struct Known {
    provider_id: Option<String>,
    invitation_id: Option<String>,
    chat_id: Option<String>,
}

impl Unipile {
    pub fn new(settings: &UnipileSettings, db: Db, clock: Clock) -> Result<Self, ApiError> {
        let client = Client::new(&settings.dsn, &settings.api_key, settings.timeout)
            .map_err(ApiError::internal)?;
        Ok(Self { client, db, clock })
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The sender's Unipile account, or `AccountDisconnected` while it has none.
    async fn account_id(&self, account: Account<'_>) -> Result<String, NetworkError> {
        let id: Option<Option<String>> = sqlx::query_scalar(
            "select provider_account_id from senders where id = $1 and workspace_id = $2",
        )
        .bind(account.sender_id)
        .bind(account.workspace_id)
        .fetch_optional(self.db.pool())
        .await?;
        id.flatten().ok_or(NetworkError::AccountDisconnected)
    }

    async fn known(&self, sender_id: &str, profile_url: &str) -> Result<Known, NetworkError> {
        let row = sqlx::query(
            "select provider_id, invitation_id, chat_id from unipile_people where sender_id = $1 and profile_url = $2",
        )
        .bind(sender_id)
        .bind(profile_url)
        .fetch_optional(self.db.pool())
        .await?;
        let Some(row) = row else {
            return Ok(Known::default());
        };
        Ok(Known {
            provider_id: row.try_get("provider_id")?,
            invitation_id: row.try_get("invitation_id")?,
            chat_id: row.try_get("chat_id")?,
        })
    }

    /// Starts a chat with the person (`POST /chats` with `fields`, the attendee and the text among
    /// them), remembers it, and answers the message it sent. Unipile may start a chat and not say
    /// which message it sent: then the outcome is asked (the chat's messages since the intent)
    /// before anything is sent again.
    async fn start_chat(
        &self,
        to: &Outbound<'_>,
        provider_id: &str,
        fields: &[(&str, &str)],
        op: Op,
    ) -> Result<Sent, NetworkError> {
        let sender_id = to.account.sender_id;
        let answer = match self.client.post_form("/chats", fields).await {
            Ok(answer) => answer,
            Err(failure) => return Err(self.fail(failure, op, sender_id).await),
        };
        let chat_id = answer.get("chat_id").and_then(Value::as_str);
        if chat_id.is_some() {
            self.remember(sender_id, to.profile_url, provider_id, None, Some(chat_id))
                .await?;
        }
        match answer.get("message_id").and_then(Value::as_str) {
            Some(id) => Ok(Sent {
                provider_id: id.to_owned(),
                at_ms: self.now(),
            }),
            None => Err(self
                .fail(
                    Failure::NoAnswer("a chat started without a `message_id`".into()),
                    op,
                    sender_id,
                )
                .await),
        }
    }

    /// Remembers Unipile's id of a person for a sender; `invitation` and `chat` are written when
    /// given (`Some(None)` clears one).
    async fn remember(
        &self,
        sender_id: &str,
        profile_url: &str,
        provider_id: &str,
        invitation: Option<Option<&str>>,
        chat: Option<Option<&str>>,
    ) -> Result<(), NetworkError> {
        let now = self.now();
        let mut tx = self.db.begin_write().await?;
        sqlx::query(
            "insert into unipile_people (sender_id, profile_url, provider_id, updated_at) values ($1, $2, $3, $4) \
             on conflict (sender_id, profile_url) do update set provider_id = $3, updated_at = $4",
        )
        .bind(sender_id)
        .bind(profile_url)
        .bind(provider_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        if let Some(invitation) = invitation {
            sqlx::query(
                "update unipile_people set invitation_id = $3, invited_at = $4 where sender_id = $1 and profile_url = $2",
            )
            .bind(sender_id)
            .bind(profile_url)
            .bind(invitation)
            .bind(invitation.map(|_| now))
            .execute(&mut *tx)
            .await?;
        }
        if let Some(chat) = chat {
            sqlx::query(
                "update unipile_people set chat_id = $3 where sender_id = $1 and profile_url = $2",
            )
            .bind(sender_id)
            .bind(profile_url)
            .bind(chat)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The engine's error for a failure of `op` by `sender_id`; when Unipile itself failed, the
    /// sender backs off for [`BACK_OFF_MS`] with the reason.
    async fn fail(&self, failure: Failure, op: Op, sender_id: &str) -> NetworkError {
        let error = classify(&failure, op, self.now());
        if let NetworkError::Transient(cause) = &error {
            let now = self.now();
            let reason = format!("Unipile failed ({cause}); the sender waits a few minutes");
            if let Err(db_error) =
                back_off(&self.db, sender_id, now + BACK_OFF_MS, &reason, now).await
            {
                tracing::warn!(sender_id, ?db_error, "backing the sender off failed");
            }
        }
        error
    }

    /// Unipile's profile of the person as the account sees it, read without telling them.
    async fn profile(
        &self,
        account_id: &str,
        sender_id: &str,
        profile_url: &str,
    ) -> Result<Value, NetworkError> {
        match self.read_profile(account_id, profile_url).await? {
            Ok(profile) => Ok(profile),
            Err(failure) => Err(self.fail(failure, Op::Read, sender_id).await),
        }
    }

    /// `GET /users/{public id}` as the account sees it, without telling the person: the outer
    /// error is a profile URL with no identifier, the inner one Unipile's failure.
    async fn read_profile(
        &self,
        account_id: &str,
        profile_url: &str,
    ) -> Result<Result<Value, Failure>, NetworkError> {
        let identifier = public_id(profile_url)?;
        Ok(self
            .client
            .get(
                &format!("/users/{}", encode(&identifier)),
                &[("account_id", account_id.to_owned())],
            )
            .await)
    }

    /// Unipile's id of the person for this account: remembered, or looked up (a read).
    async fn resolve(
        &self,
        account_id: &str,
        sender_id: &str,
        profile_url: &str,
    ) -> Result<String, NetworkError> {
        if let Some(id) = self.known(sender_id, profile_url).await?.provider_id {
            return Ok(id);
        }
        let profile = self.profile(account_id, sender_id, profile_url).await?;
        let id = provider_id_of(&profile)?;
        self.remember(sender_id, profile_url, &id, None, None)
            .await?;
        Ok(id)
    }

    /// The account's pending sent invitations (every page).
    async fn pending_invitations(
        &self,
        account_id: &str,
        sender_id: &str,
    ) -> Result<Vec<Value>, NetworkError> {
        match self
            .client
            .list_all(
                "/users/invite/sent",
                &[("account_id", account_id.to_owned())],
                50,
            )
            .await
        {
            Ok(items) => Ok(items),
            Err(failure) => Err(self.fail(failure, Op::Read, sender_id).await),
        }
    }

    /// The ids and public identifiers of the people the account's pending invitations go to.
    pub(crate) async fn pending_invitation_ids(
        &self,
        account_id: &str,
        sender_id: &str,
    ) -> Result<std::collections::HashSet<String>, NetworkError> {
        let items = self.pending_invitations(account_id, sender_id).await?;
        Ok(ids_in(&items, INVITATION_ID_FIELDS))
    }

    /// The ids and public identifiers of the account's relations (the newest 1,000).
    pub(crate) async fn relation_ids(
        &self,
        account_id: &str,
        sender_id: &str,
    ) -> Result<std::collections::HashSet<String>, NetworkError> {
        let items = self.relations(account_id, sender_id, 10).await?;
        Ok(ids_in(&items, RELATION_ID_FIELDS))
    }

    /// The account's relations, newest first, for at most `pages` pages of 100.
    async fn relations(
        &self,
        account_id: &str,
        sender_id: &str,
        pages: usize,
    ) -> Result<Vec<Value>, NetworkError> {
        match self
            .client
            .list_all(
                "/users/relations",
                &[("account_id", account_id.to_owned())],
                pages,
            )
            .await
        {
            Ok(items) => Ok(items),
            Err(failure) => Err(self.fail(failure, Op::Read, sender_id).await),
        }
    }

    /// The account's chats with a message after `after_ms`, and each one's messages after it,
    /// oldest first: `(chat, message)` pairs.
    pub(crate) async fn messages_after(
        &self,
        account_id: &str,
        sender_id: &str,
        after_ms: i64,
    ) -> Result<Vec<(Value, Value)>, NetworkError> {
        let after = outreach_runtime::prelude::rfc3339(after_ms);
        let chats = match self
            .client
            .list_all(
                "/chats",
                &[
                    ("account_id", account_id.to_owned()),
                    ("after", after.clone()),
                ],
                20,
            )
            .await
        {
            Ok(chats) => chats,
            Err(failure) => return Err(self.fail(failure, Op::Read, sender_id).await),
        };
        let mut found = Vec::new();
        for chat in chats {
            let Some(chat_id) = chat.get("id").and_then(Value::as_str) else {
                continue;
            };
            let messages = match self
                .client
                .list_all(
                    &format!("/chats/{}/messages", encode(chat_id)),
                    &[("after", after.clone())],
                    20,
                )
                .await
            {
                Ok(messages) => messages,
                Err(failure) => return Err(self.fail(failure, Op::Read, sender_id).await),
            };
            for message in messages {
                if timestamp_ms(&message).is_some_and(|at| at > after_ms) {
                    found.push((chat.clone(), message));
                }
            }
        }
        found.sort_by_key(|(_, message)| timestamp_ms(message).unwrap_or(0));
        Ok(found)
    }

    /// The public identifier of the person Unipile calls `provider_id` for this account, read
    /// from their profile (`None` when Unipile does not know them).
    pub(crate) async fn public_identifier_of(
        &self,
        account_id: &str,
        sender_id: &str,
        provider_id: &str,
    ) -> Result<Option<String>, NetworkError> {
        match self
            .client
            .get(
                &format!("/users/{}", encode(provider_id)),
                &[("account_id", account_id.to_owned())],
            )
            .await
        {
            Ok(profile) => Ok(profile
                .get("public_identifier")
                .and_then(Value::as_str)
                .map(str::to_owned)),
            Err(Failure::Refused { status: 404, .. }) => Ok(None),
            Err(failure) => Err(self.fail(failure, Op::Read, sender_id).await),
        }
    }

    /// The profile URL of the person Unipile calls `provider_id` for this sender, if the adapter
    /// learnt it.
    pub(crate) async fn profile_url_of(
        &self,
        sender_id: &str,
        provider_id: &str,
    ) -> Result<Option<String>, NetworkError> {
        Ok(sqlx::query_scalar(
            "select profile_url from unipile_people where sender_id = $1 and provider_id = $2 limit 1",
        )
        .bind(sender_id)
        .bind(provider_id)
        .fetch_optional(self.db.pool())
        .await?)
    }

    /// A message found by reconciliation: one the account sent with `text` after `since_ms` in
    /// its chat with the person (Unipile's id for them, or the chat's id when known).
    async fn find_message(
        &self,
        account_id: &str,
        sender_id: &str,
        (provider_id, chat_id): (&str, Option<&str>),
        text: &str,
        since_ms: i64,
    ) -> Result<Option<OutboundRecord>, NetworkError> {
        let messages = self.messages_after(account_id, sender_id, since_ms).await?;
        let text = squeeze(text);
        Ok(messages.into_iter().find_map(|(chat, message)| {
            let theirs = chat
                .get("id")
                .and_then(Value::as_str)
                .is_some_and(|id| Some(id) == chat_id)
                || chat.get("attendee_provider_id").and_then(Value::as_str) == Some(provider_id);
            let own = theirs && message.get("is_sender").is_some_and(truthy);
            let same = message
                .get("text")
                .and_then(Value::as_str)
                .is_some_and(|sent| squeeze(sent) == text);
            (own && same).then(|| OutboundRecord {
                kind: OutboundKind::Message,
                outcome: OUTCOME_OK.to_owned(),
                provider_id: message.get("id").and_then(Value::as_str).map(str::to_owned),
                at_ms: timestamp_ms(&message).unwrap_or(since_ms),
            })
        }))
    }
}

/// Backs a sender off until `until_ms` with `reason`, unless it already waits longer.
pub(crate) async fn back_off(
    db: &Db,
    sender_id: &str,
    until_ms: i64,
    reason: &str,
    now_ms: i64,
) -> Result<(), ApiError> {
    let mut tx = db.begin_write().await?;
    crate::senders::extend_pause(&mut tx, sender_id, until_ms, reason, now_ms).await?;
    tx.commit().await?;
    Ok(())
}

/// Forgets what the adapter kept for a sender's previous account (its people and the poller's
/// place), when the sender is bound to another one.
pub(crate) async fn forget_account_state(
    conn: &mut sqlx::AnyConnection,
    sender_id: &str,
) -> Result<(), ApiError> {
    sqlx::query("delete from unipile_people where sender_id = $1")
        .bind(sender_id)
        .execute(&mut *conn)
        .await?;
    sqlx::query("delete from unipile_sync where sender_id = $1")
        .bind(sender_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Saves the poller's place for a sender: its messages watermark and when it last read the
/// invitations and relations.
pub async fn save_sync_place(
    conn: &mut sqlx::AnyConnection,
    sender_id: &str,
    messages_after: Option<i64>,
    relations_checked_at: Option<i64>,
    now_ms: i64,
) -> Result<(), ApiError> {
    sqlx::query(
        "insert into unipile_sync (sender_id, messages_after, relations_checked_at, updated_at) values ($1, $2, $3, $4) \
         on conflict (sender_id) do update set messages_after = $2, relations_checked_at = $3, updated_at = $4",
    )
    .bind(sender_id)
    .bind(messages_after)
    .bind(relations_checked_at)
    .bind(now_ms)
    .execute(conn)
    .await?;
    Ok(())
}

/// The public identifier in a normalised profile URL (`linkedin.com/in/jane` → `jane`;
/// `linkedin.com/in/j%c3%b6rg` → `jörg`: a normalised URL keeps non-ASCII percent-encoded).
pub(crate) fn public_id(profile_url: &str) -> Result<String, NetworkError> {
    let segment = profile_url
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .filter(|id| !id.is_empty())
        .ok_or(NetworkError::Unreachable)?;
    Ok(percent_encoding::percent_decode_str(segment)
        .decode_utf8_lossy()
        .into_owned())
}

/// The normalised profile URL of a public identifier, as a prospect's is stored.
pub(crate) fn profile_url_for(public_identifier: &str) -> Option<String> {
    let address = format!(
        "https://www.linkedin.com/in/{}",
        encode(public_identifier.trim())
    );
    crate::prospects::normalize::profile_url(Some(address))
        .ok()
        .flatten()
}

/// What a path segment escapes: everything but letters, digits and `-._~`.
const PATH_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A path segment, percent-encoded.
fn encode(segment: &str) -> String {
    percent_encoding::utf8_percent_encode(segment, PATH_SEGMENT).to_string()
}

/// Text as reconciliation compares it: whitespace runs made one space, the ends trimmed.
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn provider_id_of(profile: &Value) -> Result<String, NetworkError> {
    profile
        .get("provider_id")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            NetworkError::Transient("a Unipile profile without `provider_id`".to_owned())
        })
}

/// The person's relation to the account, as a Unipile profile shows it.
fn state_of(profile: &Value) -> ConnectionState {
    let distance = profile.get("network_distance").and_then(Value::as_str);
    if distance == Some("FIRST_DEGREE") || profile.get("is_relationship").is_some_and(truthy) {
        return ConnectionState::Connected;
    }
    let pending = profile
        .get("invitation")
        .and_then(|invitation| invitation.get("status"))
        .and_then(Value::as_str)
        == Some("PENDING");
    if pending {
        ConnectionState::Pending
    } else {
        ConnectionState::NotConnected
    }
}

/// `true`, `1` or `"1"`.
pub(crate) fn truthy(value: &Value) -> bool {
    value.as_bool().unwrap_or(false)
        || value.as_i64() == Some(1)
        || value.as_str().is_some_and(|s| s == "1" || s == "true")
}

/// A Unipile item's time: `timestamp`, `date`, `parsed_datetime` (RFC 3339) or `created_at`
/// (epoch ms or RFC 3339).
pub(crate) fn timestamp_ms(item: &Value) -> Option<i64> {
    for field in ["timestamp", "parsed_datetime", "date", "created_at"] {
        match item.get(field) {
            Some(Value::String(text)) => {
                if let Ok(at) = text.parse::<jiff::Timestamp>() {
                    return Some(at.as_millisecond());
                }
            }
            Some(Value::Number(number)) => return number.as_i64(),
            _ => {}
        }
    }
    None
}

/// An outbound action found done by reconciliation.
fn done(kind: OutboundKind, provider_id: Option<String>, at_ms: i64) -> Option<OutboundRecord> {
    Some(OutboundRecord {
        kind,
        outcome: OUTCOME_OK.to_owned(),
        provider_id,
        at_ms,
    })
}

/// Whether a list item names the person (by Unipile's id or the public identifier).
fn names(item: &Value, id_fields: &[&str], provider_id: &str, public: &str) -> bool {
    id_fields.iter().any(|field| {
        item.get(*field)
            .and_then(Value::as_str)
            .is_some_and(|value| value == provider_id || value.eq_ignore_ascii_case(public))
    })
}

/// Every value of `fields` in `items` (public identifiers lowercased).
fn ids_in(items: &[Value], fields: &[&str]) -> std::collections::HashSet<String> {
    items
        .iter()
        .flat_map(|item| fields.iter().filter_map(|field| item.get(*field)?.as_str()))
        .flat_map(|value| [value.to_owned(), value.to_lowercase()])
        .collect()
}

const INVITATION_ID_FIELDS: &[&str] =
    &["invited_user_id", "invited_user_public_id", "invited_user"];
const RELATION_ID_FIELDS: &[&str] = &["member_id", "public_identifier", "member_urn"];

impl NetworkProvider for Unipile {
    async fn view_profile(&self, to: Outbound<'_>) -> Result<Viewed, NetworkError> {
        let account_id = self.account_id(to.account).await?;
        let identifier = public_id(to.profile_url)?;
        let profile = match self
            .client
            .get_once(
                &format!("/users/{}", encode(&identifier)),
                &[
                    ("account_id", account_id.clone()),
                    ("notify", "true".to_owned()),
                ],
            )
            .await
        {
            Ok(profile) => profile,
            Err(failure) => return Err(self.fail(failure, Op::View, to.account.sender_id).await),
        };
        if let Ok(id) = provider_id_of(&profile) {
            self.remember(to.account.sender_id, to.profile_url, &id, None, None)
                .await?;
        }
        Ok(Viewed {
            state: state_of(&profile),
            at_ms: self.now(),
        })
    }

    async fn invite(&self, to: Outbound<'_>, note: Option<&str>) -> Result<Sent, NetworkError> {
        if note.is_some_and(|note| note.chars().count() > MAX_NOTE_CHARS) {
            return Err(NetworkError::TooLong {
                limit: MAX_NOTE_CHARS,
            });
        }
        let sender_id = to.account.sender_id;
        let account_id = self.account_id(to.account).await?;
        let provider_id = self.resolve(&account_id, sender_id, to.profile_url).await?;
        let mut body = json!({"provider_id": provider_id, "account_id": account_id});
        if let Some(note) = note.filter(|note| !note.trim().is_empty()) {
            body["message"] = Value::from(note);
        }
        let answer = match self.client.post_json("/users/invite", &body).await {
            Ok(answer) => answer,
            Err(failure) => {
                let error = self.fail(failure, Op::Invite, sender_id).await;
                // "Already performed" is an invitation pending or a relation: a read tells which.
                if error == NetworkError::AlreadyInvited {
                    let profile = self.profile(&account_id, sender_id, to.profile_url).await?;
                    if state_of(&profile) == ConnectionState::Connected {
                        return Err(NetworkError::AlreadyConnected);
                    }
                }
                return Err(error);
            }
        };
        let invitation_id = answer
            .get("invitation_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        self.remember(
            sender_id,
            to.profile_url,
            &provider_id,
            Some(invitation_id.as_deref()),
            None,
        )
        .await?;
        if let Some(usage) = answer.get("usage").and_then(Value::as_f64)
            && usage >= USAGE_BACK_OFF_PERCENT
        {
            let now = self.now();
            let reason = format!(
                "Unipile reports {usage:.0}% of the network's invitation limit used; the sender rests until tomorrow"
            );
            back_off(&self.db, sender_id, now + DAY_MS, &reason, now).await?;
        }
        Ok(Sent {
            provider_id: invitation_id.unwrap_or_default(),
            at_ms: self.now(),
        })
    }

    async fn withdraw(&self, to: Outbound<'_>) -> Result<Sent, NetworkError> {
        let sender_id = to.account.sender_id;
        let account_id = self.account_id(to.account).await?;
        let provider_id = self.resolve(&account_id, sender_id, to.profile_url).await?;
        let public = public_id(to.profile_url)?;
        let invitation_id = match self.known(sender_id, to.profile_url).await?.invitation_id {
            Some(id) => id,
            None => self
                .pending_invitations(&account_id, sender_id)
                .await?
                .iter()
                .find(|item| names(item, INVITATION_ID_FIELDS, &provider_id, &public))
                .and_then(|item| item.get("id").and_then(Value::as_str))
                .map(str::to_owned)
                .ok_or(NetworkError::NotInvited)?,
        };
        if let Err(failure) = self
            .client
            .delete(
                &format!("/users/invite/sent/{}", encode(&invitation_id)),
                &[("account_id", account_id.clone())],
            )
            .await
        {
            return Err(self.fail(failure, Op::Withdraw, sender_id).await);
        }
        self.remember(sender_id, to.profile_url, &provider_id, Some(None), None)
            .await?;
        Ok(Sent {
            provider_id: invitation_id,
            at_ms: self.now(),
        })
    }

    async fn connection_state(
        &self,
        account: Account<'_>,
        profile_url: &str,
    ) -> Result<ConnectionState, NetworkError> {
        // A pure read that writes nothing, not even a back-off: the step executor asks it inside
        // its own transaction (on SQLite the database's one writer).
        let account_id = self.account_id(account).await?;
        let profile = self
            .read_profile(&account_id, profile_url)
            .await?
            .map_err(|failure| classify(&failure, Op::Read, self.now()))?;
        Ok(state_of(&profile))
    }

    async fn send_message(&self, to: Outbound<'_>, text: &str) -> Result<Sent, NetworkError> {
        if text.chars().count() > MAX_MESSAGE_CHARS {
            return Err(NetworkError::TooLong {
                limit: MAX_MESSAGE_CHARS,
            });
        }
        let sender_id = to.account.sender_id;
        let account_id = self.account_id(to.account).await?;
        let known = self.known(sender_id, to.profile_url).await?;
        if let Some(chat_id) = &known.chat_id {
            match self
                .client
                .post_form(
                    &format!("/chats/{}/messages", encode(chat_id)),
                    &[("text", text)],
                )
                .await
            {
                Ok(answer) => {
                    return match answer.get("message_id").and_then(Value::as_str) {
                        Some(id) => Ok(Sent {
                            provider_id: id.to_owned(),
                            at_ms: self.now(),
                        }),
                        None => Err(self
                            .fail(
                                Failure::NoAnswer("a message sent without a `message_id`".into()),
                                Op::Message,
                                sender_id,
                            )
                            .await),
                    };
                }
                // The chat is gone (deleted on the network): nothing was sent; start a new one.
                Err(Failure::Refused { status: 404, .. }) => {}
                Err(failure) => return Err(self.fail(failure, Op::Message, sender_id).await),
            }
        }
        let provider_id = self.resolve(&account_id, sender_id, to.profile_url).await?;
        let fields = [
            ("account_id", account_id.as_str()),
            ("attendees_ids", provider_id.as_str()),
            ("text", text),
        ];
        self.start_chat(&to, &provider_id, &fields, Op::Message)
            .await
    }

    async fn send_inmail(
        &self,
        to: Outbound<'_>,
        subject: &str,
        text: &str,
    ) -> Result<Sent, NetworkError> {
        if text.chars().count() > crate::network::MAX_INMAIL_CHARS {
            return Err(NetworkError::TooLong {
                limit: crate::network::MAX_INMAIL_CHARS,
            });
        }
        if subject.chars().count() > crate::network::MAX_SUBJECT_CHARS {
            return Err(NetworkError::TooLong {
                limit: crate::network::MAX_SUBJECT_CHARS,
            });
        }
        let sender_id = to.account.sender_id;
        let account_id = self.account_id(to.account).await?;
        let provider_id = self.resolve(&account_id, sender_id, to.profile_url).await?;
        // Unipile's "start a chat" with its InMail switch: the classic API, a subject, one
        // attendee who need not be a connection.
        let fields = [
            ("account_id", account_id.as_str()),
            ("attendees_ids", provider_id.as_str()),
            ("subject", subject),
            ("text", text),
            ("linkedin[api]", "classic"),
            ("linkedin[inmail]", "true"),
        ];
        self.start_chat(&to, &provider_id, &fields, Op::Inmail)
            .await
    }

    async fn list_messages(
        &self,
        account: Account<'_>,
        since_ms: i64,
    ) -> Result<Vec<ChatMessage>, NetworkError> {
        let account_id = self.account_id(account).await?;
        let found = self
            .messages_after(&account_id, account.sender_id, since_ms)
            .await?;
        let mut messages = Vec::new();
        for (chat, message) in found {
            let Some(attendee) = chat.get("attendee_provider_id").and_then(Value::as_str) else {
                continue;
            };
            let Some(profile_url) = self.profile_url_of(account.sender_id, attendee).await? else {
                continue;
            };
            let outbound = message.get("is_sender").is_some_and(truthy);
            messages.push(ChatMessage {
                provider_message_id: message
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                sender_id: account.sender_id.to_owned(),
                profile_url,
                direction: if outbound {
                    ChatDirection::Outbound
                } else {
                    ChatDirection::Inbound
                },
                text: message
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                at_ms: timestamp_ms(&message).unwrap_or(since_ms),
            });
        }
        Ok(messages)
    }

    async fn account_status(&self, account: Account<'_>) -> Result<AccountStatus, NetworkError> {
        let account_id = match self.account_id(account).await {
            Ok(id) => id,
            Err(NetworkError::AccountDisconnected) => return Ok(AccountStatus::Disconnected),
            Err(error) => return Err(error),
        };
        let answer = match self
            .client
            .get(&format!("/accounts/{}", encode(&account_id)), &[])
            .await
        {
            Ok(answer) => answer,
            Err(failure) => return Err(self.fail(failure, Op::Read, account.sender_id).await),
        };
        let status = answer
            .get("sources")
            .and_then(Value::as_array)
            .and_then(|sources| sources.first())
            .and_then(|source| source.get("status"))
            .and_then(Value::as_str)
            .unwrap_or("OK");
        Ok(inbox::account_status_of(status).map_or(AccountStatus::Connected, |(status, _)| status))
    }

    async fn find_outbound(
        &self,
        account: Account<'_>,
        intent: &str,
    ) -> Result<Option<OutboundRecord>, NetworkError> {
        let row = sqlx::query(
            "select i.kind, i.text, i.created_at, p.profile_url from outbound_intents i \
             left join prospects p on p.id = i.prospect_id where i.id = $1",
        )
        .bind(intent)
        .fetch_optional(self.db.pool())
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let kind = OutboundKind::from_db(&row.try_get::<String, _>("kind")?)?;
        let text: Option<String> = row.try_get("text")?;
        let created_at: i64 = row.try_get("created_at")?;
        let Some(profile_url) = row.try_get::<Option<String>, _>("profile_url")? else {
            return Ok(None);
        };
        let sender_id = account.sender_id;
        let account_id = self.account_id(account).await?;
        let now = self.now();
        match kind {
            // A view is not a message and cannot be looked up: one that may have happened counts
            // as done, so no one is visited twice.
            OutboundKind::ProfileView => Ok(done(kind, None, now)),
            OutboundKind::Invitation | OutboundKind::Withdrawal => {
                let provider_id = self.resolve(&account_id, sender_id, &profile_url).await?;
                let public = public_id(&profile_url)?;
                let pending = self.pending_invitations(&account_id, sender_id).await?;
                let invitation = pending
                    .iter()
                    .find(|item| names(item, INVITATION_ID_FIELDS, &provider_id, &public));
                if kind == OutboundKind::Withdrawal {
                    // Still pending: the withdrawal did not happen.
                    return Ok(match invitation {
                        Some(_) => None,
                        None => done(kind, None, now),
                    });
                }
                if let Some(invitation) = invitation {
                    let id = invitation.get("id").and_then(Value::as_str);
                    self.remember(sender_id, &profile_url, &provider_id, Some(id), None)
                        .await?;
                    return Ok(done(kind, id.map(str::to_owned), now));
                }
                let relations = self.relations(&account_id, sender_id, 10).await?;
                let related = relations
                    .iter()
                    .any(|item| names(item, RELATION_ID_FIELDS, &provider_id, &public));
                Ok(if related { done(kind, None, now) } else { None })
            }
            // An InMail opens a chat of its own: it is found among the person's chats' messages
            // by its text, as a message is.
            OutboundKind::Message | OutboundKind::Inmail => {
                let text = text.unwrap_or_default();
                let provider_id = self.resolve(&account_id, sender_id, &profile_url).await?;
                let chat_id = self.known(sender_id, &profile_url).await?.chat_id;
                self.find_message(
                    &account_id,
                    sender_id,
                    (&provider_id, chat_id.as_deref()),
                    &text,
                    created_at - RECONCILE_MARGIN_MS,
                )
                .await
            }
        }
    }

    async fn poll(
        &self,
        conn: &mut sqlx::AnyConnection,
        workspace_id: &str,
    ) -> Result<Vec<InboundEvent>, NetworkError> {
        inbox::hand_over(conn, self.now(), workspace_id)
            .await
            .map_err(NetworkError::from)
    }
}
