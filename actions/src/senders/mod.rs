//! Sender accounts: the network accounts outreach goes out from, with their hours and limits.
//!
//! A sender is what a person would trust with their own professional account, so everything about
//! it leans to safety: conservative default limits, a hard ceiling, a warm-up ramp for new accounts
//! (`limits.rs`), sends only inside working hours in the sender's own zone (`hours.rs`), and
//! `get_sender` says plainly why it is not sending right now. A new sender is `connected` on the
//! sandbox network, which accepts any account, and `pending` on Unipile until its owner signs in
//! (`network::unipile::connect`). Its status afterwards is the network's to set
//! ([`set_sender_status`]), as is a pause after a provider limit signal ([`pause_sender`]); neither is
//! an action here.
//!
//! Deleting is soft (`deleted_at`): the sender disappears from every action, but its usage rows stay
//! for the dashboard and take nothing more. A sender with live enrollments cannot be deleted.

pub mod forecast;
pub mod hours;
pub mod limits;

use jiff::tz::TimeZone;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::common::{Deleted, IdKind, json_text};
use crate::events::{self, EventType};
use crate::provider::Provider;
use outreach_runtime::prelude::{
    ApiError, Backend, Clock, Ctx, ErrorCode, JobArgs, NewJob, Page, PageParams, Timestamp, action,
    enqueue, ids, paged,
};

pub use forecast::{GAP_MS, earliest_call, next_window};
pub use hours::{Schedule, Window, WorkingHours};
pub use limits::{
    CEILING, DEFAULT_LIMITS, LimitUsage, Limits, LimitsInput, QuotaKind, QuotaRefusal, Usage,
    release_quota, restamp_quota, take_quota,
};

outreach_runtime::prelude::resource_tag!(
    "senders",
    toolset = "outreach",
    "The network accounts outreach is sent from: their status, working hours, timezone and limits."
);

pub const MAX_NAME_CHARS: usize = 200;
pub const MAX_PAUSE_REASON_CHARS: usize = 500;

/// The job that polls the network for every workspace with a sender (its handler is
/// `delivery::inbound`'s): one for the whole database, carrying nothing.
#[derive(Debug, Serialize, Deserialize)]
pub struct PollJob {}

impl JobArgs for PollJob {
    const KIND: &'static str = "network_poll";
}

outreach_runtime::prelude::text_enum! {
    /// The state of a sender's account on the network.
    pub enum SenderStatus {
        /// Signed in and able to act.
        Connected => "connected",
        /// A real provider's account not yet signed in: `connect_sender` gives the link.
        Pending => "pending",
        /// The network wants the owner to sign in again; nothing is sent until then.
        NeedsReauth => "needs_reauth",
        /// The network restricted the account; nothing is sent.
        Restricted => "restricted",
        /// The account is not connected; nothing is sent.
        Disconnected => "disconnected",
    }
}

outreach_runtime::prelude::text_enum! {
    /// Whether a sender is sending now, and if not, why.
    pub enum SendingState {
        /// Inside working hours, connected, not paused, and some limit has room.
        Sending => "sending",
        /// Outside its working hours (or it has none); `resumes_at` is the next window.
        OutsideHours => "outside_hours",
        /// Every limit is used up; `resumes_at` is the first moment one has room inside hours.
        LimitReached => "limit_reached",
        /// Paused after a provider limit signal until `paused_until`.
        Paused => "paused",
        /// Waiting for its first sign-in (`connect_sender`).
        Pending => "pending",
        /// This server has no network configured (production without one): nothing is sent.
        NoNetwork => "no_network",
        /// The network wants the owner to sign in again.
        NeedsReauth => "needs_reauth",
        /// The network restricted the account.
        Restricted => "restricted",
        /// The account is not connected.
        Disconnected => "disconnected",
    }
}

/// A sender as stored, with its zone and hours ready for scheduling; what other modules (the step
/// executor, sequences) get from [`load`].
#[derive(Debug, Clone)]
pub struct SenderRow {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub status: SenderStatus,
    /// What the provider said when it halted the account, if it did.
    pub status_reason: Option<String>,
    /// `sandbox` or `unipile`.
    pub provider: String,
    /// The account's id at the provider, once signed in.
    pub provider_account_id: Option<String>,
    /// The IANA name as stored.
    pub timezone: String,
    pub tz: TimeZone,
    pub working_hours: WorkingHours,
    pub schedule: Schedule,
    pub limits: Limits,
    pub paused_until: Option<i64>,
    pub pause_reason: Option<String>,
    pub deleted_at: Option<i64>,
    /// The last call it made to the network, refused or not: the gap is measured from here.
    pub last_action_at: Option<i64>,
    /// The latest send slot handed out in its queue (see the delivery module).
    pub queued_until: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A provider's sender never signed in, as SQL (what `SenderRow::from_row` shows as `pending`).
const NEVER_SIGNED_IN_SQL: &str =
    "provider <> 'sandbox' and provider_account_id is null and status_reason is null";

const COLUMNS: &str = "id, workspace_id, name, status, status_reason, provider, provider_account_id, timezone, working_hours, limits, paused_until, pause_reason, \
    deleted_at, last_action_at, queued_until, created_at, updated_at";

impl SenderRow {
    fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        let timezone: String = row.try_get("timezone")?;
        let working_hours: WorkingHours =
            serde_json::from_str(&row.try_get::<String, _>("working_hours")?)
                .map_err(ApiError::internal)?;
        let (working_hours, schedule) = working_hours.check()?;
        let provider: String = row.try_get("provider")?;
        let provider_account_id: Option<String> = row.try_get("provider_account_id")?;
        let status_reason: Option<String> = row.try_get("status_reason")?;
        let stored = SenderStatus::from_db(&row.try_get::<String, _>("status")?)?;
        // A provider's account never signed in is stored `disconnected` (see the migration that
        // added providers) and shown `pending`.
        let never_signed_in = provider != crate::provider::SANDBOX
            && provider_account_id.is_none()
            && status_reason.is_none()
            && stored == SenderStatus::Disconnected;
        Ok(Self {
            id: row.try_get("id")?,
            workspace_id: row.try_get("workspace_id")?,
            name: row.try_get("name")?,
            status: if never_signed_in {
                SenderStatus::Pending
            } else {
                stored
            },
            status_reason,
            provider,
            provider_account_id,
            tz: limits::stored_zone(&timezone)?,
            timezone,
            working_hours,
            schedule,
            limits: serde_json::from_str(&row.try_get::<String, _>("limits")?)
                .map_err(ApiError::internal)?,
            paused_until: row.try_get("paused_until")?,
            pause_reason: row.try_get("pause_reason")?,
            deleted_at: row.try_get("deleted_at")?,
            last_action_at: row.try_get("last_action_at")?,
            queued_until: row.try_get("queued_until")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
        })
    }
}

