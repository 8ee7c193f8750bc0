//! The sandbox: a simulated professional network stored in our own database.
//!
//! It behaves like the real network in the ways outreach must handle: invitations are accepted
//! after some hours or never, some connections reply to the first message (a few with an
//! out-of-office text), a withdrawn person cannot be invited again for three weeks, messages go
//! to connections only, the account has its own daily caps, and an account can be disconnected
//! or restricted. Who accepts, when, and who replies is decided by [`fate`] from the seed
//! (`OUTREACH_SANDBOX_SEED`) and the normalised profile URL alone, so a run can be repeated.
//!
//! Every outbound call is one transaction: its effect and its line in `sandbox_log` (with the
//! caller's intent token, and the outcome, a refusal included) commit together, so the log is
//! the sandbox's truth and reconciliation ([`Sandbox::find_outbound`]) answers from it.
//!
//! Time moves only through the [`Clock`]. An acceptance or a reply "happens" when its time has
//! come: reads treat an invitation whose acceptance time passed as a connection, and
//! [`Sandbox::take_due`] (the sandbox's `poll`) marks what fell due and hands it over in the
//! caller's transaction, as a real provider's late signal would arrive.

use outreach_runtime::prelude::{ApiError, Backend, Clock, Db, ids};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{
    Account, AccountStatus, ChatDirection, ChatMessage, ConnectionState, InboundEvent,
    MAX_MESSAGE_CHARS, MAX_NOTE_CHARS, NetworkError, NetworkProvider, OUTCOME_OK, Outbound,
    OutboundKind, OutboundRecord, Sent, Viewed,
};

/// One outbound call's own transaction: the sandbox is the other side of the network, so it
/// commits on its own, never inside the caller's.
type Tx = sqlx::Transaction<'static, sqlx::Any>;

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;

/// How long a withdrawn person cannot be invited again, as on the real network.
pub const RESEND_AFTER_MS: i64 = 21 * DAY_MS;

/// The sandbox's own caps per sender over the last 24 hours (the network's, not ours: the
/// sender's limits are stricter and checked before anything reaches a network).
pub const INVITATIONS_PER_DAY: i64 = 100;
pub const MESSAGES_PER_DAY: i64 = 150;
pub const PROFILE_VIEWS_PER_DAY: i64 = 250;

/// Shares, in per mille, of the simulated population.
const UNREACHABLE_PER_MILLE: u64 = 20;
const ACCEPTS_PER_MILLE: u64 = 400;
const REPLIES_PER_MILLE: u64 = 250;
/// Of the replies, how many are an out-of-office answer.
const OUT_OF_OFFICE_PER_MILLE: u64 = 200;

/// The auto-reply of an absent person.
pub const OUT_OF_OFFICE_TEXT: &str = "Thank you for your message. I am out of the office with limited access to messages \
    and will get back to you when I return.";

const REPLY_TEXTS: [&str; 4] = [
    "Thanks for reaching out, happy to chat. What did you have in mind?",
    "Interesting, could you send me more details?",
    "Not interested at the moment, thanks.",
    "Thanks! Let's find a time next week.",
];

/// What the simulated network holds in store for one person, whoever invites them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fate {
    /// The profile cannot be reached: every invitation and message is refused.
    pub unreachable: bool,
    /// How long after an invitation it is accepted; `None`: never.
    pub accepts_after_ms: Option<i64>,
    /// How long after the sender's first message the person replies; `None`: never.
    pub replies_after_ms: Option<i64>,
    /// The reply's text (an out-of-office answer for some).
    pub reply_text: Option<&'static str>,
}

/// FNV-1a over the seed and the URL, then splitmix64 for each further draw: stable across
/// platforms and Rust versions, unlike the standard library's hasher.
struct Draws(u64);

