//! A sender's limits, its warm-up ramp, and the quota every outbound action takes first.
//!
//! Limits are the field's conservative defaults unless overridden, and no override passes the hard
//! ceiling (a 400 naming the field and the ceiling): an account that sends more than this is the one
//! the network restricts. A new account warms up: for [`WARMUP_DAYS`] after the sender was created
//! each limit is scaled down, from a quarter on the first day to the whole limit after the ramp, and
//! `get_sender` shows the scaled figures as `effective_limits`.
//!
//! Usage is one row per action taken (`sender_usage`), so "today" and "the last 7 days" are counts
//! over instants: a day is the sender's local day as its zone says now (from local midnight, DST
//! included), and the week is the rolling 7 x 24 hours before now. [`take_quota`] checks and counts in
//! the caller's transaction after locking the sender row (`FOR UPDATE` on PostgreSQL; SQLite's write
//! transaction is already serial), so workers on several instances cannot both take the last unit.
//! Rows stay when a sender is deleted: the dashboard counts them.

use jiff::tz::TimeZone;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::Row;

use outreach_runtime::prelude::{ApiError, Timestamp, ids};

use super::hours;
use super::{SenderRow, SenderStatus};
use crate::events::{self, EventType};

/// Days a new sender ramps up over.
pub const WARMUP_DAYS: i64 = 14;
const DAY_MS: i64 = 86_400_000;
const WEEK_MS: i64 = 7 * DAY_MS;

/// How many actions of each kind a sender may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Limits {
    /// Connection requests per local day (default 20, at most 40).
    pub connection_requests_per_day: u32,
    /// Connection requests per rolling 7 days (default 100, at most 200).
    pub connection_requests_per_week: u32,
    /// Messages per local day (default 50, at most 150).
    pub messages_per_day: u32,
    /// Profile views per local day (default 80, at most 150).
    pub profile_views_per_day: u32,
    /// InMails per local day (default 10, at most 25); each also spends an InMail credit of the
    /// account on the network.
    #[serde(default = "default_inmails_per_day")]
    pub inmails_per_day: u32,
}

fn default_inmails_per_day() -> u32 {
    DEFAULT_LIMITS.inmails_per_day
}

/// The field's conservative defaults.
pub const DEFAULT_LIMITS: Limits = Limits {
    connection_requests_per_day: 20,
    connection_requests_per_week: 100,
    messages_per_day: 50,
    profile_views_per_day: 80,
    inmails_per_day: 10,
};

/// The hard ceiling no override passes.
pub const CEILING: Limits = Limits {
    connection_requests_per_day: 40,
    connection_requests_per_week: 200,
    messages_per_day: 150,
    profile_views_per_day: 150,
    inmails_per_day: 25,
};

/// A limit left out keeps its value (its default on create).
///
/// The maximums are the ceiling no override passes.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsInput {
    /// Default 20.
    #[schemars(range(max = 40))]
    pub connection_requests_per_day: Option<u32>,
    /// Per rolling 7 days; default 100.
    #[schemars(range(max = 200))]
    pub connection_requests_per_week: Option<u32>,
    /// Default 50.
    #[schemars(range(max = 150))]
    pub messages_per_day: Option<u32>,
    /// Default 80.
    #[schemars(range(max = 150))]
    pub profile_views_per_day: Option<u32>,
    /// Default 10.
    #[schemars(range(max = 25))]
    pub inmails_per_day: Option<u32>,
}