/// The first instant at or after `after_ms` inside the sender's working hours in its zone, DST
/// included (see `hours.rs` for gaps and repeated hours); `None` when it has no window at all.
/// Pure: jitter, limits and pauses are the caller's.
pub fn next_send_at(sender: &SenderRow, after_ms: i64) -> Option<i64> {
    hours::next_window(&sender.tz, &sender.schedule, after_ms)
}

/// Reads a sender of `workspace_id` that is not deleted, or 404.
pub async fn load(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<SenderRow, ApiError> {
    IdKind::Sender.check(id)?;
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "select {COLUMNS} from senders where workspace_id = $1 and id = $2 and deleted_at is null"
    )))
    .bind(workspace_id)
    .bind(id)
    .fetch_optional(conn)
    .await?
    .ok_or_else(|| IdKind::Sender.not_found(id))?;
    SenderRow::from_row(&row)
}

/// Reads a sender by id (deleted or not) and locks its row until `tx` ends: `FOR UPDATE` on
/// PostgreSQL; on SQLite the write transaction already holds the database.
pub async fn load_locked(tx: &mut sqlx::AnyConnection, id: &str) -> Result<SenderRow, ApiError> {
    let lock = if Backend::of(tx) == Backend::Postgres {
        " for update"
    } else {
        ""
    };
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "select {COLUMNS} from senders where id = $1{lock}"
    )))
    .bind(id)
    .fetch_optional(tx)
    .await?
    .ok_or_else(|| IdKind::Sender.not_found(id))?;
    SenderRow::from_row(&row)
}

