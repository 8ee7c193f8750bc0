//! Sequences: the steps outreach takes with each approved prospect, and the senders it goes from.
//!
//! A sequence is made in `draft` with `write`, and started, paused, resumed and stopped with
//! `send` (the state machine is in [`states`]). Steps, schedule and settings are stored as JSON on
//! the row and replaced as a whole; everything in them is checked when written (a note over 300
//! characters, a message before any connection request, a template naming an unknown variable),
//! so a sequence that exists can always be rendered. Rendering per prospect happens when people
//! are added (`approvals::propose`), where a text that grows past its limit is reported for that prospect.

pub mod clone;
pub mod states;
pub mod stats;
pub mod steps;
pub mod templates;
pub mod variants;

use std::collections::{HashMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use crate::common::{Deleted, IdKind, json_text};
use crate::enrollments::EnrollmentStatus;
use crate::events::{self, EventType};
use crate::followups::SequenceEnded;
use crate::lists::placeholders;
use crate::person_lock::PersonTx;
use crate::prospects::Prospect;
use outreach_runtime::prelude::{ApiError, Ctx, ErrorCode, Page, PageParams, Timestamp, action};
use outreach_runtime::prelude::{JobArgs, JobCtx, JobOutcome, JobResult, ids, paged};
pub use steps::{
    Condition, ConditionKind, DraftedBy, FINISH, Flow, MAX_DELAY_HOURS, MAX_INMAIL_CHARS,
    MAX_MESSAGE_CHARS, MAX_NOTE_CHARS, MAX_STEPS, MAX_SUBJECT_CHARS, Next, ProfileField,
    RenderProblem, RenderedText, Step, StepType, Variant, check_steps, render_steps,
};

outreach_runtime::prelude::resource_tag!(
    "sequences",
    toolset = "outreach",
    "Sequences of outreach steps (profile view, invitation, message) from one or more senders, their life (activate, pause, resume, stop) and who is enrolled."
);

pub const MAX_NAME_CHARS: usize = 200;
pub const MAX_SENDERS: usize = 20;

outreach_runtime::prelude::text_enum! {
    /// Where a sequence is in its life.
    pub enum SequenceStatus {
        /// Being written; nothing is sent. Steps, senders and settings may change.
        Draft => "draft",
        /// Sending to approved enrollments.
        Active => "active",
        /// Nothing is sent until resumed; steps may change.
        Paused => "paused",
        /// Every enrollment finished.
        Completed => "completed",
        /// Stopped for good; its live enrollments finished as `stopped`.
        Stopped => "stopped",
    }
}

/// When a sequence sends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "SequenceSchedule")]
pub struct Schedule {
    /// Also keep to the prospect's working day, in their time zone when known.
    ///
    /// Send only when the sender's working hours overlap the prospect's working day in the
    /// prospect's time zone (when it is known). Default false: the sender's hours alone.
    #[serde(default)]
    pub respect_prospect_timezone: bool,
}

/// How a sequence treats its prospects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "SequenceSettings")]
pub struct Settings {
    /// Finish an enrollment (`replied`) when the prospect replies. Default true.
    pub stop_on_reply: bool,
    /// Finish an enrollment (`not_accepted`) when its invitation is not accepted within this many
    /// days. 1 to 180; default 21.
    pub exit_after_days_without_acceptance: u32,
    /// `add_to_sequence` skips prospects in another live sequence. Default true.
    pub skip_if_in_other_live_sequence: bool,
    /// `add_to_sequence` skips prospects contacted within this many days; 0 turns it off. 0 to 365;
    /// default 30.
    pub skip_if_contacted_within_days: u32,
    /// An out-of-office reply holds the enrollment until the return day it names; when it names
    /// none, for this many days. 1 to 90; default 7.
    #[serde(default = "default_out_of_office_hold_days")]
    pub out_of_office_hold_days: u32,
}

fn default_out_of_office_hold_days() -> u32 {
    7
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            stop_on_reply: true,
            exit_after_days_without_acceptance: 21,
            skip_if_in_other_live_sequence: true,
            skip_if_contacted_within_days: 30,
            out_of_office_hold_days: default_out_of_office_hold_days(),
        }
    }
}

/// A setting left out keeps its value.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "SequenceSettingsInput")]
pub struct SettingsInput {
    /// Default true.
    pub stop_on_reply: Option<bool>,
    /// Default 21.
    #[schemars(range(min = 1, max = 180))]
    pub exit_after_days_without_acceptance: Option<u32>,
    /// Default true.
    pub skip_if_in_other_live_sequence: Option<bool>,
    /// 0 is off; default 30.
    #[schemars(range(max = 365))]
    pub skip_if_contacted_within_days: Option<u32>,
    /// Hold after an out-of-office reply that names no return day; default 7.
    ///
    /// An out-of-office reply holds the enrollment until the return day it names; when it names
    /// none, for this many days.
    #[schemars(range(min = 1, max = 90))]
    pub out_of_office_hold_days: Option<u32>,
}

impl SettingsInput {
    fn apply(self, mut settings: Settings) -> Result<Settings, ApiError> {
        if let Some(flag) = self.stop_on_reply {
            settings.stop_on_reply = flag;
        }
        if let Some(days) = self.exit_after_days_without_acceptance {
            if !(1..=180).contains(&days) {
                return Err(ApiError::invalid_request(format!(
                    "`settings.exit_after_days_without_acceptance` is {days}; it must be between 1 and 180."
                )));
            }
            settings.exit_after_days_without_acceptance = days;
        }
        if let Some(flag) = self.skip_if_in_other_live_sequence {
            settings.skip_if_in_other_live_sequence = flag;
        }
        if let Some(days) = self.skip_if_contacted_within_days {
            if days > 365 {
                return Err(ApiError::invalid_request(format!(
                    "`settings.skip_if_contacted_within_days` is {days}; it must be between 0 and 365."
                )));
            }
            settings.skip_if_contacted_within_days = days;
        }
        if let Some(days) = self.out_of_office_hold_days {
            if !(1..=90).contains(&days) {
                return Err(ApiError::invalid_request(format!(
                    "`settings.out_of_office_hold_days` is {days}; it must be between 1 and 90."
                )));
            }
            settings.out_of_office_hold_days = days;
        }
        Ok(settings)
    }
}