impl Draws {
    fn new(seed: u64, profile_url: &str) -> Self {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in seed.to_le_bytes().iter().chain(profile_url.as_bytes()) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        Self(hash)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn per_mille(&mut self) -> u64 {
        self.next() % 1000
    }

    /// A duration of `min_hours` to `max_hours`, to the minute.
    fn hours(&mut self, min_hours: i64, max_hours: i64) -> i64 {
        let span_minutes = (max_hours - min_hours) * 60;
        let minutes =
            i64::try_from(self.next() % u64::try_from(span_minutes + 1).unwrap_or(1)).unwrap_or(0);
        min_hours * HOUR_MS + minutes * 60_000
    }
}

/// The fate of the person at `profile_url` under `seed`: the same inputs always give the same
/// fate. About 2% are unreachable; 40% accept an invitation after 2 to 72 hours; a quarter of
/// those reply to the first message after 1 to 48 hours, one in five of them out of office.
pub fn fate(seed: u64, profile_url: &str) -> Fate {
    let mut draws = Draws::new(seed, profile_url);
    let unreachable = draws.per_mille() < UNREACHABLE_PER_MILLE;
    let accepts = draws.per_mille() < ACCEPTS_PER_MILLE;
    let accept_delay = draws.hours(2, 72);
    let replies = draws.per_mille() < REPLIES_PER_MILLE;
    let reply_delay = draws.hours(1, 48);
    let out_of_office = draws.per_mille() < OUT_OF_OFFICE_PER_MILLE;
    let text = REPLY_TEXTS[usize::try_from(draws.next() % REPLY_TEXTS.len() as u64).unwrap_or(0)];
    let replies = replies && !unreachable;
    Fate {
        unreachable,
        accepts_after_ms: (accepts && !unreachable).then_some(accept_delay),
        replies_after_ms: replies.then_some(reply_delay),
        reply_text: replies.then_some(if out_of_office {
            OUT_OF_OFFICE_TEXT
        } else {
            text
        }),
    }
}

/// The simulated network over a database and a clock.
#[derive(Debug, Clone)]
pub struct Sandbox {
    db: Db,
    clock: Clock,
    seed: u64,
}

/// A sender-person relation as stored.
#[derive(Debug, Clone, Default)]
pub(crate) struct Relation {
    pub state: String,
    pub accept_at: Option<i64>,
    pub withdrawn_at: Option<i64>,
    pub reply_at: Option<i64>,
    pub reply_text: Option<String>,
}

impl Relation {
    fn from_row(row: &AnyRow) -> Result<Self, sqlx::Error> {
        Ok(Self {
            state: row.try_get("state")?,
            accept_at: row.try_get("accept_at")?,
            withdrawn_at: row.try_get("withdrawn_at")?,
            reply_at: row.try_get("reply_at")?,
            reply_text: row.try_get("reply_text")?,
        })
    }

    /// The state as the network shows it at `now`: an invitation whose acceptance time passed is
    /// a connection, whether or not a poll has written it yet.
    pub fn state_at(&self, now_ms: i64) -> ConnectionState {
        match self.state.as_str() {
            "connected" => ConnectionState::Connected,
            "pending" if self.accept_at.is_some_and(|at| at <= now_ms) => {
                ConnectionState::Connected
            }
            "pending" => ConnectionState::Pending,
            _ => ConnectionState::NotConnected,
        }
    }
}

/// Reads the relation of a sender and a person (`None`: they never met on the network).
pub(crate) async fn relation(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    sender_id: &str,
    profile_url: &str,
) -> Result<Option<Relation>, sqlx::Error> {
    sqlx::query(
        "select state, accept_at, withdrawn_at, reply_at, reply_text from sandbox_connections \
         where workspace_id = $1 and sender_id = $2 and profile_url = $3",
    )
    .bind(workspace_id)
    .bind(sender_id)
    .bind(profile_url)
    .fetch_optional(conn)
    .await?
    .as_ref()
    .map(Relation::from_row)
    .transpose()
}

/// The account's status; an account the sandbox never saw is connected.
pub(crate) async fn stored_status(
    conn: &mut sqlx::AnyConnection,
    account: Account<'_>,
) -> Result<AccountStatus, NetworkError> {
    let row = sqlx::query(
        "select status from sandbox_accounts where workspace_id = $1 and sender_id = $2",
    )
    .bind(account.workspace_id)
    .bind(account.sender_id)
    .fetch_optional(conn)
    .await?;
    match row {
        Some(row) => Ok(AccountStatus::from_db(
            &row.try_get::<String, _>("status")?,
        )?),
        None => Ok(AccountStatus::Connected),
    }
}

fn refuse_unusable(status: AccountStatus) -> Result<(), NetworkError> {
    match status {
        AccountStatus::Connected => Ok(()),
        AccountStatus::NeedsReauth | AccountStatus::Disconnected => {
            Err(NetworkError::AccountDisconnected)
        }
        AccountStatus::Restricted => Err(NetworkError::AccountRestricted),
    }
}

/// Writes (or rewrites) a sender-person relation.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn put_relation(
    conn: &mut sqlx::AnyConnection,
    to: &Outbound<'_>,
    state: &str,
    invited_at: Option<i64>,
    accept_at: Option<i64>,
    connected_at: Option<i64>,
    withdrawn_at: Option<i64>,
    now_ms: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "insert into sandbox_connections (workspace_id, sender_id, profile_url, prospect_id, state, invited_at, accept_at, \
         connected_at, withdrawn_at, updated_at) values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
         on conflict (workspace_id, sender_id, profile_url) do update set \
         prospect_id = coalesce(excluded.prospect_id, sandbox_connections.prospect_id), state = excluded.state, \
         invited_at = coalesce(excluded.invited_at, sandbox_connections.invited_at), accept_at = excluded.accept_at, \
         connected_at = coalesce(excluded.connected_at, sandbox_connections.connected_at), \
         withdrawn_at = coalesce(excluded.withdrawn_at, sandbox_connections.withdrawn_at), updated_at = excluded.updated_at",
    )
    .bind(to.account.workspace_id)
    .bind(to.account.sender_id)
    .bind(to.profile_url)
    .bind(to.prospect_id)
    .bind(state)
    .bind(invited_at)
    .bind(accept_at)
    .bind(connected_at)
    .bind(withdrawn_at)
    .bind(now_ms)
    .execute(conn)
    .await?;
    Ok(())
}