/// Reads a sender of `workspace_id` that is not deleted, locked until `tx` ends, or 404: what
/// `update_sender` and `delete_sender` change, so a concurrent change or quota take waits.
async fn load_for_change(
    tx: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<SenderRow, ApiError> {
    IdKind::Sender.check(id)?;
    let sender = load_locked(tx, id).await?;
    if sender.workspace_id != workspace_id || sender.deleted_at.is_some() {
        return Err(IdKind::Sender.not_found(id));
    }
    Ok(sender)
}

/// Pauses a sender until `until_ms` after a provider limit signal (the step executor calls it);
/// `take_quota` refuses until then and `get_sender` shows the reason. A later pause replaces an
/// earlier one. Returns whether the sender exists.
pub async fn pause_sender(
    tx: &mut sqlx::AnyConnection,
    sender_id: &str,
    until_ms: i64,
    reason: &str,
    now_ms: i64,
) -> Result<bool, ApiError> {
    let reason: String = reason.trim().chars().take(MAX_PAUSE_REASON_CHARS).collect();
    let updated = sqlx::query(
        "update senders set paused_until = $2, pause_reason = $3, updated_at = $4 where id = $1",
    )
    .bind(sender_id)
    .bind(until_ms)
    .bind((!reason.is_empty()).then_some(reason))
    .bind(now_ms)
    .execute(tx)
    .await?;
    Ok(updated.rows_affected() > 0)
}

/// Pauses a sender until `until_ms` with `reason`, unless a pause already lasts longer: a
/// provider's own back-off after it failed, which must not shorten a limit's pause.
pub async fn extend_pause(
    tx: &mut sqlx::AnyConnection,
    sender_id: &str,
    until_ms: i64,
    reason: &str,
    now_ms: i64,
) -> Result<(), ApiError> {
    let reason: String = reason.trim().chars().take(MAX_PAUSE_REASON_CHARS).collect();
    sqlx::query(
        "update senders set paused_until = $2, pause_reason = $3, updated_at = $4 \
         where id = $1 and (paused_until is null or paused_until < $2)",
    )
    .bind(sender_id)
    .bind(until_ms)
    .bind(reason)
    .bind(now_ms)
    .execute(tx)
    .await?;
    Ok(())
}

/// Binds a sender to its account at `provider` (a finished sign-in): any halt the provider
/// reported, and any back-off, is cleared; the status is the caller's to set.
pub async fn bind_provider_account(
    tx: &mut sqlx::AnyConnection,
    sender_id: &str,
    provider: &str,
    account_id: &str,
    now_ms: i64,
) -> Result<(), ApiError> {
    sqlx::query(
        "update senders set provider = $2, provider_account_id = $3, status_reason = null, \
         paused_until = null, pause_reason = null, updated_at = $4 where id = $1",
    )
    .bind(sender_id)
    .bind(provider)
    .bind(account_id)
    .bind(now_ms)
    .execute(tx)
    .await?;
    Ok(())
}

/// Records what a provider said of a sender's account (`status_reason`; `None` clears it), and
/// unbinds the account when `unbind` (the provider deleted it).
pub async fn note_provider_status(
    tx: &mut sqlx::AnyConnection,
    sender_id: &str,
    reason: Option<&str>,
    unbind: bool,
) -> Result<(), ApiError> {
    sqlx::query(
        "update senders set status_reason = $2, \
         provider_account_id = case when $3 = 1 then null else provider_account_id end where id = $1",
    )
    .bind(sender_id)
    .bind(reason)
    .bind(i64::from(unbind))
    .execute(tx)
    .await?;
    Ok(())
}

/// Records that the sender called the network at `at_ms` (or that a call of its ended then),
/// whatever came of it: the gap before its next action counts from the latest such moment. Called
/// when the gate lets a call through and again when its outcome is known.
pub async fn note_call(
    tx: &mut sqlx::AnyConnection,
    sender_id: &str,
    at_ms: i64,
) -> Result<(), ApiError> {
    sqlx::query(
        "update senders set last_action_at = \
         case when coalesce(last_action_at, 0) > $2 then last_action_at else $2 end where id = $1",
    )
    .bind(sender_id)
    .bind(at_ms)
    .execute(tx)
    .await?;
    Ok(())
}

/// Sets a sender's account status as the network reports it (the sandbox's
/// `sandbox_set_sender_status`, later a provider's account events), with its event when it
/// changes: `sender.reconnected` back to `connected`, `sender.restricted`, and
/// `sender.disconnected` for `disconnected` and `needs_reauth` (once for a move between them).
/// Returns whether it changed.
pub async fn set_sender_status(
    tx: &mut sqlx::AnyConnection,
    sender_id: &str,
    status: SenderStatus,
    now_ms: i64,
) -> Result<bool, ApiError> {
    let kind = match status {
        SenderStatus::Connected => EventType::SenderReconnected,
        SenderStatus::Restricted => EventType::SenderRestricted,
        SenderStatus::Disconnected | SenderStatus::NeedsReauth => EventType::SenderDisconnected,
        // Never stored: a sender not yet signed in is `disconnected` with no account.
        SenderStatus::Pending => return Ok(false),
    };
    // `disconnected` and `needs_reauth` are one event: a move between them changes the status
    // and tells nothing new. Each update decides on the row as it finds it, so two at once on
    // PostgreSQL cannot both write the event.
    let disconnected = kind == EventType::SenderDisconnected;
    let noted: Option<String> = sqlx::query_scalar(
        "update senders set status = $2, updated_at = $3 where id = $1 and status <> $2 \
         and ($4 = 0 or status not in ('disconnected', 'needs_reauth')) returning workspace_id",
    )
    .bind(sender_id)
    .bind(status.as_str())
    .bind(now_ms)
    .bind(i64::from(disconnected))
    .fetch_optional(&mut *tx)
    .await?;
    let Some(workspace_id) = noted else {
        if !disconnected {
            return Ok(false);
        }
        let moved = sqlx::query(
            "update senders set status = $2, updated_at = $3 where id = $1 and status <> $2",
        )
        .bind(sender_id)
        .bind(status.as_str())
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
        return Ok(moved.rows_affected() == 1);
    };
    let data = serde_json::json!({"sender_id": sender_id, "status": status});
    events::record(tx, &workspace_id, now_ms, kind, data).await?;
    Ok(true)
}

/// The ids of the live enrollments (not finished, not failed) that send from `sender_id`.
///
/// MERGE: enrollments live in the sequences helper's branch; at merge this becomes
/// `select id from enrollments where sender_id = $1 and status in ('awaiting_approval',
/// 'scheduled', 'active', 'paused') order by created_at limit 20`. Until then no enrollment can
/// name a sender, so the answer is empty.
pub async fn live_enrollments_of(
    tx: &mut sqlx::AnyConnection,
    sender_id: &str,
) -> Result<Vec<String>, ApiError> {
    let rows = sqlx::query(
        "select id from enrollments where sender_id = $1 \
         and status in ('awaiting_approval', 'scheduled', 'active', 'paused') order by created_at, id limit 20",
    )
    .bind(sender_id)
    .fetch_all(tx)
    .await?;
    rows.iter()
        .map(|row| row.try_get("id").map_err(ApiError::from))
        .collect()
}

/// Why a sender is or is not sending now.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "SenderSendingStatus")]
pub struct SendingStatus {
    pub state: SendingState,
    /// A sentence for people: why, and until when.
    pub reason: String,
    /// When it may send again (the next window, the end of a limit or of a pause, each moved into
    /// working hours); null while sending, and when only a person can change it.
    pub resumes_at: Option<Timestamp>,
}

/// Works out whether `sender` sends at `now_ms`, given its `usage` then.
pub fn sending_status(sender: &SenderRow, usage: &Usage, now_ms: i64) -> SendingStatus {
    let status = |state, reason: String, resumes_at: Option<i64>| SendingStatus {
        state,
        reason,
        resumes_at: resumes_at.map(Timestamp),
    };
    let not_connected = match sender.status {
        SenderStatus::Connected => None,
        SenderStatus::NeedsReauth => Some(SendingState::NeedsReauth),
        SenderStatus::Restricted => Some(SendingState::Restricted),
        SenderStatus::Disconnected => Some(SendingState::Disconnected),
        SenderStatus::Pending => Some(SendingState::Pending),
    };
    if let Some(state) = not_connected {
        let reason = match (sender.status, &sender.status_reason) {
            (SenderStatus::Pending, _) => "The account is not signed in yet; open the link `connect_sender` gives, and nothing is sent until then.".to_owned(),
            (_, Some(why)) => format!(
                "The account is `{}`: {why}. Nothing is sent until it is connected again (`connect_sender`).",
                sender.status
            ),
            (_, None) => format!(
                "The account is `{}`; nothing is sent until it is connected again.",
                sender.status
            ),
        };
        return status(state, reason, None);
    }
    if let Some(refusal) = limits::standing_refusal(sender, now_ms) {
        let until = refusal.until_ms.unwrap_or(now_ms);
        return status(
            SendingState::Paused,
            refusal.reason,
            next_send_at(sender, until).or(refusal.until_ms),
        );
    }
    // A kind is blocked when one of its limits is used up; it is free again when all of them are.
    // `None`: a limit of 0, never free by itself.
    let lasts = |until: Option<i64>| until.unwrap_or(i64::MAX);
    let mut blocked: Vec<(QuotaKind, &'static str, Option<i64>)> = Vec::new();
    for (kind, field, limit) in usage.by_kind() {
        if limit.used < i64::from(limit.limit) {
            continue;
        }
        let until = limit.available_again_at.map(Timestamp::ms);
        match blocked.iter_mut().find(|(k, _, _)| *k == kind) {
            Some(entry) if lasts(entry.2) < lasts(until) => *entry = (kind, field, until),
            Some(_) => {}
            None => blocked.push((kind, field, until)),
        }
    }
    let waits = blocked
        .iter()
        .map(|(kind, field, until)| match until {
            Some(until) => format!("{kind} waits for `{field}` until {}", Timestamp(*until)),
            None => format!("{kind} is off (`{field}` is 0)"),
        })
        .collect::<Vec<_>>()
        .join("; ");
    if blocked.len() == QuotaKind::ALL.len() {
        let first = blocked.iter().filter_map(|(_, _, until)| *until).min();
        return status(
            SendingState::LimitReached,
            format!("Every limit is reached: {waits}."),
            first.map(|first| next_send_at(sender, first).unwrap_or(first)),
        );
    }
    match next_send_at(sender, now_ms) {
        None => status(
            SendingState::OutsideHours,
            "It has no working hours, so it never sends; give it some with `update_sender`."
                .to_owned(),
            None,
        ),
        Some(next) if next > now_ms => status(
            SendingState::OutsideHours,
            format!(
                "Outside its working hours in {}; the next window opens at {}.",
                sender.timezone,
                Timestamp(next)
            ),
            Some(next),
        ),
        Some(_) if blocked.is_empty() => status(
            SendingState::Sending,
            "Inside its working hours and under every limit.".to_owned(),
            None,
        ),
        Some(_) => status(
            SendingState::Sending,
            format!("Inside its working hours; {waits}."),
            None,
        ),
    }
}

/// A sender as the API shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Sender {
    pub id: String,
    pub name: String,
    /// The account's state on the network.
    pub status: SenderStatus,
    /// What the provider said when it halted the account (`ERROR`, `STOPPED`, deleted); null
    /// otherwise.
    pub status_reason: Option<String>,
    /// The network the account is on: `sandbox` or `unipile`.
    pub provider: String,
    /// The account's id at the provider once it is signed in; null before, and in the sandbox.
    pub provider_account_id: Option<String>,
    /// IANA time zone; working hours and days are in it.
    pub timezone: String,
    /// Windows per weekday in local time, each day sorted; an empty list is a day off.
    pub working_hours: WorkingHours,
    /// The configured limits.
    pub limits: Limits,
    /// The limits in force now: lower than `limits` during the warm-up.
    pub effective_limits: Limits,
    /// When the warm-up ends and `effective_limits` equal `limits`.
    pub warmup_ends_at: Timestamp,
    /// Usage today (in the sender's zone) and over the rolling 7 days, against the effective limits.
    pub usage: Usage,
    /// Whether it sends now, and if not, why and until when.
    pub sending_status: SendingStatus,
    /// Set after a provider limit signal: nothing is sent before it.
    pub paused_until: Option<Timestamp>,
    /// What the provider said when it paused the sender.
    pub pause_reason: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The API view of `row` at `now_ms`.
pub async fn view(
    conn: &mut sqlx::AnyConnection,
    row: SenderRow,
    now_ms: i64,
) -> Result<Sender, ApiError> {
    let usage = limits::usage(conn, &row, now_ms).await?;
    let sending_status = sending_status(&row, &usage, now_ms);
    Ok(Sender {
        effective_limits: row.limits.effective(row.created_at, now_ms),
        warmup_ends_at: Timestamp(limits::warmup_ends_at(row.created_at)),
        usage,
        sending_status,
        paused_until: row.paused_until.map(Timestamp),
        pause_reason: row.pause_reason,
        created_at: Timestamp(row.created_at),
        updated_at: Timestamp(row.updated_at),
        id: row.id,
        name: row.name,
        status: row.status,
        status_reason: row.status_reason,
        provider: row.provider,
        provider_account_id: row.provider_account_id,
        timezone: row.timezone,
        working_hours: row.working_hours,
        limits: row.limits,
    })
}

fn check_name(name: &str) -> Result<String, ApiError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(ApiError::invalid_request("`name` must not be empty."));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(ApiError::invalid_request(format!(
            "`name` is longer than {MAX_NAME_CHARS} characters."
        )));
    }
    Ok(name.to_owned())
}