/// How many enrollments of a sequence are in each status.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct EnrollmentCounts {
    pub awaiting_approval: u64,
    pub scheduled: u64,
    pub active: u64,
    pub paused: u64,
    pub finished: u64,
    pub failed: u64,
}

impl EnrollmentCounts {
    fn add(&mut self, status: EnrollmentStatus, n: u64) {
        let slot = match status {
            EnrollmentStatus::AwaitingApproval => &mut self.awaiting_approval,
            EnrollmentStatus::Scheduled => &mut self.scheduled,
            EnrollmentStatus::Active => &mut self.active,
            EnrollmentStatus::Paused => &mut self.paused,
            EnrollmentStatus::Finished => &mut self.finished,
            EnrollmentStatus::Failed => &mut self.failed,
        };
        *slot += n;
    }
}

/// Whether a sequence is sending now, and if not, why.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "SequenceSendingStatus")]
pub struct Sending {
    /// True when the sequence is active and has enrollments waiting for their next step.
    pub sending: bool,
    /// Why it is not sending, as a sentence; null while sending.
    pub reason: Option<String>,
    /// The earliest moment the next step of one of its enrollments can go out, by the rules its
    /// sender's sends follow (working hours in the sender's zone, and the prospect's when the
    /// sequence respects it; pauses; limits; the gap after the sender's last call). A forecast as
    /// things stand: a send can come later (behind other steps queued for the sender).
    pub next_send_at: Option<Timestamp>,
}

/// A sequence as the API shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Sequence {
    pub id: String,
    pub name: String,
    /// `draft`, `active`, `paused`, `completed` or `stopped`.
    pub status: SequenceStatus,
    pub steps: Vec<Step>,
    /// The senders (`snd_...`) enrollments are spread over, in the order given.
    pub sender_ids: Vec<String>,
    pub schedule: Schedule,
    pub settings: Settings,
    /// Enrollments per status.
    pub enrollment_counts: EnrollmentCounts,
    /// Whether it is sending now, why not, and the next send time.
    pub sending: Sending,
    pub activated_at: Option<Timestamp>,
    /// When it was stopped or completed.
    pub finished_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

const SEQUENCE_COLUMNS: &str = "id, name, status, steps, schedule, settings, activated_at, finished_at, created_at, updated_at";

impl Sequence {
    fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        let json = |column: &str| -> Result<String, ApiError> { Ok(row.try_get(column)?) };
        Ok(Self {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            status: SequenceStatus::from_db(&row.try_get::<String, _>("status")?)?,
            steps: {
                let mut steps: Vec<Step> =
                    serde_json::from_str(&json("steps")?).map_err(ApiError::internal)?;
                steps::fill_keys(&mut steps);
                steps
            },
            sender_ids: Vec::new(),
            schedule: serde_json::from_str(&json("schedule")?).map_err(ApiError::internal)?,
            settings: serde_json::from_str(&json("settings")?).map_err(ApiError::internal)?,
            enrollment_counts: EnrollmentCounts::default(),
            sending: Sending {
                sending: false,
                reason: None,
                next_send_at: None,
            },
            activated_at: row
                .try_get::<Option<i64>, _>("activated_at")?
                .map(Timestamp),
            finished_at: row.try_get::<Option<i64>, _>("finished_at")?.map(Timestamp),
            created_at: Timestamp(row.try_get("created_at")?),
            updated_at: Timestamp(row.try_get("updated_at")?),
        })
    }
}

/// Fills in the senders, counts and sending status of sequences read from their rows.
async fn complete(
    conn: &mut sqlx::AnyConnection,
    sequences: &mut [Sequence],
    now: i64,
) -> Result<(), ApiError> {
    if sequences.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = sequences.iter().map(|s| s.id.as_str()).collect();
    let list = placeholders(1, ids.len());
    let bind_all = |sql: String| {
        let mut query = sqlx::query(AssertSqlSafe(sql)).persistent(false);
        for id in &ids {
            query = query.bind(*id);
        }
        query
    };
    let mut senders: HashMap<String, Vec<String>> = HashMap::new();
    // Per sequence, its senders that cannot send at all (not connected, or deleted).
    let mut unable: HashMap<String, Vec<String>> = HashMap::new();
    for row in bind_all(format!(
        "select ss.sequence_id, ss.sender_id, s.status, s.deleted_at from sequence_senders ss \
         left join senders s on s.id = ss.sender_id \
         where ss.sequence_id in {list} order by ss.position, ss.sender_id"
    ))
    .fetch_all(&mut *conn)
    .await?
    {
        let sequence_id: String = row.try_get("sequence_id")?;
        let sender_id: String = row.try_get("sender_id")?;
        let status: Option<String> = row.try_get("status")?;
        let deleted = row.try_get::<Option<i64>, _>("deleted_at")?.is_some();
        match status.as_deref() {
            Some("connected") if !deleted => {}
            Some(status) if !deleted => unable
                .entry(sequence_id.clone())
                .or_default()
                .push(format!("`{sender_id}` is `{status}`")),
            _ => unable
                .entry(sequence_id.clone())
                .or_default()
                .push(format!("`{sender_id}` was deleted")),
        }
        senders.entry(sequence_id).or_default().push(sender_id);
    }
    let mut counts: HashMap<String, EnrollmentCounts> = HashMap::new();
    for row in bind_all(format!(
        "select sequence_id, status, count(*) as n from enrollments where sequence_id in {list} group by sequence_id, status"
    ))
    .fetch_all(&mut *conn)
    .await?
    {
        let status = EnrollmentStatus::from_db(&row.try_get::<String, _>("status")?)?;
        let n: i64 = row.try_get("n")?;
        counts
            .entry(row.try_get("sequence_id")?)
            .or_default()
            .add(status, u64::try_from(n).unwrap_or(0));
    }
    let next = next_sends(conn, sequences, &list, &ids, now).await?;
    for sequence in sequences.iter_mut() {
        sequence.sender_ids = senders.remove(&sequence.id).unwrap_or_default();
        sequence.enrollment_counts = counts.remove(&sequence.id).unwrap_or_default();
        let unable = unable.remove(&sequence.id).unwrap_or_default();
        let all_unable = !unable.is_empty() && unable.len() == sequence.sender_ids.len();
        sequence.sending = sending_status(
            sequence,
            next.get(&sequence.id).copied(),
            all_unable.then_some(unable.as_slice()),
        );
    }
    Ok(())
}