impl Limits {
    fn fields(self) -> [(&'static str, u32); 5] {
        [
            (
                "connection_requests_per_day",
                self.connection_requests_per_day,
            ),
            (
                "connection_requests_per_week",
                self.connection_requests_per_week,
            ),
            ("messages_per_day", self.messages_per_day),
            ("profile_views_per_day", self.profile_views_per_day),
            ("inmails_per_day", self.inmails_per_day),
        ]
    }

    fn map(self, f: impl Fn(u32) -> u32) -> Self {
        Self {
            connection_requests_per_day: f(self.connection_requests_per_day),
            connection_requests_per_week: f(self.connection_requests_per_week),
            messages_per_day: f(self.messages_per_day),
            profile_views_per_day: f(self.profile_views_per_day),
            inmails_per_day: f(self.inmails_per_day),
        }
    }

    /// These limits with `input`'s values over them, each checked against the ceiling.
    pub fn apply(self, input: &LimitsInput) -> Result<Self, ApiError> {
        let limits = Self {
            connection_requests_per_day: input
                .connection_requests_per_day
                .unwrap_or(self.connection_requests_per_day),
            connection_requests_per_week: input
                .connection_requests_per_week
                .unwrap_or(self.connection_requests_per_week),
            messages_per_day: input.messages_per_day.unwrap_or(self.messages_per_day),
            profile_views_per_day: input
                .profile_views_per_day
                .unwrap_or(self.profile_views_per_day),
            inmails_per_day: input.inmails_per_day.unwrap_or(self.inmails_per_day),
        };
        for ((field, value), (_, ceiling)) in limits.fields().into_iter().zip(CEILING.fields()) {
            if value > ceiling {
                return Err(ApiError::invalid_request(format!(
                    "`limits.{field}` is {value}, over the ceiling of {ceiling}; a higher rate gets accounts restricted by the network."
                ))
                .with_extra("ceiling", ceiling));
            }
        }
        Ok(limits)
    }

    /// The limits in force at `now_ms` for a sender created at `created_ms`: a quarter of each on
    /// the first day, growing by equal steps each day to the whole limit after [`WARMUP_DAYS`]
    /// (a limit above 0 is at least 1).
    pub fn effective(self, created_ms: i64, now_ms: i64) -> Self {
        let days = warmup_day(created_ms, now_ms);
        if days >= WARMUP_DAYS {
            return self;
        }
        self.map(|limit| {
            let scaled = i64::from(limit) * (25 * WARMUP_DAYS + 75 * days) / (100 * WARMUP_DAYS);
            if limit == 0 {
                0
            } else {
                u32::try_from(scaled.max(1)).unwrap_or(limit)
            }
        })
    }
}

/// Whole days since `created_ms` (0 on the first day).
fn warmup_day(created_ms: i64, now_ms: i64) -> i64 {
    (now_ms - created_ms).max(0) / DAY_MS
}

/// When the warm-up ends: the limits are whole from then on.
pub fn warmup_ends_at(created_ms: i64) -> i64 {
    created_ms + WARMUP_DAYS * DAY_MS
}

outreach_runtime::prelude::text_enum! {
    /// What a sender does that counts against its limits.
    pub enum QuotaKind {
        /// An invitation to connect, with or without a note.
        ConnectionRequest => "connection_request",
        /// A message to a connection.
        Message => "message",
        /// A visit to a person's profile.
        ProfileView => "profile_view",
        /// An InMail to someone who need not be a connection.
        Inmail => "inmail",
    }
}

/// Why a sender may not act now, and from when it may again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaRefusal {
    /// What refused: a limit's field name (`connection_requests_per_day`, ...), `paused_until`,
    /// `status` or `deleted`.
    pub limit: &'static str,
    /// A sentence for people: what was reached and until when.
    pub reason: String,
    /// When the refusal ends (the next local midnight, when the oldest counted action leaves the
    /// 7-day window, or when the pause ends); `None` when only a person can end it (the account
    /// is not connected, or the sender was deleted).
    pub until_ms: Option<i64>,
}

/// One limit against its usage, as `get_sender` shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LimitUsage {
    /// Counted actions in the window (today in the sender's zone, or the last 7 days).
    pub used: i64,
    /// The limit in force now (after the warm-up ramp).
    pub limit: u32,
    /// When the next action of this kind may be counted, when `used` has reached `limit`.
    pub available_again_at: Option<Timestamp>,
}

/// Usage against each limit.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Usage {
    /// Today in the sender's zone, `YYYY-MM-DD`.
    pub local_day: String,
    pub connection_requests_per_day: LimitUsage,
    pub connection_requests_per_week: LimitUsage,
    pub messages_per_day: LimitUsage,
    pub profile_views_per_day: LimitUsage,
    pub inmails_per_day: LimitUsage,
}