/// The zone's canonical name, or a 400 naming what was given.
fn check_zone(name: &str) -> Result<String, ApiError> {
    let tz = hours::zone(name, "timezone")?;
    Ok(tz.iana_name().unwrap_or(name.trim()).to_owned())
}

/// The input of `create_sender`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateSenderInput {
    #[schemars(length(min = 1, max = 200), regex(pattern = crate::common::NOT_BLANK))]
    pub name: String,
    /// IANA zone (`Europe/Berlin`); hours and days count in it.
    pub timezone: String,
    /// Local windows per weekday, not overlapping; a day left out is off. Default: Mon-Fri
    /// 09:00-17:00.
    ///
    /// For example `{"monday": [{"start": "09:00", "end": "17:30"}]}`; at most 4 windows a day.
    pub working_hours: Option<WorkingHours>,
    pub limits: Option<LimitsInput>,
}

/// Create a sender account.
///
/// On Unipile it is `pending` until its owner signs in (`connect_sender`); the sandbox connects
/// at once. Limits ramp up over 14 days.
///
/// A sender is the network account sequences send from. The 14-day warm-up starts every limit at a
/// quarter on day one. Limits have conservative defaults; over the ceiling is a 400, as is a bad
/// zone or window; production without a network is 503 `network_not_configured`. Nothing is made
/// then.
#[action(scope = "write", idempotent, http = "POST /senders")]
pub async fn create_sender(ctx: Ctx, input: CreateSenderInput) -> Result<Sender, ApiError> {
    let name = check_name(&input.name)?;
    let timezone = check_zone(&input.timezone)?;
    let (working_hours, _) = input
        .working_hours
        .unwrap_or_else(WorkingHours::office)
        .check()?;
    let limits = DEFAULT_LIMITS.apply(&input.limits.unwrap_or_default())?;
    // Refused when nothing could ever be sent from it (production without a network).
    let provider = crate::provider::configured(ctx.config())?;
    // The sandbox accepts any account; a real one is not signed in until `connect_sender`'s
    // link is used (stored `disconnected` with no account: shown `pending`).
    let status = match provider {
        Provider::Sandbox => SenderStatus::Connected,
        Provider::Unipile => SenderStatus::Disconnected,
    };
    let id = ids::new_id("snd");
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    sqlx::query(
        "insert into senders (id, workspace_id, name, status, provider, timezone, working_hours, limits, created_at, updated_at) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)",
    )
    .bind(&id)
    .bind(ctx.workspace_id())
    .bind(&name)
    .bind(status.as_str())
    .bind(provider.as_str())
    .bind(&timezone)
    .bind(json_text(&working_hours)?)
    .bind(json_text(&limits)?)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    // The network is polled for this sender's acceptances and replies from now on.
    ensure_polling(&mut tx, ctx.clock()).await?;
    let row = load(&mut tx, ctx.workspace_id(), &id).await?;
    view(&mut tx, row, now).await
}