/// Per sequence with steps due (`None` inside: none of them can be given a time as things
/// stand), the earliest moment one of its enrollments' next steps can reach the network: each
/// sender's earliest call of the step's kind ([`crate::senders::earliest_call`], the gate's
/// rules) at or after the step is due, in the prospect's zone too when the sequence respects
/// it. An enrollment waiting for an acceptance sends nothing when its deadline comes, so it is
/// left out.
async fn next_sends(
    conn: &mut sqlx::AnyConnection,
    sequences: &[Sequence],
    list: &str,
    ids: &[&str],
    now: i64,
) -> Result<HashMap<String, Option<i64>>, ApiError> {
    let mut query = sqlx::query(AssertSqlSafe(format!(
        "select e.sequence_id, e.workspace_id, e.sender_id, e.step_index, p.timezone, min(e.next_step_at) as next_at \
         from enrollments e join prospects p on p.id = e.prospect_id \
         where e.sequence_id in {list} and e.status in ('scheduled', 'active') and e.next_step_at is not null \
         and e.sender_id is not null and not (e.invited_at is not null and e.accepted_at is null) \
         group by e.sequence_id, e.workspace_id, e.sender_id, e.step_index, p.timezone"
    )))
    .persistent(false);
    for id in ids {
        query = query.bind(*id);
    }
    let rows = query.fetch_all(&mut *conn).await?;
    let mut senders: HashMap<String, Option<crate::senders::SenderRow>> = HashMap::new();
    let mut next: HashMap<String, Option<i64>> = HashMap::new();
    for row in rows {
        let sequence_id: String = row.try_get("sequence_id")?;
        let Some(sequence) = sequences.iter().find(|s| s.id == sequence_id) else {
            continue;
        };
        let step_index: i64 = row.try_get("step_index")?;
        // A condition sends nothing: it is no next send.
        let Some(step) = usize::try_from(step_index)
            .ok()
            .and_then(|i| sequence.steps.get(i))
            .filter(|step| step.kind.sends())
        else {
            continue;
        };
        let sender_id: String = row.try_get("sender_id")?;
        if !senders.contains_key(&sender_id) {
            let workspace_id: String = row.try_get("workspace_id")?;
            let sender = crate::senders::load(conn, &workspace_id, &sender_id)
                .await
                .ok();
            senders.insert(sender_id.clone(), sender);
        }
        let forecast = match senders.get(&sender_id).and_then(Option::as_ref) {
            Some(sender) => {
                let zone = if sequence.schedule.respect_prospect_timezone {
                    row.try_get::<Option<String>, _>("timezone")?
                        .and_then(|name| jiff::tz::TimeZone::get(&name).ok())
                } else {
                    None
                };
                let due: i64 = row.try_get("next_at")?;
                crate::senders::earliest_call(
                    conn,
                    sender,
                    step.kind.quota_kind(),
                    zone.as_ref(),
                    due,
                    now,
                )
                .await?
            }
            None => None,
        };
        let entry = next.entry(sequence_id).or_insert(None);
        *entry = match (*entry, forecast) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    Ok(next)
}

/// Whether a sequence sends now and why not. `next_send` is present when some enrollment has a
/// step due, with the earliest moment one can go out by its sender's rules (`None` inside when
/// no time can be promised as things stand). `unable` names each sender when none of them can
/// send at all.
pub fn sending_status(
    sequence: &Sequence,
    next_send: Option<Option<i64>>,
    unable: Option<&[String]>,
) -> Sending {
    let not = |reason: String| Sending {
        sending: false,
        reason: Some(reason),
        next_send_at: None,
    };
    match sequence.status {
        SequenceStatus::Draft => {
            not("The sequence is a draft; `activate_sequence` starts it.".into())
        }
        SequenceStatus::Paused => {
            not("The sequence is paused; `resume_sequence` resumes it.".into())
        }
        SequenceStatus::Completed => not("The sequence is completed.".into()),
        SequenceStatus::Stopped => not("The sequence is stopped.".into()),
        SequenceStatus::Active => match next_send {
            Some(_) if let Some(unable) = unable => not(format!(
                "No sender of the sequence can send: {}. Its steps wait until one is connected again.",
                unable.join("; ")
            )),
            Some(Some(at)) => Sending {
                sending: true,
                reason: None,
                next_send_at: Some(Timestamp(at)),
            },
            Some(None) => not(
                "Its steps are due, but none of its senders can send them as things stand (no working hours, \
                 a limit of 0, or an account that is not connected): see `get_sender`."
                    .into(),
            ),
            None => not(if sequence.enrollment_counts.awaiting_approval > 0 {
                "No enrollment is approved yet; approve them with `approve_outreach`.".into()
            } else {
                "No enrollment has a step due; add prospects with `add_to_sequence`.".into()
            }),
        },
    }
}

/// Reads one sequence of the workspace, complete, or 404.
pub(crate) async fn fetch(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
    now: i64,
) -> Result<Sequence, ApiError> {
    let mut sequence = fetch_row(conn, workspace_id, id).await?;
    complete(conn, std::slice::from_mut(&mut sequence), now).await?;
    Ok(sequence)
}

/// Reads one sequence's row (steps, settings, status; not its senders or counts), or 404.
pub(crate) async fn fetch_row(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<Sequence, ApiError> {
    IdKind::Sequence.check(id)?;
    let row = sqlx::query(AssertSqlSafe(format!(
        "select {SEQUENCE_COLUMNS} from sequences where workspace_id = $1 and id = $2"
    )))
    .bind(workspace_id)
    .bind(id)
    .fetch_optional(conn)
    .await?
    .ok_or_else(|| IdKind::Sequence.not_found(id))?;
    Sequence::from_row(&row)
}

/// Reads a sequence row as a step job decides by it, holding it (PostgreSQL: `for share`) until
/// the job's transaction ends, so an activation, pause or resumption (which writes the row) either
/// came before and is seen, or waits for the job's decision and its job's end.
pub(crate) async fn fetch_row_for_step(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<Sequence, ApiError> {
    IdKind::Sequence.check(id)?;
    let share = match outreach_runtime::prelude::Backend::of(conn) {
        outreach_runtime::prelude::Backend::Postgres => " for share",
        outreach_runtime::prelude::Backend::Sqlite => "",
    };
    let row = sqlx::query(AssertSqlSafe(format!(
        "select {SEQUENCE_COLUMNS} from sequences where workspace_id = $1 and id = $2{share}"
    )))
    .bind(workspace_id)
    .bind(id)
    .fetch_optional(conn)
    .await?
    .ok_or_else(|| IdKind::Sequence.not_found(id))?;
    Sequence::from_row(&row)
}

/// Takes the write lock on a sequence row (SQLite holds it already; PostgreSQL locks the row)
/// and reads it, complete: what a change of state or of enrollments starts with.
pub(crate) async fn lock(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
    now: i64,
) -> Result<Sequence, ApiError> {
    IdKind::Sequence.check(id)?;
    let touched =
        sqlx::query("update sequences set updated_at = $3 where workspace_id = $1 and id = $2")
            .bind(workspace_id)
            .bind(id)
            .bind(now)
            .execute(&mut *conn)
            .await?;
    if touched.rows_affected() == 0 {
        return Err(IdKind::Sequence.not_found(id));
    }
    fetch(conn, workspace_id, id, now).await
}

// ----- checks -----

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

/// Checks that every sender exists in the workspace; returns them without repeats, in order.
async fn check_senders(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    sender_ids: Vec<String>,
) -> Result<Vec<String>, ApiError> {
    let mut seen = HashSet::new();
    let ids: Vec<String> = sender_ids
        .into_iter()
        .map(|id| id.trim().to_owned())
        .filter(|id| seen.insert(id.clone()))
        .collect();
    if ids.len() > MAX_SENDERS {
        return Err(ApiError::invalid_request(format!(
            "`sender_ids` names {} senders; a sequence has at most {MAX_SENDERS}.",
            ids.len()
        )));
    }
    if ids.is_empty() {
        return Ok(ids);
    }
    let sql = format!(
        "select id from senders where workspace_id = $1 and id in {}",
        placeholders(2, ids.len())
    );
    let mut query = sqlx::query(AssertSqlSafe(sql))
        .persistent(false)
        .bind(workspace_id);
    for id in &ids {
        query = query.bind(id);
    }
    let found: HashSet<String> = query
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| row.try_get::<String, _>("id"))
        .collect::<Result<_, _>>()?;
    let unknown: Vec<String> = ids
        .iter()
        .filter(|id| !found.contains(*id))
        .map(|id| format!("`{id}`"))
        .collect();
    if !unknown.is_empty() {
        return Err(ApiError::invalid_request(format!(
            "`sender_ids` names senders that do not exist in this workspace: {}.",
            unknown.join(", ")
        ))
        .with_extra(
            "unknown_sender_ids",
            ids.iter()
                .filter(|id| !found.contains(*id))
                .cloned()
                .collect::<Vec<_>>(),
        ));
    }
    Ok(ids)
}

async fn write_senders(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    sequence_id: &str,
    sender_ids: &[String],
) -> Result<(), ApiError> {
    sqlx::query("delete from sequence_senders where sequence_id = $1")
        .bind(sequence_id)
        .execute(&mut *conn)
        .await?;
    for (position, sender_id) in sender_ids.iter().enumerate() {
        sqlx::query(
            "insert into sequence_senders (sequence_id, sender_id, workspace_id, position) values ($1, $2, $3, $4)",
        )
        .bind(sequence_id)
        .bind(sender_id)
        .bind(workspace_id)
        .bind(i64::try_from(position).unwrap_or(i64::MAX))
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

// ----- actions -----

/// The input of `create_sequence`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateSequenceInput {
    #[schemars(length(min = 1, max = 200), regex(pattern = crate::common::NOT_BLANK))]
    pub name: String,
    /// Notes, texts and subjects are templates: `{{first_name|there}}` is a prospect field (or
    /// `{{custom.<key>}}`) with a fallback.
    ///
    /// Each step is `{"type", "delay_hours", "note" | "text"}`. A template names any prospect
    /// field (`{{first_name}}`, `{{company_name}}`) or a custom one (`{{custom.<key>}}`), with a
    /// fallback after a bar: `{{first_name|there}}`. The steps hold at most 64 KB of JSON in all
    /// (more is a 400).
    #[serde(default)]
    #[schemars(length(max = 20))]
    pub steps: Vec<Step>,
    /// `snd_...`; enrollments are spread over them.
    #[serde(default)]
    #[schemars(length(max = 20))]
    pub sender_ids: Vec<String>,
    #[serde(default)]
    pub schedule: Option<Schedule>,
    #[serde(default)]
    pub settings: Option<SettingsInput>,
}

/// Create a sequence, in `draft`.
///
/// Sends nothing until `activate_sequence`. A `message` needs a `connection_request` before it;
/// an unknown template variable or sender is a 400 naming it.
///
/// Checks every step: a note holds at most 300 characters, a message's text 1 to 8,000, a message
/// needs a `connection_request` before it (messages reach only first-degree connections), and a
/// template naming an unknown variable is a 400 naming it and the step. Unknown senders are a 400
/// naming them.
#[action(scope = "write", idempotent, http = "POST /sequences")]
pub async fn create_sequence(ctx: Ctx, input: CreateSequenceInput) -> Result<Sequence, ApiError> {
    let name = check_name(&input.name)?;
    let steps = check_steps(input.steps)?;
    let settings = input
        .settings
        .unwrap_or_default()
        .apply(Settings::default())?;
    let schedule = input.schedule.unwrap_or_default();
    let mut tx = ctx.tx().await?;
    let sender_ids = check_senders(&mut tx, ctx.workspace_id(), input.sender_ids).await?;
    let id = ids::new_id("seq");
    let now = ctx.now_ms();
    sqlx::query(
        "insert into sequences (id, workspace_id, name, status, steps, schedule, settings, created_at, updated_at) \
         values ($1, $2, $3, 'draft', $4, $5, $6, $7, $7)",
    )
    .bind(&id)
    .bind(ctx.workspace_id())
    .bind(&name)
    .bind(json_text(&steps)?)
    .bind(json_text(&schedule)?)
    .bind(json_text(&settings)?)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    write_senders(&mut tx, ctx.workspace_id(), &id, &sender_ids).await?;
    fetch(&mut tx, ctx.workspace_id(), &id, now).await
}

outreach_runtime::prelude::example!(create_sequence,
    request: {
        "name": "Q3 heads of sales",
        "sender_ids": ["snd_jp6TNuolp8f32URYMVrb"],
        "settings": {"exit_after_days_without_acceptance": 14},
        "steps": [
            {"type": "view_profile"},
            {
                "delay_hours": 24,
                "note": "Hi {{first_name|there}}, I work with sales teams like {{company_name}}'s and would like to connect.",
                "type": "connection_request"
            },
            {
                "condition": {"kind": "connected", "within_days": 7},
                "else_step": "inmail",
                "then_step": "thanks",
                "type": "condition"
            },
            {
                "delay_hours": 4,
                "key": "thanks",
                "next_step": "finish",
                "type": "message",
                "variants": [
                    {"text": "Thanks for connecting, {{first_name}}! Would a short call next week be useful?"},
                    {"text": "Glad we are connected, {{first_name}}. Worth a 15-minute call?", "weight": 2}
                ]
            },
            {
                "key": "inmail",
                "subject": "Sales teams at {{company_name|your company}}",
                "text": "Hi {{first_name|there}}, I sent an invitation last week; in case InMail suits you better: would a short call be useful?",
                "type": "inmail"
            }
        ]
    },
    response: {
        "activated_at": null,
        "created_at": "2026-11-23T21:19:40.394Z",
        "enrollment_counts": {
            "active": 0,
            "awaiting_approval": 0,
            "failed": 0,
            "finished": 0,
            "paused": 0,
            "scheduled": 0
        },
        "finished_at": null,
        "id": "seq_sGbl2nzkshQDV6qitLc9",
        "name": "Q3 heads of sales",
        "schedule": {"respect_prospect_timezone": false},
        "sender_ids": ["snd_jp6TNuolp8f32URYMVrb"],
        "sending": {
            "next_send_at": null,
            "reason": "The sequence is a draft; `activate_sequence` starts it.",
            "sending": false
        },
        "settings": {
            "exit_after_days_without_acceptance": 14,
            "out_of_office_hold_days": 7,
            "skip_if_contacted_within_days": 30,
            "skip_if_in_other_live_sequence": true,
            "stop_on_reply": true
        },
        "status": "draft",
        "steps": [
            {"delay_hours": 0, "key": "s1", "note": null, "text": null, "type": "view_profile"},
            {
                "delay_hours": 24,
                "key": "s2",
                "note": "Hi {{first_name|there}}, I work with sales teams like {{company_name}}'s and would like to connect.",
                "text": null,
                "type": "connection_request"
            },
            {
                "condition": {"kind": "connected", "within_days": 7},
                "delay_hours": 0,
                "else_step": "inmail",
                "key": "s3",
                "note": null,
                "text": null,
                "then_step": "thanks",
                "type": "condition"
            },
            {
                "delay_hours": 4,
                "key": "thanks",
                "next_step": "finish",
                "note": null,
                "text": null,
                "type": "message",
                "variants": [
                    {"enabled": true, "key": "a", "text": "Thanks for connecting, {{first_name}}! Would a short call next week be useful?", "weight": 1},
                    {"enabled": true, "key": "b", "text": "Glad we are connected, {{first_name}}. Worth a 15-minute call?", "weight": 2}
                ]
            },
            {
                "delay_hours": 0,
                "key": "inmail",
                "note": null,
                "subject": "Sales teams at {{company_name|your company}}",
                "text": "Hi {{first_name|there}}, I sent an invitation last week; in case InMail suits you better: would a short call be useful?",
                "type": "inmail"
            }
        ],
        "updated_at": "2026-11-23T21:19:40.394Z"
    }
);

outreach_runtime::prelude::parity!(create_sequence, write,
    ok: {
        "name": "New ${tag}",
        "schedule": {"respect_prospect_timezone": true},
        "sender_ids": ["$sender"],
        "settings": {"stop_on_reply": false},
        "steps": [
            {"type": "view_profile"},
            {
                "delay_hours": 24,
                "note": "Hi {{first_name|there}}, I work with teams like {{company_name}}.",
                "type": "connection_request"
            },
            {
                "delay_hours": 48,
                "text": "Thanks for connecting, {{first_name}}!",
                "type": "message"
            }
        ]
    },
    fails: {
        "name": "Bad",
        "steps": [{"text": "Hi", "type": "message"}]
    } => INVALID_REQUEST
);

/// The input of actions that name one sequence.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SequenceId {
    /// `seq_...`
    pub id: String,
}

/// Get a sequence by id.
///
/// With enrollment counts per status and whether it is sending now.
///
/// Returns its steps, senders, schedule and settings, how many enrollments are in each status, and
/// whether it is sending now (why not, and when the next step is due).
#[action(scope = "read", http = "GET /sequences/{id}")]
pub async fn get_sequence(ctx: Ctx, input: SequenceId) -> Result<Sequence, ApiError> {
    let mut conn = ctx.db().pool().acquire().await?;
    let mut sequence = fetch(&mut conn, ctx.workspace_id(), &input.id, ctx.now_ms()).await?;
    if let Err(error) = crate::provider::configured(ctx.config()) {
        sequence.sending = Sending {
            sending: false,
            reason: Some(error.message),
            next_send_at: None,
        };
    }
    Ok(sequence)
}

outreach_runtime::prelude::example!(get_sequence,
    request: {"id": "seq_sGbl2nzkshQDV6qitLc9"},
    response: {
        "activated_at": "2026-11-23T21:19:40.461Z",
        "created_at": "2026-11-23T21:19:40.394Z",
        "enrollment_counts": {
            "active": 0,
            "awaiting_approval": 0,
            "failed": 0,
            "finished": 1,
            "paused": 0,
            "scheduled": 1
        },
        "finished_at": null,
        "id": "seq_sGbl2nzkshQDV6qitLc9",
        "name": "Q3 heads of sales (DACH)",
        "schedule": {"respect_prospect_timezone": false},
        "sender_ids": ["snd_jp6TNuolp8f32URYMVrb"],
        "sending": {"next_send_at": "2026-11-23T21:19:40.433Z", "reason": null, "sending": true},
        "settings": {
            "exit_after_days_without_acceptance": 14,
            "out_of_office_hold_days": 7,
            "skip_if_contacted_within_days": 60,
            "skip_if_in_other_live_sequence": true,
            "stop_on_reply": true
        },
        "status": "active",
        "steps": [
            {"delay_hours": 0, "note": null, "text": null, "type": "view_profile"},
            {
                "delay_hours": 24,
                "note": "Hi {{first_name|there}}, I work with sales teams like {{company_name}}'s and would like to connect.",
                "text": null,
                "type": "connection_request"
            },
            {
                "delay_hours": 72,
                "note": null,
                "text": "Thanks for connecting, {{first_name}}! Would a short call next week be useful?",
                "type": "message"
            }
        ],
        "updated_at": "2026-11-23T21:19:40.461Z"
    }
);

outreach_runtime::prelude::parity!(get_sequence, timed_read,
    ok: {"id": "$active"},
    fails: {"id": "$missing:seq"} => NOT_FOUND
);

/// The input of `list_sequences`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListSequencesInput {
    /// Only this status.
    pub status: Option<SequenceStatus>,
    #[serde(flatten)]
    pub page: PageParams,
}

/// List sequences, newest first.
///
/// Each with its steps, senders and enrollment counts.
///
/// Filter by `status`. Paged with `limit` (1 to 200, default 25) and `offset`; follow
/// `next_offset` while `has_more`.
#[action(scope = "read", http = "GET /sequences")]
pub async fn list_sequences(
    ctx: Ctx,
    input: ListSequencesInput,
) -> Result<Page<Sequence>, ApiError> {
    let status = input.status.map(SequenceStatus::as_str);
    let filter = if status.is_some() {
        "workspace_id = $1 and status = $2"
    } else {
        "workspace_id = $1 and $2 = $2"
    };
    let mut page = paged(
        ctx.db().pool(),
        input.page,
        format!("select count(*) from sequences where {filter}"),
        format!(
            "select {SEQUENCE_COLUMNS} from sequences where {filter} order by created_at desc, id desc limit $3 offset $4"
        ),
        |query| query.bind(ctx.workspace_id()).bind(status.unwrap_or("")),
        Sequence::from_row,
    )
    .await?;
    let mut conn = ctx.db().pool().acquire().await?;
    complete(&mut conn, &mut page.items, ctx.now_ms()).await?;
    Ok(page)
}

outreach_runtime::prelude::example!(list_sequences,
    request: {"limit": 1, "status": "active"},
    response: {
        "count": 1,
        "has_more": false,
        "items": [
            {
                "activated_at": "2026-11-23T21:19:40.461Z",
                "created_at": "2026-11-23T21:19:40.394Z",
                "enrollment_counts": {
                    "active": 0,
                    "awaiting_approval": 0,
                    "failed": 0,
                    "finished": 1,
                    "paused": 0,
                    "scheduled": 1
                },
                "finished_at": null,
                "id": "seq_sGbl2nzkshQDV6qitLc9",
                "name": "Q3 heads of sales (DACH)",
                "schedule": {"respect_prospect_timezone": false},
                "sender_ids": ["snd_jp6TNuolp8f32URYMVrb"],
                "sending": {"next_send_at": "2026-11-23T21:19:40.433Z", "reason": null, "sending": true},
                "settings": {
                    "exit_after_days_without_acceptance": 14,
                    "out_of_office_hold_days": 7,
                    "skip_if_contacted_within_days": 60,
                    "skip_if_in_other_live_sequence": true,
                    "stop_on_reply": true
                },
                "status": "active",
                "steps": [
                    {"delay_hours": 0, "note": null, "text": null, "type": "view_profile"},
                    {
                        "delay_hours": 24,
                        "note": "Hi {{first_name|there}}, I work with sales teams like {{company_name}}'s and would like to connect.",
                        "text": null,
                        "type": "connection_request"
                    },
                    {
                        "delay_hours": 72,
                        "note": null,
                        "text": "Thanks for connecting, {{first_name}}! Would a short call next week be useful?",
                        "type": "message"
                    }
                ],
                "updated_at": "2026-11-23T21:19:40.461Z"
            }
        ],
        "next_offset": null,
        "offset": 0,
        "total": 1
    }
);

outreach_runtime::prelude::parity!(list_sequences, timed_read,
    ok: {"limit": 10, "status": "active"},
    fails: {"status": "running"} => INVALID_REQUEST
);

/// The input of `update_sequence`: only the fields given change.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdateSequenceInput {
    /// `seq_...`
    pub id: String,
    #[schemars(length(min = 1, max = 200), regex(pattern = crate::common::NOT_BLANK))]
    pub name: Option<String>,
    /// Replaces every step.
    #[schemars(length(max = 20))]
    pub steps: Option<Vec<Step>>,
    /// Replaces every sender (`snd_...`).
    #[schemars(length(max = 20))]
    pub sender_ids: Option<Vec<String>>,
    pub schedule: Option<Schedule>,
    pub settings: Option<SettingsInput>,
}