impl Usage {
    /// Each limit with the kind it counts.
    pub fn by_kind(&self) -> [(QuotaKind, &'static str, &LimitUsage); 5] {
        [
            (
                QuotaKind::ConnectionRequest,
                "connection_requests_per_day",
                &self.connection_requests_per_day,
            ),
            (
                QuotaKind::ConnectionRequest,
                "connection_requests_per_week",
                &self.connection_requests_per_week,
            ),
            (
                QuotaKind::Message,
                "messages_per_day",
                &self.messages_per_day,
            ),
            (
                QuotaKind::ProfileView,
                "profile_views_per_day",
                &self.profile_views_per_day,
            ),
            (QuotaKind::Inmail, "inmails_per_day", &self.inmails_per_day),
        ]
    }
}

/// Counts a sender's usage at `now_ms` against its effective limits.
pub async fn usage(
    conn: &mut sqlx::AnyConnection,
    sender: &SenderRow,
    now_ms: i64,
) -> Result<Usage, ApiError> {
    let tz = &sender.tz;
    let day_start = hours::day_start(tz, now_ms);
    let week_start = now_ms - WEEK_MS;
    // The local day starts less than 7 days ago, so one pass over the week counts both. Rows
    // stamped after `now_ms` count too: another instance's clock may run a little ahead.
    let rows = sqlx::query(
        "select kind, count(*) as week, \
         coalesce(sum(case when at >= $3 then 1 else 0 end), 0) as today \
         from sender_usage where sender_id = $1 and at > $2 group by kind",
    )
    .bind(&sender.id)
    .bind(week_start)
    .bind(day_start)
    .fetch_all(&mut *conn)
    .await?;
    let mut today = [0i64; 4];
    let mut week = [0i64; 4];
    for row in &rows {
        let kind = QuotaKind::from_db(&row.try_get::<String, _>("kind")?)?;
        let index = kind_index(kind);
        today[index] = row.try_get("today")?;
        week[index] = row.try_get("week")?;
    }
    let effective = sender.limits.effective(sender.created_at, now_ms);
    let midnight = hours::next_midnight(tz, now_ms);
    // A limit of 0 is never free again by itself: only a person raising it frees it.
    let daily = |used: i64, limit: u32| LimitUsage {
        used,
        limit,
        available_again_at: (used >= i64::from(limit) && limit > 0).then_some(Timestamp(midnight)),
    };
    let connection = kind_index(QuotaKind::ConnectionRequest);
    let weekly_limit = effective.connection_requests_per_week;
    let weekly_used = week[connection];
    let weekly_until = if weekly_used >= i64::from(weekly_limit) && weekly_limit > 0 {
        Some(weekly_release(conn, sender, now_ms, weekly_used, weekly_limit).await?)
    } else {
        None
    };
    Ok(Usage {
        local_day: hours::local_day(tz, now_ms),
        connection_requests_per_day: daily(
            today[connection],
            effective.connection_requests_per_day,
        ),
        connection_requests_per_week: LimitUsage {
            used: weekly_used,
            limit: weekly_limit,
            available_again_at: weekly_until.map(Timestamp),
        },
        messages_per_day: daily(
            today[kind_index(QuotaKind::Message)],
            effective.messages_per_day,
        ),
        profile_views_per_day: daily(
            today[kind_index(QuotaKind::ProfileView)],
            effective.profile_views_per_day,
        ),
        inmails_per_day: daily(
            today[kind_index(QuotaKind::Inmail)],
            effective.inmails_per_day,
        ),
    })
}

fn kind_index(kind: QuotaKind) -> usize {
    match kind {
        QuotaKind::ConnectionRequest => 0,
        QuotaKind::Message => 1,
        QuotaKind::ProfileView => 2,
        QuotaKind::Inmail => 3,
    }
}

/// When the rolling week has room again: enough of its oldest invitations have left it to bring
/// `used` under `limit`, or the warm-up raises the limit, whichever comes first.
async fn weekly_release(
    conn: &mut sqlx::AnyConnection,
    sender: &SenderRow,
    now_ms: i64,
    used: i64,
    limit: u32,
) -> Result<i64, ApiError> {
    let leaving = used - i64::from(limit);
    let row = sqlx::query(
        "select at from sender_usage where sender_id = $1 and kind = $2 and at > $3 \
         order by at asc, id asc limit 1 offset $4",
    )
    .bind(&sender.id)
    .bind(QuotaKind::ConnectionRequest.as_str())
    .bind(now_ms - WEEK_MS)
    .bind(leaving)
    .fetch_optional(&mut *conn)
    .await?;
    let leaves = match row {
        Some(row) => row.try_get::<i64, _>("at")? + WEEK_MS,
        None => now_ms,
    };
    // The first day of the ramp that raises the limit, if it comes before.
    let ramp_step = (warmup_day(sender.created_at, now_ms) + 1..=WARMUP_DAYS)
        .map(|day| sender.created_at + day * DAY_MS)
        .find(|&at| {
            sender
                .limits
                .effective(sender.created_at, at)
                .connection_requests_per_week
                > limit
        });
    Ok(ramp_step.map_or(leaves, |step| step.min(leaves)))
}

/// Checks every limit that applies to `kind` for the sender, and counts one action in `tx` when
/// none refuses. Call it in the transaction that claims the work, before the provider call, with
/// the sender's row locked and read under that lock ([`super::load_locked`]; on SQLite the write
/// transaction holds the whole database), so concurrent callers on any instance are counted one
/// after the other and never overshoot. Returns the usage row's id, for [`release_quota`] and
/// [`restamp_quota`].
///
/// What counts is what the network performed: a call it refused gives its unit back (the
/// sandbox counts its own daily caps the same way). Pacing is another matter: every call the
/// network saw, refused or not, moves the sender's `last_action_at` ([`super::note_call`]).
///
/// The outer error is a fault; the inner one is a refusal the caller snoozes until `until_ms`.
pub async fn take_quota(
    tx: &mut sqlx::AnyConnection,
    sender: &SenderRow,
    kind: QuotaKind,
    now_ms: i64,
) -> Result<Result<String, QuotaRefusal>, ApiError> {
    if let Some(refusal) = standing_refusal(sender, now_ms) {
        return Ok(Err(refusal));
    }
    let usage = usage(&mut *tx, sender, now_ms).await?;
    if let Some(refusal) = refusal_of(sender, kind, &usage) {
        return Ok(Err(refusal));
    }
    let id = ids::new_id("usg");
    sqlx::query(
        "insert into sender_usage (id, workspace_id, sender_id, kind, at, local_day) \
         values ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&id)
    .bind(&sender.workspace_id)
    .bind(&sender.id)
    .bind(kind.as_str())
    .bind(now_ms)
    .bind(hours::local_day(&sender.tz, now_ms))
    .execute(&mut *tx)
    .await?;
    limits_crossed(tx, sender, kind, &usage, now_ms).await?;
    Ok(Ok(id))
}

/// The share of a limit at which `sender.limit_approaching` is written.
const APPROACHING_PERCENT: i64 = 80;

/// The events of the limits the unit just taken (on top of `before`) brought to 80% or used up.
async fn limits_crossed(
    tx: &mut sqlx::AnyConnection,
    sender: &SenderRow,
    kind: QuotaKind,
    before: &Usage,
    now_ms: i64,
) -> Result<(), ApiError> {
    for (limit_kind, field, limit) in before.by_kind() {
        let max = i64::from(limit.limit);
        if limit_kind != kind || max == 0 {
            continue;
        }
        let used = limit.used + 1;
        let approaching = (max * APPROACHING_PERCENT + 99) / 100;
        let event = if used == max {
            EventType::SenderLimitReached
        } else if used == approaching {
            EventType::SenderLimitApproaching
        } else {
            continue;
        };
        let data = serde_json::json!({"sender_id": sender.id, "limit": field, "used": used,
                                      "max": max});
        events::record(tx, &sender.workspace_id, now_ms, event, data).await?;
    }
    Ok(())
}

/// Moves a unit [`take_quota`] counted to the moment the network says the action happened, so
/// the day and the rolling week count it where the network does (a call can reach the network a
/// little after its unit was taken, or, after a crash, much later).
pub async fn restamp_quota(
    tx: &mut sqlx::AnyConnection,
    sender: &SenderRow,
    usage_id: &str,
    at_ms: i64,
) -> Result<(), ApiError> {
    sqlx::query("update sender_usage set at = $2, local_day = $3 where id = $1")
        .bind(usage_id)
        .bind(at_ms)
        .bind(hours::local_day(&sender.tz, at_ms))
        .execute(tx)
        .await?;
    Ok(())
}

/// Gives back a unit [`take_quota`] counted, for an action that definitely did not reach the
/// network (refused before it was sent). An action whose outcome is unknown keeps its unit.
/// Returns whether a row was removed.
pub async fn release_quota(tx: &mut sqlx::AnyConnection, usage_id: &str) -> Result<bool, ApiError> {
    let deleted = sqlx::query("delete from sender_usage where id = $1")
        .bind(usage_id)
        .execute(tx)
        .await?;
    Ok(deleted.rows_affected() > 0)
}

/// What stops `sender` from taking one more `kind` at `now_ms`, if anything. Of several limits
/// reached, the one that lasts longest is named: it is the one that decides when work resumes.
pub async fn refusal(
    conn: &mut sqlx::AnyConnection,
    sender: &SenderRow,
    kind: QuotaKind,
    now_ms: i64,
) -> Result<Option<QuotaRefusal>, ApiError> {
    if let Some(refusal) = standing_refusal(sender, now_ms) {
        return Ok(Some(refusal));
    }
    let usage = usage(conn, sender, now_ms).await?;
    Ok(refusal_of(sender, kind, &usage))
}

/// What of `usage` stops `sender` from taking one more `kind`, if anything.
fn refusal_of(sender: &SenderRow, kind: QuotaKind, usage: &Usage) -> Option<QuotaRefusal> {
    let configured = sender.limits;
    let mut worst: Option<QuotaRefusal> = None;
    for (limit_kind, field, limit) in usage.by_kind() {
        if limit_kind != kind || limit.used < i64::from(limit.limit) {
            continue;
        }
        let until_ms = limit.available_again_at.map(Timestamp::ms);
        let configured = configured
            .fields()
            .into_iter()
            .find(|(name, _)| *name == field)
            .map_or(limit.limit, |(_, value)| value);
        let warmup = if configured > limit.limit {
            format!(
                " (warm-up: {} of {configured} until {})",
                limit.limit,
                Timestamp(warmup_ends_at(sender.created_at))
            )
        } else {
            String::new()
        };
        let reason = format!(
            "`{field}` reached: {} of {}{warmup}; it allows more at {}.",
            limit.used,
            limit.limit,
            until_ms.map_or_else(
                || "no time by itself (raise the limit)".to_owned(),
                |ms| Timestamp(ms).to_string()
            )
        );
        // A limit that never frees by itself (`None`) outlasts every other.
        let lasts = |until: Option<i64>| until.unwrap_or(i64::MAX);
        if worst
            .as_ref()
            .is_none_or(|w| lasts(w.until_ms) < lasts(until_ms))
        {
            worst = Some(QuotaRefusal {
                limit: field,
                reason,
                until_ms,
            });
        }
    }
    worst
}

/// What stops the sender whatever the kind: deleted, not connected, or paused.
pub fn standing_refusal(sender: &SenderRow, now_ms: i64) -> Option<QuotaRefusal> {
    if sender.deleted_at.is_some() {
        return Some(QuotaRefusal {
            limit: "deleted",
            reason: format!("The sender `{}` was deleted.", sender.id),
            until_ms: None,
        });
    }
    if sender.status != SenderStatus::Connected {
        return Some(QuotaRefusal {
            limit: "status",
            reason: format!(
                "The account is `{}`, not `connected`; it sends nothing until it is reconnected.",
                sender.status
            ),
            until_ms: None,
        });
    }
    match sender.paused_until {
        Some(until) if until > now_ms => Some(QuotaRefusal {
            limit: "paused_until",
            reason: format!(
                "Paused after a provider limit signal{} until {}.",
                sender
                    .pause_reason
                    .as_deref()
                    .map(|reason| format!(" ({reason})"))
                    .unwrap_or_default(),
                Timestamp(until)
            ),
            until_ms: Some(until),
        }),
        _ => None,
    }
}

/// The zone of a stored sender (a name checked when it was written).
pub(crate) fn stored_zone(name: &str) -> Result<TimeZone, ApiError> {
    TimeZone::get(name)
        .map_err(|error| ApiError::internal(format!("stored zone `{name}`: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warm_up_starts_at_a_quarter_and_ends_whole() {
        let created = 1_000_000;
        let first = DEFAULT_LIMITS.effective(created, created);
        assert_eq!(first.connection_requests_per_day, 5);
        assert_eq!(first.connection_requests_per_week, 25);
        assert_eq!(first.messages_per_day, 12);
        assert_eq!(first.profile_views_per_day, 20);
        let mut previous = first;
        for day in 1..=WARMUP_DAYS {
            let now = created + day * DAY_MS;
            let limits = DEFAULT_LIMITS.effective(created, now);
            assert!(limits.connection_requests_per_day >= previous.connection_requests_per_day);
            previous = limits;
        }
        assert_eq!(previous, DEFAULT_LIMITS);
        assert_eq!(
            DEFAULT_LIMITS
                .effective(created, warmup_ends_at(created) - 1)
                .connection_requests_per_day,
            18
        );
        let tiny = Limits {
            connection_requests_per_day: 1,
            connection_requests_per_week: 0,
            messages_per_day: 2,
            profile_views_per_day: 3,
            inmails_per_day: 0,
        };
        let ramped = tiny.effective(created, created);
        assert_eq!(
            (
                ramped.connection_requests_per_day,
                ramped.connection_requests_per_week
            ),
            (1, 0)
        );
    }

    #[test]
    fn overrides_stop_at_the_ceiling() {
        let input = LimitsInput {
            messages_per_day: Some(151),
            ..LimitsInput::default()
        };
        let error = DEFAULT_LIMITS.apply(&input).err().map(|e| e.message);
        assert!(error.is_some_and(|m| m.contains("limits.messages_per_day") && m.contains("150")));
        let input = LimitsInput {
            connection_requests_per_day: Some(40),
            ..LimitsInput::default()
        };
        let limits = DEFAULT_LIMITS
            .apply(&input)
            .expect("at the ceiling is allowed");
        assert_eq!(limits.connection_requests_per_day, 40);
        assert_eq!(limits.messages_per_day, 50);
    }
}