outreach_runtime::prelude::example!(create_sender,
    request: {
        "limits": {"connection_requests_per_day": 25},
        "name": "Ada Lovelace (sales)",
        "timezone": "Europe/Berlin",
        "working_hours": {
            "friday": [{"end": "15:00", "start": "09:00"}],
            "monday": [{"end": "12:00", "start": "09:00"}, {"end": "17:30", "start": "13:00"}],
            "thursday": [{"end": "17:30", "start": "09:00"}],
            "tuesday": [{"end": "17:30", "start": "09:00"}],
            "wednesday": [{"end": "17:30", "start": "09:00"}]
        }
    },
    response: {
        "created_at": "2026-11-23T18:22:30.073Z",
        "effective_limits": {
            "connection_requests_per_day": 6,
            "connection_requests_per_week": 25,
            "messages_per_day": 12,
            "profile_views_per_day": 20,
            "inmails_per_day": 2
        },
        "id": "snd_RWGJgtR51Eoiiw6ri5tT",
        "limits": {
            "connection_requests_per_day": 25,
            "connection_requests_per_week": 100,
            "messages_per_day": 50,
            "profile_views_per_day": 80,
            "inmails_per_day": 10
        },
        "name": "Ada Lovelace (sales)",
        "pause_reason": null,
        "provider": "sandbox",
        "provider_account_id": null,
        "paused_until": null,
        "sending_status": {
            "reason": "Outside its working hours in Europe/Berlin; the next window opens at 2026-11-24T08:00:00.000Z.",
            "resumes_at": "2026-11-24T08:00:00.000Z",
            "state": "outside_hours"
        },
        "status": "connected",
        "status_reason": null,
        "timezone": "Europe/Berlin",
        "updated_at": "2026-11-23T18:22:30.073Z",
        "usage": {
            "connection_requests_per_day": {"available_again_at": null, "limit": 6, "used": 0},
            "connection_requests_per_week": {"available_again_at": null, "limit": 25, "used": 0},
            "local_day": "2026-11-23",
            "messages_per_day": {"available_again_at": null, "limit": 12, "used": 0},
            "profile_views_per_day": {"available_again_at": null, "limit": 20, "used": 0},
            "inmails_per_day": {"available_again_at": null, "limit": 2, "used": 0}
        },
        "warmup_ends_at": "2026-12-07T18:22:30.073Z",
        "working_hours": {
            "friday": [{"end": "15:00", "start": "09:00"}],
            "monday": [{"end": "12:00", "start": "09:00"}, {"end": "17:30", "start": "13:00"}],
            "saturday": [],
            "sunday": [],
            "thursday": [{"end": "17:30", "start": "09:00"}],
            "tuesday": [{"end": "17:30", "start": "09:00"}],
            "wednesday": [{"end": "17:30", "start": "09:00"}]
        }
    }
);

outreach_runtime::prelude::parity!(create_sender, write,
    ok: {
        "limits": {"messages_per_day": 30},
        "name": "Second sender ${tag}",
        "timezone": "America/New_York",
        "working_hours": {"saturday": [{"end": "12:00", "start": "10:00"}]}
    },
    fails: {
        "name": "Nowhere",
        "timezone": "Mars/Olympus"
    } => INVALID_REQUEST
);