/// Update a sequence.
///
/// The name changes in any status, the rest only in `draft` or `paused`. Waiting approval texts
/// are rendered again; one that fails refuses the update.
///
/// Steps, senders, schedule and settings change only in `draft` and `paused` (otherwise 409
/// `invalid_state` naming the status: pause the sequence first). Steps are checked as on create.
/// The texts of items waiting in the approval queue are rendered again with the new steps; if they
/// no longer render for some prospect (too long, a value missing), the update is a 400 naming them
/// and nothing changes. A sender that still has live enrollments in this sequence cannot be
/// removed (409).
#[action(scope = "write", idempotent, http = "PATCH /sequences/{id}")]
pub async fn update_sequence(ctx: Ctx, input: UpdateSequenceInput) -> Result<Sequence, ApiError> {
    let name = input.name.as_deref().map(check_name).transpose()?;
    let steps = input.steps.map(check_steps).transpose()?;
    let workspace_id = ctx.workspace_id();
    let now = ctx.now_ms();
    let edits_content = steps.is_some()
        || input.sender_ids.is_some()
        || input.schedule.is_some()
        || input.settings.is_some();
    let mut tx = ctx.tx().await?;
    // New content renders its pending approval items again: the people of its live enrollments
    // are locked before the sequence (see `person_lock`), as stop_sequence takes them.
    let mut tx = if edits_content {
        crate::person_lock::lock_of_sequence(&mut tx, workspace_id, &input.id).await?
    } else {
        crate::person_lock::lock(&mut tx, workspace_id, []).await?
    };
    let current = lock(&mut tx, workspace_id, &input.id, now).await?;
    if edits_content {
        tx.confirm_of_sequence(workspace_id, &input.id).await?;
    }
    if edits_content
        && !matches!(
            current.status,
            SequenceStatus::Draft | SequenceStatus::Paused
        )
    {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "Sequence `{}` is `{}`; its steps, senders, schedule and settings change only in `draft` or `paused` (pause it with `pause_sequence` first). Its name may change now.",
                current.id, current.status
            ),
        )
        .with_extra("status", current.status.as_str()));
    }
    let settings = input
        .settings
        .map(|settings| settings.apply(current.settings.clone()))
        .transpose()?;
    if let Some(sender_ids) = input.sender_ids {
        let sender_ids = check_senders(&mut tx, workspace_id, sender_ids).await?;
        let kept: HashSet<&String> = sender_ids.iter().collect();
        let removed: Vec<&String> = current
            .sender_ids
            .iter()
            .filter(|id| !kept.contains(id))
            .collect();
        for sender_id in removed {
            let live: i64 = sqlx::query(
                "select count(*) as n from enrollments where sequence_id = $1 and sender_id = $2 \
                 and status in ('awaiting_approval', 'scheduled', 'active', 'paused')",
            )
            .bind(&current.id)
            .bind(sender_id)
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
            if live > 0 {
                return Err(ApiError::new(
                    ErrorCode::INVALID_STATE,
                    format!(
                        "Sender `{sender_id}` has {live} live enrollments in sequence `{}`; stop them (`stop_enrollment`) before removing the sender.",
                        current.id
                    ),
                ));
            }
        }
        write_senders(&mut tx, workspace_id, &current.id, &sender_ids).await?;
    }
    if let Some(steps) = &steps {
        rerender_pending(&mut tx, workspace_id, &current.id, steps).await?;
    }
    sqlx::query(
        "update sequences set \
         name = coalesce($3, name), steps = coalesce($4, steps), schedule = coalesce($5, schedule), \
         settings = coalesce($6, settings), updated_at = $7 \
         where workspace_id = $1 and id = $2",
    )
    .bind(workspace_id)
    .bind(&current.id)
    .bind(name)
    .bind(steps.as_ref().map(json_text).transpose()?)
    .bind(input.schedule.as_ref().map(json_text).transpose()?)
    .bind(settings.as_ref().map(json_text).transpose()?)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    fetch(&mut tx, workspace_id, &current.id, now).await
}