/// One line of `sandbox_log`.
struct LogLine<'a> {
    kind: OutboundKind,
    text: Option<&'a str>,
    outcome: &'a str,
    provider_message_id: Option<&'a str>,
}

async fn write_log(
    conn: &mut sqlx::AnyConnection,
    to: &Outbound<'_>,
    line: LogLine<'_>,
    now_ms: i64,
) -> Result<String, sqlx::Error> {
    let id = ids::new_id("sbx");
    sqlx::query(
        "insert into sandbox_log (id, workspace_id, sender_id, prospect_id, profile_url, kind, text, outcome, intent_token, \
         provider_message_id, at) values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(&id)
    .bind(to.account.workspace_id)
    .bind(to.account.sender_id)
    .bind(to.prospect_id)
    .bind(to.profile_url)
    .bind(line.kind.as_str())
    .bind(line.text)
    .bind(line.outcome)
    .bind(to.intent)
    .bind(line.provider_message_id)
    .bind(now_ms)
    .execute(conn)
    .await?;
    Ok(id)
}

/// Refuses a call over the sandbox's own cap: `cap` successful calls of `kind` by the sender in
/// the 24 hours before `now`; the refusal lifts when the oldest of them is a day old.
async fn check_cap(
    conn: &mut sqlx::AnyConnection,
    account: Account<'_>,
    kind: OutboundKind,
    cap: i64,
    now_ms: i64,
) -> Result<(), NetworkError> {
    let row = sqlx::query(
        "select count(*) as n, min(at) as oldest from sandbox_log \
         where workspace_id = $1 and sender_id = $2 and kind = $3 and outcome = $4 and at > $5",
    )
    .bind(account.workspace_id)
    .bind(account.sender_id)
    .bind(kind.as_str())
    .bind(OUTCOME_OK)
    .bind(now_ms - DAY_MS)
    .fetch_one(conn)
    .await?;
    let count: i64 = row.try_get("n")?;
    if count < cap {
        return Ok(());
    }
    let oldest: Option<i64> = row.try_get("oldest")?;
    Err(NetworkError::LimitExceeded {
        retry_at_ms: oldest.map(|at| at + DAY_MS),
    })
}

impl Sandbox {
    pub fn new(db: Db, clock: Clock, seed: u64) -> Self {
        Self { db, clock, seed }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Begins one outbound call: its transaction, the time, and whether the account may act.
    /// An account made slow with `sandbox_set_latency` waits first, as a call to a slow provider
    /// would before it reaches the network.
    async fn begin(
        &self,
        account: Account<'_>,
    ) -> Result<(Tx, i64, Result<(), NetworkError>), NetworkError> {
        let latency = sqlx::query(
            "select latency_ms from sandbox_accounts where workspace_id = $1 and sender_id = $2 and latency_ms > 0",
        )
        .bind(account.workspace_id)
        .bind(account.sender_id)
        .fetch_optional(self.db.pool())
        .await?;
        if let Some(row) = latency {
            let ms: i64 = row.try_get("latency_ms")?;
            tokio::time::sleep(std::time::Duration::from_millis(ms.unsigned_abs())).await;
        }
        let mut tx = self.db.begin_write().await?;
        let now = self.clock.now_ms();
        let usable = refuse_unusable(stored_status(&mut tx, account).await?);
        Ok((tx, now, usable))
    }

    /// Ends one outbound call: its effect (already written in `tx` if `decided` is a success)
    /// and its log line, a refusal's included, commit together. A fault of ours (`Transient`)
    /// is not a refusal of the network's: it is not logged and nothing commits.
    async fn finish(
        mut tx: Tx,
        to: &Outbound<'_>,
        line: (OutboundKind, Option<&str>),
        decided: Result<Option<String>, NetworkError>,
        now: i64,
    ) -> Result<Sent, NetworkError> {
        if let Err(error @ NetworkError::Transient(_)) = decided {
            return Err(error);
        }
        let outcome = match &decided {
            Ok(_) => OUTCOME_OK,
            Err(error) => error.code().as_str(),
        };
        let provider_message_id = decided.as_ref().ok().and_then(Option::as_deref);
        let log_id = write_log(
            &mut tx,
            to,
            LogLine {
                kind: line.0,
                text: line.1,
                outcome,
                provider_message_id,
            },
            now,
        )
        .await?;
        tx.commit().await?;
        decided.map(|provider_id| Sent {
            provider_id: provider_id.unwrap_or(log_id),
            at_ms: now,
        })
    }

    /// The earliest moment after `after_ms` at which something the sandbox's people do falls
    /// due (an acceptance or a reply, in any workspace); `None` when nothing waits. The test
    /// clock's play-out stops there, so each happens at its own time.
    pub async fn next_due_after(db: &Db, after_ms: i64) -> Result<Option<i64>, ApiError> {
        let row = sqlx::query(
            "select min(accept_at) as accept_at, min(reply_at) as reply_at from ( \
               select case when state = 'pending' and accept_at > $1 then accept_at end as accept_at, \
                 case when reply_at > $1 then reply_at end as reply_at \
               from sandbox_connections) as due",
        )
        .bind(after_ms)
        .fetch_one(db.pool())
        .await?;
        let accept_at: Option<i64> = row.try_get("accept_at")?;
        let reply_at: Option<i64> = row.try_get("reply_at")?;
        Ok([accept_at, reply_at].into_iter().flatten().min())
    }

    /// The workspaces with an acceptance or a reply due by `now_ms` and not yet handed over.
    pub async fn workspaces_due(db: &Db, now_ms: i64) -> Result<Vec<String>, ApiError> {
        let rows = sqlx::query(
            "select distinct workspace_id from sandbox_connections \
             where (state = 'pending' and accept_at <= $1) or reply_at <= $1 order by workspace_id",
        )
        .bind(now_ms)
        .fetch_all(db.pool())
        .await?;
        rows.iter()
            .map(|row| Ok(row.try_get("workspace_id")?))
            .collect()
    }

    /// Marks what fell due by `now` for the workspace, in the caller's transaction, and hands
    /// the events over: invitations accepted, then replies. Two pollers at once cannot hand an
    /// event over twice: each change is a compare-and-set on the row. The people concerned
    /// are locked first, all at once (see `person_lock`), since the caller applies the events to
    /// their outreach state in this transaction.
    pub async fn take_due(
        &self,
        tx: &mut sqlx::AnyConnection,
        workspace_id: &str,
    ) -> Result<Vec<InboundEvent>, ApiError> {
        let now = self.clock.now_ms();
        let mut events = Vec::new();
        let accepted = sqlx::query(
            "select sender_id, profile_url, accept_at from sandbox_connections \
             where workspace_id = $1 and state = 'pending' and accept_at <= $2 order by accept_at",
        )
        .bind(workspace_id)
        .bind(now)
        .fetch_all(&mut *tx)
        .await?;
        let replies = sqlx::query(
            "select sender_id, profile_url, reply_at, reply_text from sandbox_connections \
             where workspace_id = $1 and reply_at <= $2 order by reply_at",
        )
        .bind(workspace_id)
        .bind(now)
        .fetch_all(&mut *tx)
        .await?;
        lock_recipients(tx, workspace_id, accepted.iter().chain(&replies)).await?;
        for row in accepted {
            let sender_id: String = row.try_get("sender_id")?;
            let profile_url: String = row.try_get("profile_url")?;
            let at: i64 = row.try_get("accept_at")?;
            let changed = sqlx::query(
                "update sandbox_connections set state = 'connected', connected_at = accept_at, updated_at = $4 \
                 where workspace_id = $1 and sender_id = $2 and profile_url = $3 and state = 'pending'",
            )
            .bind(workspace_id)
            .bind(&sender_id)
            .bind(&profile_url)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            if changed.rows_affected() == 1 {
                let event = InboundEvent::InvitationAccepted {
                    sender_id,
                    profile_url,
                    at_ms: at,
                };
                events.push(event);
            }
        }
        for row in replies {
            let sender_id: String = row.try_get("sender_id")?;
            let profile_url: String = row.try_get("profile_url")?;
            let at: i64 = row.try_get("reply_at")?;
            let text: Option<String> = row.try_get("reply_text")?;
            let changed = sqlx::query(
                "update sandbox_connections set reply_at = null, updated_at = $5 \
                 where workspace_id = $1 and sender_id = $2 and profile_url = $3 and reply_at = $4",
            )
            .bind(workspace_id)
            .bind(&sender_id)
            .bind(&profile_url)
            .bind(at)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            if changed.rows_affected() == 1 {
                let message = insert_message(
                    tx,
                    workspace_id,
                    &sender_id,
                    &profile_url,
                    ChatDirection::Inbound,
                    text.as_deref().unwrap_or_default(),
                    at,
                    None,
                )
                .await?;
                let event = InboundEvent::MessageReceived {
                    sender_id,
                    profile_url,
                    text: message.text,
                    at_ms: at,
                    provider_message_id: message.provider_message_id,
                };
                events.push(event);
            }
        }
        Ok(events)
    }
}

/// Stores one message of a chat.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn insert_message(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    sender_id: &str,
    profile_url: &str,
    direction: ChatDirection,
    text: &str,
    at_ms: i64,
    intent: Option<&str>,
) -> Result<ChatMessage, sqlx::Error> {
    let id = ids::new_id("sbm");
    sqlx::query(
        "insert into sandbox_messages (id, workspace_id, sender_id, profile_url, direction, text, at, intent_token) \
         values ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(&id)
    .bind(workspace_id)
    .bind(sender_id)
    .bind(profile_url)
    .bind(direction.as_str())
    .bind(text)
    .bind(at_ms)
    .bind(intent)
    .execute(conn)
    .await?;
    Ok(ChatMessage {
        provider_message_id: id,
        sender_id: sender_id.to_owned(),
        profile_url: profile_url.to_owned(),
        direction,
        text: text.to_owned(),
        at_ms,
    })
}

/// Locks every recipient of the due events (rows with `profile_url`) before any event is
/// delivered, all at once in id order (see `person_lock`): delivering one locks that person,
/// and locking them one by one would cross a stop that locks both in id order. PostgreSQL only,
/// as the lock itself.
async fn lock_recipients(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    rows: impl Iterator<Item = &AnyRow>,
) -> Result<(), ApiError> {
    if Backend::of(conn) != Backend::Postgres {
        return Ok(());
    }
    let mut urls = Vec::new();
    for row in rows {
        urls.push(row.try_get::<String, _>("profile_url")?);
    }
    if urls.is_empty() {
        return Ok(());
    }
    // A profile URL holds no line break: the list is one bind.
    let people: Vec<String> = sqlx::query_scalar(
        "select id from prospects where workspace_id = $1 and profile_url = any(string_to_array($2, chr(10)))",
    )
    .bind(workspace_id)
    .bind(urls.join("\n"))
    .fetch_all(&mut *conn)
    .await?;
    crate::person_lock::lock(conn, workspace_id, people.iter().map(String::as_str)).await?;
    Ok(())
}

/// The decisions and effects of each call, inside its transaction; `Ok(Some(id))` names what
/// the network made (a message id).
async fn view_in(
    conn: &mut sqlx::AnyConnection,
    to: &Outbound<'_>,
    fate: &Fate,
    now: i64,
) -> Result<ConnectionState, NetworkError> {
    if fate.unreachable {
        return Err(NetworkError::Unreachable);
    }
    check_cap(
        conn,
        to.account,
        OutboundKind::ProfileView,
        PROFILE_VIEWS_PER_DAY,
        now,
    )
    .await?;
    let found = relation(
        conn,
        to.account.workspace_id,
        to.account.sender_id,
        to.profile_url,
    )
    .await?;
    Ok(found.map_or(ConnectionState::NotConnected, |found| found.state_at(now)))
}

async fn invite_in(
    conn: &mut sqlx::AnyConnection,
    to: &Outbound<'_>,
    note: Option<&str>,
    fate: &Fate,
    now: i64,
) -> Result<Option<String>, NetworkError> {
    if note.is_some_and(|note| note.chars().count() > MAX_NOTE_CHARS) {
        return Err(NetworkError::TooLong {
            limit: MAX_NOTE_CHARS,
        });
    }
    let found = relation(
        conn,
        to.account.workspace_id,
        to.account.sender_id,
        to.profile_url,
    )
    .await?;
    if let Some(found) = &found {
        match found.state_at(now) {
            ConnectionState::Pending => return Err(NetworkError::AlreadyInvited),
            ConnectionState::Connected => return Err(NetworkError::AlreadyConnected),
            ConnectionState::NotConnected => {}
        }
        if let Some(withdrawn_at) = found.withdrawn_at
            && now < withdrawn_at + RESEND_AFTER_MS
        {
            return Err(NetworkError::CannotResendYet {
                retry_at_ms: withdrawn_at + RESEND_AFTER_MS,
            });
        }
    }
    if fate.unreachable {
        return Err(NetworkError::Unreachable);
    }
    check_cap(
        conn,
        to.account,
        OutboundKind::Invitation,
        INVITATIONS_PER_DAY,
        now,
    )
    .await?;
    let accept_at = fate.accepts_after_ms.map(|after| now + after);
    put_relation(conn, to, "pending", Some(now), accept_at, None, None, now).await?;
    Ok(None)
}

async fn withdraw_in(
    conn: &mut sqlx::AnyConnection,
    to: &Outbound<'_>,
    now: i64,
) -> Result<Option<String>, NetworkError> {
    let found = relation(
        conn,
        to.account.workspace_id,
        to.account.sender_id,
        to.profile_url,
    )
    .await?;
    match found.map(|found| found.state_at(now)) {
        Some(ConnectionState::Pending) => {}
        Some(ConnectionState::Connected) => return Err(NetworkError::AlreadyConnected),
        _ => return Err(NetworkError::NotInvited),
    }
    // The three weeks count from the latest withdrawal.
    put_relation(conn, to, "withdrawn", None, None, None, Some(now), now).await?;
    Ok(None)
}

async fn message_in(
    conn: &mut sqlx::AnyConnection,
    to: &Outbound<'_>,
    text: &str,
    fate: &Fate,
    now: i64,
) -> Result<Option<String>, NetworkError> {
    if text.chars().count() > MAX_MESSAGE_CHARS {
        return Err(NetworkError::TooLong {
            limit: MAX_MESSAGE_CHARS,
        });
    }
    if fate.unreachable {
        return Err(NetworkError::Unreachable);
    }
    let found = relation(
        conn,
        to.account.workspace_id,
        to.account.sender_id,
        to.profile_url,
    )
    .await?;
    let Some(found) = found.filter(|found| found.state_at(now) == ConnectionState::Connected)
    else {
        return Err(NetworkError::NotConnected);
    };
    check_cap(
        conn,
        to.account,
        OutboundKind::Message,
        MESSAGES_PER_DAY,
        now,
    )
    .await?;
    let message = insert_message(
        conn,
        to.account.workspace_id,
        to.account.sender_id,
        to.profile_url,
        ChatDirection::Outbound,
        text,
        now,
        Some(to.intent),
    )
    .await?;
    if found.reply_at.is_none() && found.reply_text.is_none() {
        reply_later(conn, to, fate, now).await?;
    }
    Ok(Some(message.provider_message_id))
}

/// The person answers the sender's first message (or InMail) only, once, if their fate says so:
/// the reply's time and text go on their relation, for polling to deliver.
async fn reply_later(
    conn: &mut sqlx::AnyConnection,
    to: &Outbound<'_>,
    fate: &Fate,
    now: i64,
) -> Result<(), sqlx::Error> {
    let (Some(after), Some(reply)) = (fate.replies_after_ms, fate.reply_text) else {
        return Ok(());
    };
    sqlx::query(
        "update sandbox_connections set reply_at = $4, reply_text = $5 \
         where workspace_id = $1 and sender_id = $2 and profile_url = $3",
    )
    .bind(to.account.workspace_id)
    .bind(to.account.sender_id)
    .bind(to.profile_url)
    .bind(now + after)
    .bind(reply)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// An InMail: it needs the account's InMail credits (a sandbox account has none until
/// [`set_inmail_credits`] gives it some: null is an account that cannot send InMail at all), and
/// spends one. The person need not be a connection; one who replies to messages replies to it
/// as to a first message, when the sender had written to them before through no other channel.
async fn inmail_in(
    conn: &mut sqlx::AnyConnection,
    to: &Outbound<'_>,
    subject: &str,
    text: &str,
    fate: &Fate,
    now: i64,
) -> Result<Option<String>, NetworkError> {
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
    let credits: Option<i64> = sqlx::query_scalar(
        "select inmail_credits from sandbox_accounts where workspace_id = $1 and sender_id = $2",
    )
    .bind(to.account.workspace_id)
    .bind(to.account.sender_id)
    .fetch_optional(&mut *conn)
    .await?
    .flatten();
    match credits {
        None => return Err(NetworkError::NotAllowedInmail),
        Some(credits) if credits <= 0 => return Err(NetworkError::InsufficientCredits),
        Some(_) => {}
    }
    if fate.unreachable {
        return Err(NetworkError::Unreachable);
    }
    sqlx::query(
        "update sandbox_accounts set inmail_credits = inmail_credits - 1, updated_at = $3          where workspace_id = $1 and sender_id = $2",
    )
    .bind(to.account.workspace_id)
    .bind(to.account.sender_id)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    let message = insert_message(
        conn,
        to.account.workspace_id,
        to.account.sender_id,
        to.profile_url,
        ChatDirection::Outbound,
        &format!("{subject}\n\n{text}"),
        now,
        Some(to.intent),
    )
    .await?;
    let found = relation(
        conn,
        to.account.workspace_id,
        to.account.sender_id,
        to.profile_url,
    )
    .await?;
    if found.is_none() {
        put_relation(conn, to, "none", None, None, None, None, now).await?;
    }
    if found.is_none_or(|found| found.reply_at.is_none() && found.reply_text.is_none()) {
        reply_later(conn, to, fate, now).await?;
    }
    Ok(Some(message.provider_message_id))
}

/// Gives a sandbox account `credits` InMail credits (`None`: an account that cannot send InMail).
pub(crate) async fn set_inmail_credits(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    sender_id: &str,
    credits: Option<i64>,
    now_ms: i64,
) -> Result<AnyRow, ApiError> {
    Ok(sqlx::query(
        "insert into sandbox_accounts (workspace_id, sender_id, status, inmail_credits, updated_at) \
         values ($1, $2, 'connected', $3, $4) \
         on conflict (workspace_id, sender_id) do update set inmail_credits = excluded.inmail_credits, updated_at = excluded.updated_at \
         returning status, latency_ms, inmail_credits, updated_at",
    )
    .bind(workspace_id)
    .bind(sender_id)
    .bind(credits)
    .bind(now_ms)
    .fetch_one(conn)
    .await?)
}

impl NetworkProvider for Sandbox {
    async fn view_profile(&self, to: Outbound<'_>) -> Result<Viewed, NetworkError> {
        let fate = fate(self.seed, to.profile_url);
        let (mut tx, now, usable) = self.begin(to.account).await?;
        let viewed = match usable {
            Ok(()) => view_in(&mut tx, &to, &fate, now).await,
            Err(error) => Err(error),
        };
        let state = viewed.as_ref().ok().copied();
        let line = (OutboundKind::ProfileView, None);
        let sent = Self::finish(tx, &to, line, viewed.map(|_| None), now).await?;
        Ok(Viewed {
            state: state.unwrap_or(ConnectionState::NotConnected),
            at_ms: sent.at_ms,
        })
    }

    async fn invite(&self, to: Outbound<'_>, note: Option<&str>) -> Result<Sent, NetworkError> {
        let fate = fate(self.seed, to.profile_url);
        let (mut tx, now, usable) = self.begin(to.account).await?;
        let decided = match usable {
            Ok(()) => invite_in(&mut tx, &to, note, &fate, now).await,
            Err(error) => Err(error),
        };
        Self::finish(tx, &to, (OutboundKind::Invitation, note), decided, now).await
    }

    async fn withdraw(&self, to: Outbound<'_>) -> Result<Sent, NetworkError> {
        let (mut tx, now, usable) = self.begin(to.account).await?;
        let decided = match usable {
            Ok(()) => withdraw_in(&mut tx, &to, now).await,
            Err(error) => Err(error),
        };
        Self::finish(tx, &to, (OutboundKind::Withdrawal, None), decided, now).await
    }

    async fn send_message(&self, to: Outbound<'_>, text: &str) -> Result<Sent, NetworkError> {
        let fate = fate(self.seed, to.profile_url);
        let (mut tx, now, usable) = self.begin(to.account).await?;
        let decided = match usable {
            Ok(()) => message_in(&mut tx, &to, text, &fate, now).await,
            Err(error) => Err(error),
        };
        Self::finish(tx, &to, (OutboundKind::Message, Some(text)), decided, now).await
    }

    async fn send_inmail(
        &self,
        to: Outbound<'_>,
        subject: &str,
        text: &str,
    ) -> Result<Sent, NetworkError> {
        let fate = fate(self.seed, to.profile_url);
        let (mut tx, now, usable) = self.begin(to.account).await?;
        let decided = match usable {
            Ok(()) => inmail_in(&mut tx, &to, subject, text, &fate, now).await,
            Err(error) => Err(error),
        };
        Self::finish(tx, &to, (OutboundKind::Inmail, Some(text)), decided, now).await
    }

    async fn connection_state(
        &self,
        account: Account<'_>,
        profile_url: &str,
    ) -> Result<ConnectionState, NetworkError> {
        let mut conn = self.db.pool().acquire().await?;
        refuse_unusable(stored_status(&mut conn, account).await?)?;
        let now = self.clock.now_ms();
        let found = relation(
            &mut conn,
            account.workspace_id,
            account.sender_id,
            profile_url,
        )
        .await?;
        Ok(found.map_or(ConnectionState::NotConnected, |found| found.state_at(now)))
    }

    async fn list_messages(
        &self,
        account: Account<'_>,
        since_ms: i64,
    ) -> Result<Vec<ChatMessage>, NetworkError> {
        let mut conn = self.db.pool().acquire().await?;
        refuse_unusable(stored_status(&mut conn, account).await?)?;
        let rows = sqlx::query(
            "select id, profile_url, direction, text, at from sandbox_messages \
             where workspace_id = $1 and sender_id = $2 and at > $3 order by at, id",
        )
        .bind(account.workspace_id)
        .bind(account.sender_id)
        .bind(since_ms)
        .fetch_all(&mut *conn)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(ChatMessage {
                    provider_message_id: row.try_get("id")?,
                    sender_id: account.sender_id.to_owned(),
                    profile_url: row.try_get("profile_url")?,
                    direction: ChatDirection::from_db(&row.try_get::<String, _>("direction")?)?,
                    text: row.try_get("text")?,
                    at_ms: row.try_get("at")?,
                })
            })
            .collect()
    }

    async fn account_status(&self, account: Account<'_>) -> Result<AccountStatus, NetworkError> {
        let mut conn = self.db.pool().acquire().await?;
        stored_status(&mut conn, account).await
    }

    async fn find_outbound(
        &self,
        account: Account<'_>,
        intent: &str,
    ) -> Result<Option<OutboundRecord>, NetworkError> {
        let row = sqlx::query(
            "select kind, outcome, provider_message_id, id, at from sandbox_log \
             where workspace_id = $1 and sender_id = $2 and intent_token = $3 order by at desc, id desc limit 1",
        )
        .bind(account.workspace_id)
        .bind(account.sender_id)
        .bind(intent)
        .fetch_optional(self.db.pool())
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let provider_message_id: Option<String> = row.try_get("provider_message_id")?;
        let id: String = row.try_get("id")?;
        Ok(Some(OutboundRecord {
            kind: OutboundKind::from_db(&row.try_get::<String, _>("kind")?)?,
            outcome: row.try_get("outcome")?,
            provider_id: Some(provider_message_id.unwrap_or(id)),
            at_ms: row.try_get("at")?,
        }))
    }

    async fn poll(
        &self,
        conn: &mut sqlx::AnyConnection,
        workspace_id: &str,
    ) -> Result<Vec<InboundEvent>, NetworkError> {
        Ok(self.take_due(conn, workspace_id).await?)
    }
}

/// Makes a pending invitation a connection now (a test helper's acceptance).
pub(crate) async fn connect_now(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    sender_id: &str,
    profile_url: &str,
    now_ms: i64,
) -> Result<(), ApiError> {
    sqlx::query(
        "update sandbox_connections set state = 'connected', connected_at = $4, accept_at = null, updated_at = $4 \
         where workspace_id = $1 and sender_id = $2 and profile_url = $3",
    )
    .bind(workspace_id)
    .bind(sender_id)
    .bind(profile_url)
    .bind(now_ms)
    .execute(conn)
    .await?;
    Ok(())
}

/// Withdraws the sender's pending invitation to the person at once, as its owner would in the
/// network's own app (the test helper `sandbox_withdraw_invitation`): the person cannot be invited
/// again for three weeks, as after a withdrawal the service makes.
pub(crate) async fn withdraw_now(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    sender_id: &str,
    profile_url: &str,
    now_ms: i64,
) -> Result<(), ApiError> {
    sqlx::query(
        "update sandbox_connections set state = 'withdrawn', withdrawn_at = $4, accept_at = null, updated_at = $4 \
         where workspace_id = $1 and sender_id = $2 and profile_url = $3 and state = 'pending' \
         and (accept_at is null or accept_at > $4)",
    )
    .bind(workspace_id)
    .bind(sender_id)
    .bind(profile_url)
    .bind(now_ms)
    .execute(conn)
    .await?;
    Ok(())
}

/// Sets an account's status on the sandbox network; answers the account's row (`status`,
/// `latency_ms`, `updated_at`).
pub(crate) async fn set_account_status(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    sender_id: &str,
    status: AccountStatus,
    now_ms: i64,
) -> Result<AnyRow, ApiError> {
    Ok(sqlx::query(
        "insert into sandbox_accounts (workspace_id, sender_id, status, updated_at) values ($1, $2, $3, $4) \
         on conflict (workspace_id, sender_id) do update set status = excluded.status, updated_at = excluded.updated_at \
         returning status, latency_ms, inmail_credits, updated_at",
    )
    .bind(workspace_id)
    .bind(sender_id)
    .bind(status.as_str())
    .bind(now_ms)
    .fetch_one(conn)
    .await?)
}

/// Sets how long every call of an account takes to reach the sandbox network; answers the
/// account's row (`status`, `latency_ms`, `updated_at`).
pub(crate) async fn set_account_latency(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    sender_id: &str,
    latency_ms: i64,
    now_ms: i64,
) -> Result<AnyRow, ApiError> {
    Ok(sqlx::query(
        "insert into sandbox_accounts (workspace_id, sender_id, status, latency_ms, updated_at) \
         values ($1, $2, 'connected', $3, $4) \
         on conflict (workspace_id, sender_id) do update set latency_ms = excluded.latency_ms, updated_at = excluded.updated_at \
         returning status, latency_ms, inmail_credits, updated_at",
    )
    .bind(workspace_id)
    .bind(sender_id)
    .bind(latency_ms)
    .bind(now_ms)
    .fetch_one(conn)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_and_url_give_the_same_fate() {
        let url = "linkedin.com/in/ada-lovelace";
        assert_eq!(fate(7, url), fate(7, url));
        let differing = (0..200)
            .filter(|n| {
                fate(7, &format!("linkedin.com/in/p{n}"))
                    != fate(8, &format!("linkedin.com/in/p{n}"))
            })
            .count();
        assert!(
            differing > 100,
            "the seed matters: {differing} of 200 differ"
        );
    }

    #[test]
    fn the_shares_are_about_what_they_say() {
        let fates: Vec<Fate> = (0..10_000)
            .map(|n| fate(42, &format!("linkedin.com/in/person-{n}")))
            .collect();
        let accepted = fates
            .iter()
            .filter(|f| f.accepts_after_ms.is_some())
            .count();
        let unreachable = fates.iter().filter(|f| f.unreachable).count();
        let replies = fates
            .iter()
            .filter(|f| f.replies_after_ms.is_some())
            .count();
        let away = fates
            .iter()
            .filter(|f| f.reply_text == Some(OUT_OF_OFFICE_TEXT))
            .count();
        assert!((3_600..4_200).contains(&accepted), "{accepted}");
        assert!((100..300).contains(&unreachable), "{unreachable}");
        assert!((2_200..2_800).contains(&replies), "{replies}");
        assert!((300..700).contains(&away), "{away}");
        for fate in &fates {
            if let Some(after) = fate.accepts_after_ms {
                assert!((2 * HOUR_MS..=72 * HOUR_MS).contains(&after));
            }
            if let Some(after) = fate.replies_after_ms {
                assert!((HOUR_MS..=48 * HOUR_MS).contains(&after));
            }
        }
    }
}