/// The input of `get_sender` and `delete_sender`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SenderId {
    /// `snd_...`
    pub id: String,
}

/// Get a sender account.
///
/// With limits, usage and `sending_status`: whether it sends now, and if not why and until when.
///
/// The warm-up shows as `effective_limits` and `warmup_ends_at`; usage counts today in the
/// sender's time zone and over the rolling 7 days, against each limit. A sender may not be
/// sending because it is outside its hours, a limit is reached, it is paused after a provider
/// limit signal, or it is not connected.
#[action(scope = "read", http = "GET /senders/{id}")]
pub async fn get_sender(ctx: Ctx, input: SenderId) -> Result<Sender, ApiError> {
    let mut conn = ctx.db().pool().acquire().await?;
    let row = load(&mut conn, ctx.workspace_id(), &input.id).await?;
    let mut sender = view(&mut conn, row, ctx.now_ms()).await?;
    no_network_said(ctx.config(), &mut sender);
    Ok(sender)
}

/// When this server has no network (production without one configured), a sender's sending
/// status says so: nothing is sent from it, whatever else holds.
fn no_network_said(config: &outreach_runtime::prelude::Config, sender: &mut Sender) {
    if let Err(error) = crate::provider::configured(config) {
        sender.sending_status = SendingStatus {
            state: SendingState::NoNetwork,
            reason: error.message,
            resumes_at: None,
        };
    }
}

outreach_runtime::prelude::example!(get_sender,
    request: {"id": "snd_RWGJgtR51Eoiiw6ri5tT"},
    response: {
        "created_at": "2026-11-23T18:22:30.073Z",
        "effective_limits": {
            "connection_requests_per_day": 6,
            "connection_requests_per_week": 25,
            "messages_per_day": 12,
            "profile_views_per_day": 20,
            "inmails_per_day": 2
        },
        "id": "snd_RWGJgtR51Eoiiw6ri5tT",
        "limits": {
            "connection_requests_per_day": 25,
            "connection_requests_per_week": 100,
            "messages_per_day": 50,
            "profile_views_per_day": 80,
            "inmails_per_day": 10
        },
        "name": "Ada Lovelace (sales)",
        "pause_reason": null,
        "provider": "sandbox",
        "provider_account_id": null,
        "paused_until": null,
        "sending_status": {
            "reason": "Outside its working hours in Europe/Berlin; the next window opens at 2026-11-24T08:00:00.000Z.",
            "resumes_at": "2026-11-24T08:00:00.000Z",
            "state": "outside_hours"
        },
        "status": "connected",
        "status_reason": null,
        "timezone": "Europe/Berlin",
        "updated_at": "2026-11-23T18:22:30.073Z",
        "usage": {
            "connection_requests_per_day": {"available_again_at": null, "limit": 6, "used": 1},
            "connection_requests_per_week": {"available_again_at": null, "limit": 25, "used": 1},
            "local_day": "2026-11-23",
            "messages_per_day": {"available_again_at": null, "limit": 12, "used": 0},
            "profile_views_per_day": {"available_again_at": null, "limit": 20, "used": 1},
            "inmails_per_day": {"available_again_at": null, "limit": 2, "used": 0}
        },
        "warmup_ends_at": "2026-12-07T18:22:30.073Z",
        "working_hours": {
            "friday": [{"end": "15:00", "start": "09:00"}],
            "monday": [{"end": "12:00", "start": "09:00"}, {"end": "17:30", "start": "13:00"}],
            "saturday": [],
            "sunday": [],
            "thursday": [{"end": "17:30", "start": "09:00"}],
            "tuesday": [{"end": "17:30", "start": "09:00"}],
            "wednesday": [{"end": "17:30", "start": "09:00"}]
        }
    }
);

outreach_runtime::prelude::parity!(get_sender, read,
    ok: {"id": "$sender"},
    fails: {"id": "$missing:snd"} => NOT_FOUND
);

/// The input of `list_senders`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListSendersInput {
    /// Only this account status.
    pub status: Option<SenderStatus>,
    #[serde(flatten)]
    pub page: PageParams,
}

/// List sender accounts, newest first.
///
/// Each as `get_sender` shows it.
///
/// Filter by account `status`. Paged with `limit` (1 to 200, default 25) and `offset`; follow
/// `next_offset` while `has_more`.
#[action(scope = "read", http = "GET /senders")]
pub async fn list_senders(ctx: Ctx, input: ListSendersInput) -> Result<Page<Sender>, ApiError> {
    let mut filter = String::from("workspace_id = $1 and deleted_at is null");
    // `pending` is stored `disconnected` (see `SenderRow::from_row`).
    let status = input.status.map(|status| match status {
        SenderStatus::Pending => SenderStatus::Disconnected.as_str(),
        other => other.as_str(),
    });
    match input.status {
        Some(SenderStatus::Pending) => {
            filter.push_str(&format!(" and status = $2 and {NEVER_SIGNED_IN_SQL}"));
        }
        Some(SenderStatus::Disconnected) => {
            filter.push_str(&format!(" and status = $2 and not ({NEVER_SIGNED_IN_SQL})"));
        }
        Some(_) => filter.push_str(" and status = $2"),
        None => {}
    }
    let rows = paged(
        ctx.db().pool(),
        input.page,
        format!("select count(*) from senders where {filter}"),
        format!(
            "select {COLUMNS} from senders where {filter} order by created_at desc, id desc limit $3 offset $4"
        ),
        |query| query.bind(ctx.workspace_id()).bind(status),
        SenderRow::from_row,
    )
    .await?;
    let now = ctx.now_ms();
    let mut conn = ctx.db().pool().acquire().await?;
    let mut items = Vec::with_capacity(rows.items.len());
    for row in rows.items {
        let mut sender = view(&mut conn, row, now).await?;
        no_network_said(ctx.config(), &mut sender);
        items.push(sender);
    }
    Ok(Page {
        total: rows.total,
        count: rows.count,
        offset: rows.offset,
        has_more: rows.has_more,
        next_offset: rows.next_offset,
        items,
    })
}