outreach_runtime::prelude::example!(update_sequence,
    request: {
        "id": "seq_sGbl2nzkshQDV6qitLc9",
        "name": "Q3 heads of sales (DACH)",
        "settings": {"skip_if_contacted_within_days": 60}
    },
    response: {
        "activated_at": null,
        "created_at": "2026-11-23T21:19:40.394Z",
        "enrollment_counts": {
            "active": 0,
            "awaiting_approval": 0,
            "failed": 0,
            "finished": 0,
            "paused": 0,
            "scheduled": 0
        },
        "finished_at": null,
        "id": "seq_sGbl2nzkshQDV6qitLc9",
        "name": "Q3 heads of sales (DACH)",
        "schedule": {"respect_prospect_timezone": false},
        "sender_ids": ["snd_jp6TNuolp8f32URYMVrb"],
        "sending": {
            "next_send_at": null,
            "reason": "The sequence is a draft; `activate_sequence` starts it.",
            "sending": false
        },
        "settings": {
            "exit_after_days_without_acceptance": 14,
            "out_of_office_hold_days": 7,
            "skip_if_contacted_within_days": 60,
            "skip_if_in_other_live_sequence": true,
            "stop_on_reply": true
        },
        "status": "draft",
        "steps": [
            {"delay_hours": 0, "note": null, "text": null, "type": "view_profile"},
            {
                "delay_hours": 24,
                "note": "Hi {{first_name|there}}, I work with sales teams like {{company_name}}'s and would like to connect.",
                "text": null,
                "type": "connection_request"
            },
            {
                "delay_hours": 72,
                "note": null,
                "text": "Thanks for connecting, {{first_name}}! Would a short call next week be useful?",
                "type": "message"
            }
        ],
        "updated_at": "2026-11-23T21:19:40.399Z"
    }
);

outreach_runtime::prelude::parity!(update_sequence, write,
    ok: {
        "id": "$draft",
        "name": "Renamed ${tag}",
        "steps": [{"note": "Hi {{first_name|there}}", "type": "connection_request"}]
    },
    fails: {"id": "$active", "steps": []} => INVALID_STATE
);

/// Renders the pending approval items of a sequence again with new steps, so a person approves
/// the texts that will be sent. Any prospect they no longer render for refuses the whole update.
async fn rerender_pending(
    conn: &mut PersonTx<'_>,
    workspace_id: &str,
    sequence_id: &str,
    steps: &[Step],
) -> Result<(), ApiError> {
    let sql = format!(
        // The prospect's columns first: `Prospect::from_row` reads them by position.
        "select {}, a.id as approval_id from approvals a join prospects p on p.id = a.prospect_id \
         where a.workspace_id = $1 and a.sequence_id = $2 and a.kind = 'enrollment' and a.status = 'pending'",
        *crate::prospects::JOINED_COLUMNS
    );
    let rows = sqlx::query(AssertSqlSafe(sql))
        .bind(workspace_id)
        .bind(sequence_id)
        .fetch_all(&mut **conn)
        .await?;
    let mut problems = Vec::new();
    let mut rendered = Vec::with_capacity(rows.len());
    for row in &rows {
        let approval_id: String = row.try_get("approval_id")?;
        let prospect = Prospect::from_row(row)?;
        match render_steps(steps, &prospect) {
            Ok(texts) => rendered.push((approval_id, texts)),
            Err(problem) => problems.push(format!(
                "prospect `{}`: {}",
                prospect.id,
                problem.sentence()
            )),
        }
    }
    if !problems.is_empty() {
        let shown = problems
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ");
        let more = problems.len().saturating_sub(10);
        let more = if more > 0 {
            format!(" (and {more} more)")
        } else {
            String::new()
        };
        return Err(ApiError::invalid_request(format!(
            "The new `steps` do not render for {} prospects waiting for approval: {shown}{more}. Add fallbacks, shorten the texts, or reject those items first.",
            problems.len()
        )));
    }
    for (approval_id, texts) in rendered {
        // An agent's drafts and a person's edits give way to the new steps' texts.
        let texts = json_text(&texts)?;
        crate::approval_items::render_again(conn, workspace_id, &approval_id, &texts).await?;
    }
    Ok(())
}