outreach_runtime::prelude::example!(list_senders,
    request: {"limit": 25, "status": "connected"},
    response: {
        "count": 1,
        "has_more": false,
        "items": [
            {
                "created_at": "2026-11-23T18:22:30.073Z",
                "effective_limits": {
                    "connection_requests_per_day": 6,
                    "connection_requests_per_week": 25,
                    "messages_per_day": 12,
                    "profile_views_per_day": 20,
                    "inmails_per_day": 2
                },
                "id": "snd_RWGJgtR51Eoiiw6ri5tT",
                "limits": {
                    "connection_requests_per_day": 25,
                    "connection_requests_per_week": 100,
                    "messages_per_day": 50,
                    "profile_views_per_day": 80,
                    "inmails_per_day": 10
                },
                "name": "Ada Lovelace (sales)",
                "pause_reason": null,
                "provider": "sandbox",
                "provider_account_id": null,
                "paused_until": null,
                "sending_status": {
                    "reason": "Outside its working hours in Europe/Berlin; the next window opens at 2026-11-24T08:00:00.000Z.",
                    "resumes_at": "2026-11-24T08:00:00.000Z",
                    "state": "outside_hours"
                },
                "status": "connected",
                "status_reason": null,
                "timezone": "Europe/Berlin",
                "updated_at": "2026-11-23T18:22:30.073Z",
                "usage": {
                    "connection_requests_per_day": {"available_again_at": null, "limit": 6, "used": 1},
                    "connection_requests_per_week": {"available_again_at": null, "limit": 25, "used": 1},
                    "local_day": "2026-11-23",
                    "messages_per_day": {"available_again_at": null, "limit": 12, "used": 0},
                    "profile_views_per_day": {"available_again_at": null, "limit": 20, "used": 1},
                    "inmails_per_day": {"available_again_at": null, "limit": 2, "used": 0}
                },
                "warmup_ends_at": "2026-12-07T18:22:30.073Z",
                "working_hours": {
                    "friday": [{"end": "15:00", "start": "09:00"}],
                    "monday": [{"end": "12:00", "start": "09:00"}, {"end": "17:30", "start": "13:00"}],
                    "saturday": [],
                    "sunday": [],
                    "thursday": [{"end": "17:30", "start": "09:00"}],
                    "tuesday": [{"end": "17:30", "start": "09:00"}],
                    "wednesday": [{"end": "17:30", "start": "09:00"}]
                }
            }
        ],
        "next_offset": null,
        "offset": 0,
        "total": 1
    }
);

outreach_runtime::prelude::parity!(list_senders, read,
    ok: {"limit": 5, "status": "connected"},
    fails: {"limit": 0} => INVALID_REQUEST
);

/// The input of `update_sender`: only the fields given change.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdateSenderInput {
    /// `snd_...`
    pub id: String,
    #[schemars(length(min = 1, max = 200), regex(pattern = crate::common::NOT_BLANK))]
    pub name: Option<String>,
    /// IANA zone.
    ///
    /// Hours, days and today's usage count in it from now on.
    pub timezone: Option<String>,
    /// Replaces all seven days: a day left out becomes a day off.
    pub working_hours: Option<WorkingHours>,
    pub limits: Option<LimitsInput>,
}

/// Update a sender account.
///
/// Only the fields given change.
///
/// Changes the name, time zone, working hours (all seven days at once) or some limits (the others
/// keep theirs), with `create_sender`'s checks: bad input is a 400 and nothing changes. The
/// warm-up counts from creation; the account's status is the network's to set.
#[action(scope = "write", idempotent, http = "PATCH /senders/{id}")]
pub async fn update_sender(ctx: Ctx, input: UpdateSenderInput) -> Result<Sender, ApiError> {
    IdKind::Sender.check(&input.id)?;
    let name = input.name.as_deref().map(check_name).transpose()?;
    let timezone = input.timezone.as_deref().map(check_zone).transpose()?;
    let working_hours = input
        .working_hours
        .map(|hours| hours.check().map(|(hours, _)| hours))
        .transpose()?;
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let current = load_for_change(&mut tx, ctx.workspace_id(), &input.id).await?;
    let limits = match &input.limits {
        Some(changes) => current.limits.apply(changes)?,
        None => current.limits,
    };
    sqlx::query(
        "update senders set name = $3, timezone = $4, working_hours = $5, limits = $6, updated_at = $7 \
         where workspace_id = $1 and id = $2",
    )
    .bind(ctx.workspace_id())
    .bind(&input.id)
    .bind(name.unwrap_or(current.name))
    .bind(timezone.unwrap_or(current.timezone))
    .bind(json_text(&working_hours.unwrap_or(current.working_hours))?)
    .bind(json_text(&limits)?)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    let row = load(&mut tx, ctx.workspace_id(), &input.id).await?;
    view(&mut tx, row, now).await
}