/// Delete a draft sequence.
///
/// With its enrollments and approval items; stop a non-draft instead.
///
/// Only a `draft` can be deleted (nothing of it was sent); any other status is a 409
/// `invalid_state`.
#[action(scope = "write", idempotent, http = "DELETE /sequences/{id}")]
pub async fn delete_sequence(ctx: Ctx, input: SequenceId) -> Result<Deleted, ApiError> {
    let workspace_id = ctx.workspace_id();
    let mut tx = ctx.tx().await?;
    // Its approval items and enrollments go too: their people are locked before the sequence
    // (see `person_lock`), as stop_sequence takes them.
    let mut tx = crate::person_lock::lock_of_sequence(&mut tx, workspace_id, &input.id).await?;
    let current = lock(&mut tx, workspace_id, &input.id, ctx.now_ms()).await?;
    tx.confirm_of_sequence(workspace_id, &input.id).await?;
    if current.status != SequenceStatus::Draft {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "Sequence `{}` is `{}`; only a `draft` can be deleted. Use `stop_sequence` to end it.",
                current.id, current.status
            ),
        )
        .with_extra("status", current.status.as_str()));
    }
    crate::approval_items::delete_of_sequence(&mut tx, workspace_id, &current.id).await?;
    crate::enrollments::delete_of_sequence(&mut tx, workspace_id, &current.id).await?;
    for sql in [
        "delete from sequence_senders where workspace_id = $1 and sequence_id = $2",
        "delete from sequences where workspace_id = $1 and id = $2",
    ] {
        sqlx::query(sql)
            .bind(workspace_id)
            .bind(&current.id)
            .execute(&mut *tx)
            .await?;
    }
    crate::followups::runs_decided(&mut tx, ctx.clock(), workspace_id, ctx.now_ms()).await?;
    Ok(Deleted {
        id: current.id,
        deleted: true,
    })
}