outreach_runtime::prelude::example!(update_sender,
    request: {
        "id": "snd_RWGJgtR51Eoiiw6ri5tT",
        "limits": {"messages_per_day": 60},
        "timezone": "Europe/Paris"
    },
    response: {
        "created_at": "2026-11-23T18:22:30.073Z",
        "effective_limits": {
            "connection_requests_per_day": 6,
            "connection_requests_per_week": 25,
            "messages_per_day": 15,
            "profile_views_per_day": 20,
            "inmails_per_day": 2
        },
        "id": "snd_RWGJgtR51Eoiiw6ri5tT",
        "limits": {
            "connection_requests_per_day": 25,
            "connection_requests_per_week": 100,
            "messages_per_day": 60,
            "profile_views_per_day": 80,
            "inmails_per_day": 10
        },
        "name": "Ada Lovelace (sales)",
        "pause_reason": null,
        "provider": "sandbox",
        "provider_account_id": null,
        "paused_until": null,
        "sending_status": {
            "reason": "Outside its working hours in Europe/Paris; the next window opens at 2026-11-24T08:00:00.000Z.",
            "resumes_at": "2026-11-24T08:00:00.000Z",
            "state": "outside_hours"
        },
        "status": "connected",
        "status_reason": null,
        "timezone": "Europe/Paris",
        "updated_at": "2026-11-23T18:22:30.113Z",
        "usage": {
            "connection_requests_per_day": {"available_again_at": null, "limit": 6, "used": 1},
            "connection_requests_per_week": {"available_again_at": null, "limit": 25, "used": 1},
            "local_day": "2026-11-23",
            "messages_per_day": {"available_again_at": null, "limit": 15, "used": 0},
            "profile_views_per_day": {"available_again_at": null, "limit": 20, "used": 1},
            "inmails_per_day": {"available_again_at": null, "limit": 2, "used": 0}
        },
        "warmup_ends_at": "2026-12-07T18:22:30.073Z",
        "working_hours": {
            "friday": [{"end": "15:00", "start": "09:00"}],
            "monday": [{"end": "12:00", "start": "09:00"}, {"end": "17:30", "start": "13:00"}],
            "saturday": [],
            "sunday": [],
            "thursday": [{"end": "17:30", "start": "09:00"}],
            "tuesday": [{"end": "17:30", "start": "09:00"}],
            "wednesday": [{"end": "17:30", "start": "09:00"}]
        }
    }
);

outreach_runtime::prelude::parity!(update_sender, write,
    ok: {"id": "$sender", "limits": {"connection_requests_per_day": 30}, "name": "Renamed ${tag}"},
    fails: {"id": "$missing:snd", "name": "Nobody"} => NOT_FOUND
);

/// Delete a sender account.
///
/// Refused while live enrollments send from it: stop them or let them finish.
///
/// The sender disappears from every action and sends nothing more; what it already did stays in
/// the dashboard's figures. Live enrollments are those awaiting approval, scheduled, active or
/// paused; the refusal is a 409 `invalid_state` naming them.
#[action(scope = "write", idempotent, http = "DELETE /senders/{id}")]
pub async fn delete_sender(ctx: Ctx, input: SenderId) -> Result<Deleted, ApiError> {
    IdKind::Sender.check(&input.id)?;
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let sender = load_for_change(&mut tx, ctx.workspace_id(), &input.id).await?;
    let live = live_enrollments_of(&mut tx, &sender.id).await?;
    if !live.is_empty() {
        let named = live
            .iter()
            .map(|id| format!("`{id}`"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "The sender `{}` is `{}` with live enrollments ({named}); a sender can be deleted only when none of its enrollments is awaiting approval, scheduled, active or paused. Stop them first.",
                sender.id, sender.status
            ),
        )
        .with_extra("enrollment_ids", live));
    }
    sqlx::query(
        "update senders set deleted_at = $3, updated_at = $3 where workspace_id = $1 and id = $2",
    )
    .bind(ctx.workspace_id())
    .bind(&sender.id)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    Ok(Deleted {
        id: sender.id,
        deleted: true,
    })
}

outreach_runtime::prelude::example!(delete_sender,
    request: {"id": "snd_RWGJgtR51Eoiiw6ri5tT"},
    response: {"deleted": true, "id": "snd_RWGJgtR51Eoiiw6ri5tT"}
);

outreach_runtime::prelude::parity!(delete_sender, write,
    ok: {"id": "$spare_sender"},
    fails: {"id": "$missing:snd"} => NOT_FOUND
);

/// Makes sure the network is being polled (in the caller's transaction): one `network_poll` job
/// for the whole database, which keeps itself going.
pub async fn ensure_polling(conn: &mut sqlx::AnyConnection, clock: &Clock) -> Result<(), ApiError> {
    enqueue(
        conn,
        clock,
        NewJob::of(&PollJob {}).unique_key(PollJob::KIND),
    )
    .await?;
    Ok(())
}

/// Sets the last slot handed out in the sender's queue of due steps.
pub(crate) async fn set_queued_until(
    conn: &mut sqlx::AnyConnection,
    id: &str,
    slot: i64,
) -> Result<(), ApiError> {
    sqlx::query("update senders set queued_until = $2 where id = $1")
        .bind(id)
        .bind(slot)
        .execute(conn)
        .await?;
    Ok(())
}

/// Hands out the sender's next queue slot: `gap_ms` after the later of its last slot and `after`.
pub(crate) async fn take_queue_slot(
    conn: &mut sqlx::AnyConnection,
    id: &str,
    after: i64,
    gap_ms: i64,
) -> Result<i64, ApiError> {
    Ok(sqlx::query(
        "update senders set queued_until = \
         (case when coalesce(queued_until, 0) > $2 then queued_until else $2 end) + $3 \
         where id = $1 returning queued_until",
    )
    .bind(id)
    .bind(after)
    .bind(gap_ms)
    .fetch_one(conn)
    .await?
    .try_get("queued_until")?)
}