outreach_runtime::prelude::example!(delete_sequence,
    request: {"id": "seq_rC0HRQ38mzghfpqopFLy"},
    response: {"deleted": true, "id": "seq_rC0HRQ38mzghfpqopFLy"}
);

outreach_runtime::prelude::parity!(delete_sequence, write,
    ok: {"id": "$draft"},
    fails: {"id": "$active"} => INVALID_STATE
);
/// Completes an active sequence once none of its enrollments is live any more: every approved
/// person went through its steps or left it. (Adding people is for `draft`, `active` and
/// `paused` sequences; a completed one is done.)
pub(crate) async fn complete_if_done(
    conn: &mut sqlx::AnyConnection,
    sequence_id: &str,
    now: i64,
) -> Result<(), ApiError> {
    let live = crate::step_jobs::LIVE_SQL;
    let completed: Option<String> = sqlx::query_scalar(AssertSqlSafe(format!(
        "update sequences set status = 'completed', finished_at = $2, updated_at = $2 \
         where id = $1 and status = 'active' and not exists (select 1 from enrollments e \
         where e.sequence_id = $1 and e.status in {live}) returning workspace_id"
    )))
    .bind(sequence_id)
    .bind(now)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(workspace_id) = completed {
        events::record(
            conn,
            &workspace_id,
            now,
            EventType::SequenceCompleted,
            serde_json::json!({"sequence_id": sequence_id}),
        )
        .await?;
    }
    Ok(())
}

/// The follow-up of enrollments ended by a stop, a triage, a rejection or an expiry
/// ([`crate::followups::sequence_ended`]): completes their sequence if nobody in it is live.
async fn complete_when_ended(job: JobCtx) -> JobResult {
    let ended: SequenceEnded = job.args()?;
    let now = job.now_ms();
    let mut tx = job.tx().await?;
    // The sequence's row first: a call adding people to it holds the row until it commits, and
    // the check below, a statement after this one, then sees them (on PostgreSQL each statement
    // reads what has committed before it starts). This transaction holds nothing else.
    sqlx::query("update sequences set updated_at = updated_at where id = $1")
        .bind(&ended.sequence_id)
        .execute(&mut *tx)
        .await?;
    complete_if_done(&mut tx, &ended.sequence_id, now).await?;
    drop(tx);
    Ok(JobOutcome::Done)
}

outreach_runtime::prelude::job!(SequenceEnded::KIND, complete_when_ended);

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn blank_prospect() -> Prospect {
        use crate::prospects::ProspectSource;
        Prospect {
            id: "prs_x".into(),
            first_name: None,
            last_name: None,
            full_name: None,
            headline: None,
            title: None,
            seniority: None,
            department: None,
            company_name: None,
            company_domain: None,
            company_industry: None,
            company_size: None,
            location: None,
            country: None,
            timezone: None,
            profile_url: None,
            email: None,
            phone: None,
            tags: Vec::new(),
            custom_fields: Default::default(),
            score: None,
            tier: None,
            targeting_id: None,
            targeting_version: None,
            scored_at: None,
            do_not_contact: false,
            connection_state: None,
            last_contacted_at: None,
            last_replied_at: None,
            source: ProspectSource::Api,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
        }
    }
}
