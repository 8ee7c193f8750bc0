//! Delivery: the durable jobs that perform approved outreach on the network, exactly once.
//!
//! Each live enrollment has one job (`outreach_step`, unique per enrollment) that performs its
//! next step when it is due and then snoozes until the step after; pausing, stopping or finishing
//! the enrollment (or pausing its sequence) makes the job's next run end it, and resuming enqueues
//! it again. A run, in order:
//!
//! 1. In the job's fenced transaction: re-read the enrollment, its sequence, its prospect and its
//!    sender; anything that says "not now" (not approved, paused, outside the sender's working
//!    hours in its zone, too soon after the sender's last action, a limit reached) snoozes the job
//!    to the time it lifts, without using an attempt.
//! 2. Still in that transaction: the sender's quota unit is taken (the sender row is locked, so
//!    no number of workers overshoots a limit) and an intent row is written; both commit
//!    ([`JobCtx::commit`]) *before* the network is called.
//! 3. The network call carries the intent's id as its idempotency token.
//! 4. A new fenced transaction records the outcome: the intent, the enrollment's history, the
//!    next step's time, the conversation, the prospect's `last_contacted_at`.
//!
//! A crash between 2 and 4 leaves a `pending` intent; the next run asks the network whether it
//! happened ([`NetworkProvider::find_outbound`]) and records the answer instead of sending again.
//! Refusals for the account (limit signal, disconnected) give the quota unit back and wait;
//! refusals for the person (unreachable, cannot resend yet) fail the enrollment with the error.
//!
//! ## One lock order (PostgreSQL)
//!
//! A run holds its job row for the whole of each of its transactions. In the first it locks
//! its enrollment (`skip locked`: if another transaction holds it, the job is given back at
//! once); in the outcome transaction it writes the enrollment's history, the prospect, the
//! conversation and the enrollment, and may complete the sequence. Any other transaction that
//! changes those rows takes them in this order, or the two can wait for each other until
//! PostgreSQL ends one (a call then answers 409 `conflict` with `retryable: true`; a job tries
//! again later):
//!
//! 1. the step jobs of the enrollments it touches, all at once in enrollment id order
//!    ([`lock_step_job`], [`lock_steps_of_people`], [`lock_live_of_sequence`]);
//! 2. approval items, all at once in the order `created_at`, then id ([`lock_pending_items`];
//!    a decision locks the items it chose before it writes any);
//! 3. the prospect and the conversation;
//! 4. the enrollments, in id order;
//! 5. the sequence.
//!
//! A transaction that handles several people (a triage batch, the sandbox's due events) locks
//! the step jobs of all of them before the first person's prospect. On SQLite none of this
//! applies: one transaction writes at a time.

pub mod inbound;
pub mod intents;
pub mod replies;

use outreach_runtime::prelude::{
    ApiError, Clock, JobCtx, JobError, JobOutcome, JobResult, NewJob, enqueue, jobs,
};
use rand::Rng;
use serde::{Deserialize, Serialize};
use sqlx::{AnyConnection, Row};

use crate::enrollments::record_event;
use crate::network::{
    Account, NetworkError, NetworkProvider, Outbound, OutboundKind, OutboundRecord, Sent,
    network_for,
};
use crate::senders::{self, QuotaKind, SenderRow, SenderStatus};
use crate::sequences::{RenderedText, SequenceStatus, Step, StepType};
use intents::{IntentStatus, NewIntent};

/// The job kind of an enrollment's steps.
pub const STEP_JOB: &str = "outreach_step";

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;
/// A sender acts at most once in this many milliseconds (a random gap in this range), so a
/// morning's work goes out spread over the morning, never in a burst.
const GAP_MS: std::ops::RangeInclusive<i64> = 30_000..=90_000;
/// How long an enrollment waits before looking again at a sender that cannot send (disconnected,
/// restricted, without working hours).
const BLOCKED_RETRY_MS: i64 = HOUR_MS;

/// What an `outreach_step` job carries.
#[derive(Debug, Serialize, Deserialize)]
struct StepPayload {
    enrollment_id: String,
}

/// What a step job's `unique_key` starts with; the enrollment's id follows.
const STEP_KEY_PREFIX: &str = "enrollment:";

fn step_key(enrollment_id: &str) -> String {
    format!("{STEP_KEY_PREFIX}{enrollment_id}")
}

/// Locks (in the caller's transaction) the enrollment's step job, waiting or running, until the
/// transaction ends; waits for a run of it in flight first. PostgreSQL only: on SQLite the
/// transactions already run one after the other.
///
/// A run holds its job row (its fenced transaction) and then locks the enrollment and its
/// prospect. A transaction that changes either of those and then schedules or cancels the step
/// must call this first: locks are taken job first, everywhere, or the two transactions wait for
/// each other until PostgreSQL aborts one. A waiting job locked here is not claimed (workers skip
/// locked jobs) until the transaction ends. (A run that finds its enrollment locked does not wait
/// either: [`prepare`] gives the job back instead.)
pub async fn lock_step_job(conn: &mut AnyConnection, enrollment_id: &str) -> Result<(), ApiError> {
    if locks_rows_one_by_one(conn) {
        sqlx::query(
            "select id from jobs where kind = $1 and unique_key = $2 and state in ('available', 'running') \
             for update",
        )
        .bind(STEP_JOB)
        .bind(step_key(enrollment_id))
        .fetch_all(&mut *conn)
        .await?;
    }
    Ok(())
}

/// Locks (in the caller's transaction, PostgreSQL only) the step jobs of the live enrollments of
/// `people` (prospect ids), all in one statement in enrollment id order, before anything else
/// of theirs: a run of one holds its job and then locks the enrollment, the prospect and its
/// conversation, which an accepted invitation, a reply, an inbox triage (an unsubscribe) or a
/// delete change. A transaction that handles several people (the sandbox's delivery of due
/// events, a triage batch) locks them all at once: one person's jobs and then another's would
/// cross a stop that locks both in id order. See [`lock_step_job`].
pub async fn lock_steps_of_people(
    conn: &mut AnyConnection,
    workspace_id: &str,
    people: &[&str],
) -> Result<(), ApiError> {
    if people.is_empty() || !locks_rows_one_by_one(conn) {
        return Ok(());
    }
    // Prospect ids are base62: a comma list is one bind however many people there are.
    let filter = "e.prospect_id = any(string_to_array($4, ','))";
    lock_live_step_jobs(conn, workspace_id, filter, &people.join(",")).await
}

/// Locks the step jobs of the workspace's live enrollments that `filter` (a condition on `e`,
/// with `value` as `$4`) selects, in enrollment id order, in one statement. PostgreSQL only: the
/// callers check.
async fn lock_live_step_jobs(
    conn: &mut AnyConnection,
    workspace_id: &str,
    filter: &str,
    value: &str,
) -> Result<(), ApiError> {
    let live = crate::enrollments::LIVE_SQL;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "select j.id from jobs j where j.kind = $1 and j.state in ('available', 'running') \
         and j.unique_key in (select $2 || e.id from enrollments e \
         where e.workspace_id = $3 and {filter} and e.status in {live}) \
         order by j.unique_key for update of j"
    )))
    .bind(STEP_JOB)
    .bind(STEP_KEY_PREFIX)
    .bind(workspace_id)
    .bind(value)
    .fetch_all(&mut *conn)
    .await?;
    Ok(())
}

/// Locks (in the caller's transaction, PostgreSQL only) pending approval items ([`PendingOf`]),
/// all in one statement in the order `created_at`, then id: a decision locks the items it chose
/// and then their enrollments, so a transaction that finishes an enrollment (and expires its
/// item) takes the item first.
pub async fn lock_pending_items(
    conn: &mut AnyConnection,
    workspace_id: &str,
    of: PendingOf<'_>,
) -> Result<(), ApiError> {
    if !locks_rows_one_by_one(conn) {
        return Ok(());
    }
    let (filter, ids) = match of {
        PendingOf::Enrollment(id) => ("kind = 'enrollment' and subject_id = $2", id.to_owned()),
        PendingOf::Sequence(id) => ("sequence_id = $2", id.to_owned()),
        PendingOf::People([]) | PendingOf::Items([]) => return Ok(()),
        // Prospect and item ids are base62: a comma list is one bind.
        PendingOf::People(people) => (
            "prospect_id = any(string_to_array($2, ','))",
            people.join(","),
        ),
        PendingOf::Items(items) => ("id = any(string_to_array($2, ','))", items.join(",")),
    };
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "select id from approvals where workspace_id = $1 and {filter} and status = 'pending' \
         order by created_at, id for update"
    )))
    .bind(workspace_id)
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    Ok(())
}

/// Whose pending approval items [`lock_pending_items`] locks.
#[derive(Debug, Clone, Copy)]
pub enum PendingOf<'a> {
    /// The item that decides whether this enrollment (`enr_...`) may start.
    Enrollment(&'a str),
    /// Every item of this sequence (`seq_...`).
    Sequence(&'a str),
    /// Every item about these prospects (`prs_...`): enrollments and reply drafts.
    People(&'a [&'a str]),
    /// These items (`apr_...`), as a decision chose them.
    Items(&'a [&'a str]),
}

/// Locks (in the caller's transaction, PostgreSQL only) the step jobs of a sequence's live
/// enrollments, its pending approval items, and then the live enrollments, as a caller about to
/// lock the sequence's own row, finish them and expire the items must.
///
/// The order is the module's (step jobs, items, enrollments, sequence). A run that ends the
/// sequence's last live enrollment holds its job and the enrollment and then completes the
/// sequence ([`complete_sequence_if_done`]); a reply does the same without a job; an approval
/// holds its items and then their enrollments. Stopping the sequence by locking its row first
/// and then the rest made each of them wait for the stop while the stop waited for them.
/// Editing a sequence's content and deleting a draft take the same locks first.
pub async fn lock_live_of_sequence(
    conn: &mut AnyConnection,
    workspace_id: &str,
    sequence_id: &str,
) -> Result<(), ApiError> {
    if !locks_rows_one_by_one(conn) {
        return Ok(());
    }
    lock_live_step_jobs(conn, workspace_id, "e.sequence_id = $4", sequence_id).await?;
    lock_pending_items(conn, workspace_id, PendingOf::Sequence(sequence_id)).await?;
    let live = crate::enrollments::LIVE_SQL;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "select id from enrollments where workspace_id = $1 and sequence_id = $2 and status in {live} \
         order by id for update"
    )))
    .bind(workspace_id)
    .bind(sequence_id)
    .fetch_all(&mut *conn)
    .await?;
    Ok(())
}

/// Enqueues (in the caller's transaction) the job that performs an enrollment's next step at
/// `run_at_ms`. An enrollment already holding a waiting job gets it moved to `run_at_ms`.
///
/// A run in flight may be about to end the job (because the sequence was not active yet): this
/// waits for it first ([`lock_step_job`]), so the job enqueued here is not dropped as a
/// duplicate of one that then ends. A caller that locked the enrollment or its prospect must
/// have called [`lock_step_job`] before it did.
pub async fn schedule(
    conn: &mut AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    enrollment_id: &str,
    run_at_ms: i64,
) -> Result<(), ApiError> {
    let key = step_key(enrollment_id);
    lock_step_job(conn, enrollment_id).await?;
    jobs::cancel_unique(&mut *conn, clock, STEP_JOB, &key).await?;
    enqueue(
        conn,
        clock,
        NewJob::new(
            STEP_JOB,
            serde_json::json!({"enrollment_id": enrollment_id}),
        )
        .workspace(workspace_id)
        .run_at(run_at_ms)
        .unique_key(key),
    )
    .await?;
    Ok(())
}

/// Enqueues the step jobs of a sequence's approved enrollments (on activation and resumption).
pub async fn schedule_sequence(
    conn: &mut AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    sequence_id: &str,
    now: i64,
) -> Result<(), ApiError> {
    let rows = sqlx::query(
        "select id, next_step_at from enrollments where workspace_id = $1 and sequence_id = $2 \
         and status in ('scheduled', 'active')",
    )
    .bind(workspace_id)
    .bind(sequence_id)
    .fetch_all(&mut *conn)
    .await?;
    for row in rows {
        let id: String = row.try_get("id")?;
        let at: Option<i64> = row.try_get("next_step_at")?;
        schedule(conn, clock, workspace_id, &id, at.unwrap_or(now).max(now)).await?;
    }
    Ok(())
}

/// The enrollment as the executor needs it.
struct EnrollmentRow {
    id: String,
    workspace_id: String,
    sequence_id: String,
    prospect_id: String,
    sender_id: Option<String>,
    status: String,
    step_index: i64,
    next_step_at: Option<i64>,
    slot_at: Option<i64>,
    invited_at: Option<i64>,
    accepted_at: Option<i64>,
}

/// Why a run has no enrollment to work on.
enum Unavailable {
    /// Deleted since the job was enqueued.
    Gone,
    /// Another transaction holds its row (PostgreSQL).
    Locked,
}

/// Reads and locks the enrollment (PostgreSQL; SQLite's write transaction holds the database),
/// without waiting for a transaction that holds it: that transaction may be waiting for this job.
async fn load_enrollment(
    conn: &mut AnyConnection,
    id: &str,
) -> Result<Result<EnrollmentRow, Unavailable>, ApiError> {
    let postgres = locks_rows_one_by_one(conn);
    let lock = if postgres {
        " for update skip locked"
    } else {
        ""
    };
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "select id, workspace_id, sequence_id, prospect_id, sender_id, status, step_index, next_step_at, \
         slot_at, invited_at, accepted_at from enrollments where id = $1{lock}"
    )))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        let exists = postgres
            && sqlx::query("select id from enrollments where id = $1")
                .bind(id)
                .fetch_optional(&mut *conn)
                .await?
                .is_some();
        return Ok(Err(if exists {
            Unavailable::Locked
        } else {
            Unavailable::Gone
        }));
    };
    Ok(Ok(EnrollmentRow {
        id: row.try_get("id")?,
        workspace_id: row.try_get("workspace_id")?,
        sequence_id: row.try_get("sequence_id")?,
        prospect_id: row.try_get("prospect_id")?,
        sender_id: row.try_get("sender_id")?,
        status: row.try_get("status")?,
        step_index: row.try_get("step_index")?,
        next_step_at: row.try_get("next_step_at")?,
        slot_at: row.try_get("slot_at")?,
        invited_at: row.try_get("invited_at")?,
        accepted_at: row.try_get("accepted_at")?,
    }))
}

/// What the executor reads of a prospect.
struct Person {
    profile_url: Option<String>,
    timezone: Option<String>,
    do_not_contact: bool,
}

async fn load_person(
    conn: &mut AnyConnection,
    prospect_id: &str,
) -> Result<Option<Person>, ApiError> {
    let row =
        sqlx::query("select profile_url, timezone, do_not_contact from prospects where id = $1")
            .bind(prospect_id)
            .fetch_optional(conn)
            .await?;
    let Some(row) = row else { return Ok(None) };
    Ok(Some(Person {
        profile_url: row.try_get("profile_url")?,
        timezone: row.try_get("timezone")?,
        do_not_contact: row.try_get::<i64, _>("do_not_contact")? != 0,
    }))
}

/// The texts a person approved for this enrollment, by step index.
async fn approved_texts(
    conn: &mut AnyConnection,
    workspace_id: &str,
    enrollment_id: &str,
) -> Result<Vec<RenderedText>, ApiError> {
    let row = sqlx::query(
        "select texts from approvals where workspace_id = $1 and kind = 'enrollment' and subject_id = $2 \
         and status = 'approved' order by decided_at desc limit 1",
    )
    .bind(workspace_id)
    .bind(enrollment_id)
    .fetch_optional(conn)
    .await?;
    match row {
        Some(row) => {
            serde_json::from_str(&row.try_get::<String, _>("texts")?).map_err(ApiError::internal)
        }
        None => Ok(Vec::new()),
    }
}

/// Ends a live enrollment with an exit reason (and its history entry). One a person stopped
/// meanwhile keeps their ending.
async fn finish(
    conn: &mut AnyConnection,
    enrollment: &EnrollmentRow,
    exit_reason: &str,
    now: i64,
) -> Result<(), ApiError> {
    let ended = sqlx::query(
        "update enrollments set status = 'finished', exit_reason = $2, next_step_at = null, updated_at = $3 \
         where id = $1 and status in ('scheduled', 'active', 'paused')",
    )
    .bind(&enrollment.id)
    .bind(exit_reason)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    if ended.rows_affected() == 0 {
        return Ok(());
    }
    record_event(
        conn,
        &enrollment.workspace_id,
        &enrollment.id,
        now,
        "finished",
        None,
        None,
        Some(exit_reason),
    )
    .await?;
    complete_sequence_if_done(conn, &enrollment.sequence_id, now).await
}

/// Completes an active sequence once none of its enrollments is live any more: every approved
/// person went through its steps or left it. (Adding people is for `draft`, `active` and
/// `paused` sequences; a completed one is done.)
pub(crate) async fn complete_sequence_if_done(
    conn: &mut AnyConnection,
    sequence_id: &str,
    now: i64,
) -> Result<(), ApiError> {
    sqlx::query(
        "update sequences set status = 'completed', finished_at = $2, updated_at = $2 \
         where id = $1 and status = 'active' and not exists (select 1 from enrollments e \
         where e.sequence_id = $1 and e.status in ('awaiting_approval', 'scheduled', 'active', 'paused'))",
    )
    .bind(sequence_id)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

/// Fails an enrollment with the network's refusal.
async fn fail(
    conn: &mut AnyConnection,
    enrollment: &EnrollmentRow,
    error: &NetworkError,
    now: i64,
) -> Result<(), ApiError> {
    let api: ApiError = error.clone().into();
    sqlx::query(
        "update enrollments set status = 'failed', last_error = $2, next_step_at = null, updated_at = $3 \
         where id = $1 and status in ('scheduled', 'active', 'paused')",
    )
    .bind(&enrollment.id)
    .bind(format!("{}: {}", api.code, api.message))
    .bind(now)
    .execute(&mut *conn)
    .await?;
    record_event(
        conn,
        &enrollment.workspace_id,
        &enrollment.id,
        now,
        "failed",
        Some(enrollment.step_index),
        None,
        Some(api.code.as_str()),
    )
    .await?;
    complete_sequence_if_done(conn, &enrollment.sequence_id, now).await
}

/// Moves an enrollment's next step to `wait.until`, holding `wait.slot` in its sender's queue.
async fn wait_until(
    conn: &mut AnyConnection,
    enrollment_id: &str,
    wait: Wait,
) -> Result<(), ApiError> {
    sqlx::query("update enrollments set next_step_at = $2, slot_at = $3 where id = $1")
        .bind(enrollment_id)
        .bind(wait.until)
        .bind(wait.slot)
        .execute(conn)
        .await?;
    Ok(())
}

/// The first instant at or after `after` inside the sender's working hours and, when the sequence
/// asks for it, inside the same hours in the prospect's zone.
pub fn next_window(
    sender: &SenderRow,
    prospect_zone: Option<&jiff::tz::TimeZone>,
    after: i64,
) -> Option<i64> {
    let mut at = after;
    for _ in 0..64 {
        let in_sender = senders::next_send_at(sender, at)?;
        let Some(zone) = prospect_zone else {
            return Some(in_sender);
        };
        let in_both = senders::hours::next_window(zone, &sender.schedule, in_sender)?;
        if in_both == in_sender {
            return Some(in_sender);
        }
        at = in_both;
    }
    None
}

fn jitter() -> i64 {
    rand::rng().random_range(GAP_MS)
}

fn quota_kind(kind: StepType) -> QuotaKind {
    match kind {
        StepType::ViewProfile => QuotaKind::ProfileView,
        StepType::ConnectionRequest => QuotaKind::ConnectionRequest,
        StepType::Message => QuotaKind::Message,
    }
}

fn network_kind(kind: StepType) -> OutboundKind {
    match kind {
        StepType::ViewProfile => OutboundKind::ProfileView,
        StepType::ConnectionRequest => OutboundKind::Invitation,
        StepType::Message => OutboundKind::Message,
    }
}

/// What the step's run decided before the network call (one value per run: its size is no cost).
#[allow(clippy::large_enum_variant)]
enum Plan {
    /// Nothing to send now; the job's outcome.
    Outcome(JobOutcome),
    /// Call the network with this intent (fresh, or pending from a run that died).
    Send(Box<Call>),
}

/// A network call about to be made for a step, and what it needs.
struct Call {
    enrollment: EnrollmentRow,
    step: Step,
    text: Option<String>,
    profile_url: String,
    sender_id: String,
    intent_id: String,
    /// The quota unit the intent holds.
    usage_id: Option<String>,
    /// The intent was pending already: ask the network whether it happened first.
    reconcile: bool,
}

async fn run_step(job: JobCtx) -> JobResult {
    let payload: StepPayload = job.payload_as()?;
    let plan = prepare(&job, &payload.enrollment_id).await?;
    let call = match plan {
        Plan::Outcome(outcome) => return Ok(outcome),
        Plan::Send(call) => *call,
    };
    let Call {
        enrollment,
        step,
        text,
        profile_url,
        sender_id,
        intent_id,
        usage_id,
        reconcile,
    } = call;
    // The intent and its quota unit are durable before the network hears of it.
    job.commit().await?;

    let network = network_for(job.config(), job.db(), job.clock())?;
    let to = Outbound {
        account: Account {
            workspace_id: &enrollment.workspace_id,
            sender_id: &sender_id,
        },
        profile_url: &profile_url,
        prospect_id: Some(&enrollment.prospect_id),
        intent: &intent_id,
    };
    let earlier = if reconcile {
        network
            .find_outbound(to.account, &intent_id)
            .await
            .map_err(|error| network_fault(&error))?
    } else {
        None
    };
    let result = match earlier {
        Some(record) => outcome_of(record),
        None => match step.kind {
            StepType::ViewProfile => network.view_profile(to).await.map(|_| Sent {
                provider_id: String::new(),
                at_ms: job.now_ms(),
            }),
            StepType::ConnectionRequest => network.invite(to, text.as_deref()).await,
            StepType::Message => {
                network
                    .send_message(to, text.as_deref().unwrap_or(""))
                    .await
            }
        },
    };
    if let Err(NetworkError::Transient(cause)) = &result {
        // The intent stays pending: the retry asks the network before it sends again.
        return Err(JobError::retry(format!("the network failed: {cause}")));
    }
    let mut tx = job.tx().await?;
    record_outcome(
        &mut tx,
        &job,
        &enrollment,
        &step,
        text.as_deref(),
        &sender_id,
        (&intent_id, usage_id.as_deref()),
        result,
    )
    .await
    .map_err(JobError::from)
}

/// A recorded outbound action as the result of the call it stands for.
fn outcome_of(record: OutboundRecord) -> Result<Sent, NetworkError> {
    if record.happened() {
        Ok(Sent {
            provider_id: record.provider_id.unwrap_or_default(),
            at_ms: record.at_ms,
        })
    } else {
        // A refusal the network logged: treated as that refusal, with no retry time known.
        Err(match record.outcome.as_str() {
            "not_connected" => NetworkError::NotConnected,
            "already_invited" => NetworkError::AlreadyInvited,
            "already_connected" => NetworkError::AlreadyConnected,
            "recipient_unreachable" => NetworkError::Unreachable,
            "account_disconnected" => NetworkError::AccountDisconnected,
            "account_restricted" => NetworkError::AccountRestricted,
            "network_limit_exceeded" => NetworkError::LimitExceeded { retry_at_ms: None },
            other => NetworkError::Transient(format!("the network logged `{other}`")),
        })
    }
}

fn network_fault(error: &NetworkError) -> JobError {
    JobError::retry(format!("asking the network: {error:?}"))
}

/// Step 1 and 2 of the module header: decide, and when sending, take the quota and write the
/// intent in the job's transaction.
async fn prepare(job: &JobCtx, enrollment_id: &str) -> Result<Plan, JobError> {
    let now = job.now_ms();
    let mut tx = job.tx().await?;
    let enrollment = match load_enrollment(&mut tx, enrollment_id).await? {
        Ok(enrollment) => enrollment,
        Err(Unavailable::Gone) => return Ok(Plan::Outcome(JobOutcome::Done)),
        // A change of the enrollment is being made; it may be waiting for this job's row (see
        // `lock_step_job`). Give the job back, due at once: the next run sees the change.
        Err(Unavailable::Locked) => return Ok(Plan::Outcome(JobOutcome::Snooze { until_ms: now })),
    };
    if !matches!(enrollment.status.as_str(), "scheduled" | "active") {
        // Paused, finished or failed: resuming enqueues the job again.
        return Ok(Plan::Outcome(JobOutcome::Done));
    }
    let sequence =
        crate::sequences::fetch_row(&mut tx, &enrollment.workspace_id, &enrollment.sequence_id)
            .await?;
    if sequence.status != SequenceStatus::Active {
        // A paused sequence's enrollments wait for `resume_sequence`, which enqueues them again;
        // a draft one's for `activate_sequence`.
        return Ok(Plan::Outcome(JobOutcome::Done));
    }
    if let Some(at) = enrollment.next_step_at.filter(|at| *at > now) {
        return Ok(Plan::Outcome(JobOutcome::Snooze { until_ms: at }));
    }
    let Ok(index) = usize::try_from(enrollment.step_index) else {
        return Err(JobError::discard("a negative step index"));
    };
    // Waiting for an acceptance, and the deadline has come: ask the network once more (its
    // signal can be late), then exit.
    if enrollment.invited_at.is_some() && enrollment.accepted_at.is_none() {
        let accepted = match (
            &enrollment.sender_id,
            load_person(&mut tx, &enrollment.prospect_id).await?,
        ) {
            (
                Some(sender_id),
                Some(Person {
                    profile_url: Some(url),
                    ..
                }),
            ) => {
                let network = network_for(job.config(), job.db(), job.clock())?;
                let account = Account {
                    workspace_id: &enrollment.workspace_id,
                    sender_id,
                };
                matches!(
                    network.connection_state(account, &url).await,
                    Ok(crate::network::ConnectionState::Connected)
                )
            }
            _ => false,
        };
        if !accepted {
            finish(&mut tx, &enrollment, "not_accepted", now).await?;
            return Ok(Plan::Outcome(JobOutcome::Done));
        }
        sqlx::query("update enrollments set accepted_at = $2 where id = $1")
            .bind(&enrollment.id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
    }
    let Some(step) = sequence.steps.get(index).cloned() else {
        finish(&mut tx, &enrollment, "completed_steps", now).await?;
        return Ok(Plan::Outcome(JobOutcome::Done));
    };
    let Some(person) = load_person(&mut tx, &enrollment.prospect_id).await? else {
        return Ok(Plan::Outcome(JobOutcome::Done));
    };
    if person.do_not_contact {
        finish(&mut tx, &enrollment, "do_not_contact", now).await?;
        return Ok(Plan::Outcome(JobOutcome::Done));
    }
    let (Some(sender_id), Some(profile_url)) =
        (enrollment.sender_id.clone(), person.profile_url.clone())
    else {
        return Err(JobError::discard(
            "the enrollment has no sender or the prospect no profile URL",
        ));
    };
    let sender = match senders::load(&mut tx, &enrollment.workspace_id, &sender_id).await {
        Ok(sender) => sender,
        Err(_) => {
            // A deleted sender: its enrollments cannot go on.
            fail(
                &mut tx,
                &enrollment,
                &NetworkError::AccountDisconnected,
                now,
            )
            .await?;
            return Ok(Plan::Outcome(JobOutcome::Done));
        }
    };

    // A run that died after its intent committed: settle that intent, never a second one. Such
    // a run never ended cleanly, so its job comes back on a later attempt (a clean end gives the
    // attempt back); a first attempt has no intent to look for, and the unique (enrollment, step)
    // index refuses a second intent if one were there.
    let earlier = if job.attempt() > 1 {
        intents::of_step(&mut tx, &enrollment.id, enrollment.step_index).await?
    } else {
        None
    };
    if let Some(intent) = earlier {
        if intent.status == IntentStatus::Pending {
            let text = text_of(&mut tx, &enrollment, &step).await?;
            return Ok(Plan::Send(Box::new(Call {
                enrollment,
                step,
                text,
                profile_url,
                sender_id,
                intent_id: intent.id,
                usage_id: intent.usage_id,
                reconcile: true,
            })));
        }
        return Err(JobError::discard(format!(
            "step {index} already has a completed intent `{}`",
            intent.id
        )));
    }

    let prospect_zone = if sequence.schedule.respect_prospect_timezone {
        person
            .timezone
            .as_deref()
            .and_then(|name| jiff::tz::TimeZone::get(name).ok())
    } else {
        None
    };
    // A slot taken earlier has come when the job runs (it snoozed until it).
    let turn = match enrollment.slot_at {
        Some(slot) if slot <= now => Turn::Holds(slot),
        _ => Turn::Queue,
    };
    let usage_id = match gate(
        &mut tx,
        job.clock(),
        Some(&enrollment.id),
        &sender,
        prospect_zone.as_ref(),
        quota_kind(step.kind),
        turn,
        now,
    )
    .await?
    {
        Ok(usage_id) => usage_id,
        Err(wait) => {
            wait_until(&mut tx, &enrollment.id, wait).await?;
            return Ok(Plan::Outcome(JobOutcome::Snooze {
                until_ms: wait.until,
            }));
        }
    };
    let text = text_of(&mut tx, &enrollment, &step).await?;
    let intent_id = intents::insert(
        &mut tx,
        &NewIntent {
            workspace_id: &enrollment.workspace_id,
            sender_id: &sender_id,
            prospect_id: &enrollment.prospect_id,
            kind: network_kind(step.kind).as_str(),
            enrollment_id: Some(&enrollment.id),
            step_index: Some(enrollment.step_index),
            message_id: None,
            text: text.as_deref(),
            usage_id: Some(&usage_id),
        },
        now,
    )
    .await?;
    Ok(Plan::Send(Box::new(Call {
        enrollment,
        step,
        text,
        profile_url,
        sender_id,
        intent_id,
        usage_id: Some(usage_id),
        reconcile: false,
    })))
}

/// Where a step stands in its sender's queue of send slots, for [`gate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// No slot: behind every slot already handed out, and queued when the sender is busy.
    Queue,
    /// The slot it holds (epoch ms) has come: it goes once the sender is free. Just after its
    /// slot (the step before went a little late) it waits for the gap to end; long after (the
    /// clock jumped, and other slots came due with it) it queues again.
    Holds(i64),
    /// A person's reply: it goes at the sender's next free moment, ahead of queued steps.
    First,
}

/// The gate's "not now": when to run again, and the slot taken in the sender's queue, if one was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Wait {
    pub until: i64,
    pub slot: Option<i64>,
}

impl Wait {
    fn until(until: i64) -> Self {
        Self { until, slot: None }
    }
}

/// Whether `sender` may act now: connected, inside its working hours (and the prospect's, when
/// given), clear of every limit, far enough from its last action and, for a step without a slot,
/// with no step queued ahead. When it may, one quota unit is taken in `tx` (the sender row is
/// locked first, so workers on every instance count one after the other) and its id returned.
/// When it is only busy, a step takes the next slot in the sender's queue, 30-90 s after the
/// last one handed out, so the steps waiting for one sender wake one at a time instead of all
/// together.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn gate(
    tx: &mut AnyConnection,
    clock: &Clock,
    enrollment_id: Option<&str>,
    sender: &SenderRow,
    prospect_zone: Option<&jiff::tz::TimeZone>,
    kind: QuotaKind,
    turn: Turn,
    now: i64,
) -> Result<Result<String, Wait>, ApiError> {
    if sender.status != SenderStatus::Connected {
        return Ok(Err(Wait::until(now + BLOCKED_RETRY_MS)));
    }
    let Some(window) = next_window(sender, prospect_zone, now) else {
        return Ok(Err(Wait::until(now + DAY_MS)));
    };
    if window > now {
        return Ok(Err(Wait::until(window + jitter())));
    }
    // Busy, or steps queued ahead: wait, before locking the sender and counting its quota (most
    // runs of a busy sender end here). Read without the lock, this can only make a run wait (a
    // sender's last action and its queue only get later), never let one through: the check
    // under the lock below decides.
    let pace = pace(tx, &sender.id).await?;
    let queued_ahead = turn == Turn::Queue && pace.queued_until.is_some_and(|at| at > now);
    let busy = 'decide: {
        if queued_ahead || pace.busy(now) {
            break 'decide pace;
        }
        let usage_id = match senders::take_quota(tx, sender, kind, now).await? {
            Ok(usage_id) => usage_id,
            Err(refusal) => {
                let until = refusal
                    .until_ms
                    .unwrap_or(now + BLOCKED_RETRY_MS)
                    .max(now + 1);
                let until = next_window(sender, prospect_zone, until).unwrap_or(until) + jitter();
                return Ok(Err(Wait::until(until)));
            }
        };
        if !locks_rows_one_by_one(tx) {
            return Ok(Ok(usage_id));
        }
        let last_action_at = last_action_at_before(tx, &sender.id, &usage_id).await?;
        let pace = Pace {
            last_action_at,
            ..pace
        };
        if !pace.busy(now) {
            return Ok(Ok(usage_id));
        }
        // Another worker acted between the read above and the lock: the unit goes back.
        senders::release_quota(tx, &usage_id).await?;
        pace
    };
    let wait = wait_turn(
        tx,
        clock,
        enrollment_id,
        sender,
        prospect_zone,
        turn,
        busy,
        now,
    )
    .await?;
    Ok(Err(wait))
}

/// Whether transactions on this connection lock rows one by one (PostgreSQL), so a row read
/// before it was locked may be out of date and a transaction in flight elsewhere must be waited
/// for row by row; not on SQLite, whose write transaction (`BEGIN IMMEDIATE`, from a job's fence
/// on) holds the whole database.
pub(crate) fn locks_rows_one_by_one(tx: &AnyConnection) -> bool {
    tx.backend_name().eq_ignore_ascii_case("postgresql")
}

/// A sender's pace: its last counted action and the last slot handed out in its queue.
#[derive(Debug, Clone, Copy)]
struct Pace {
    last_action_at: Option<i64>,
    queued_until: Option<i64>,
}

impl Pace {
    /// Inside the gap after the sender's last action.
    fn busy(&self, now: i64) -> bool {
        self.last_action_at
            .is_some_and(|last| last + *GAP_MS.start() > now)
    }
}

/// How many of a busy sender's other due steps one run queues.
const QUEUE_BATCH: i64 = 200;

/// Gives the sender's other steps that are due now and hold no slot the slots after `after`, one
/// each, 30-90 s apart, in this transaction: one run queues them all, instead of each of them
/// running only to find the sender busy. A slot is only when a step runs again; its run decides
/// everything anew. (The query repeats the condition of the jobs' unique-key index, so SQLite
/// finds each step's job through it rather than scanning every due job.) An enrollment waiting for an acceptance is left out: what is due for it is
/// its deadline, which sends nothing and must not wait in the queue. On PostgreSQL, steps another worker holds are skipped (they queue
/// themselves), so two runs never wait on each other's rows.
async fn queue_due_steps(
    tx: &mut AnyConnection,
    clock: &Clock,
    sender_id: &str,
    except_enrollment: Option<&str>,
    after: i64,
    now: i64,
) -> Result<(), ApiError> {
    let lock = if locks_rows_one_by_one(tx) {
        " for update of e, j skip locked"
    } else {
        ""
    };
    let due = sqlx::query(sqlx::AssertSqlSafe(format!(
        "select e.id as enrollment_id, j.id as job_id from enrollments e \
         join jobs j on j.kind = '{STEP_JOB}' and j.unique_key = 'enrollment:' || e.id \
         where e.sender_id = $1 and e.slot_at is null and e.status in ('scheduled', 'active') \
         and not (e.invited_at is not null and e.accepted_at is null) \
         and e.id <> $2 and j.state = 'available' and j.run_at <= $3 \
         and j.state in ('available', 'running') and j.unique_key is not null \
         order by j.run_at, j.id limit {QUEUE_BATCH}{lock}"
    )))
    .bind(sender_id)
    .bind(except_enrollment.unwrap_or(""))
    .bind(now)
    .fetch_all(&mut *tx)
    .await?;
    if due.is_empty() {
        return Ok(());
    }
    let mut slot = after;
    for row in &due {
        let enrollment_id: String = row.try_get("enrollment_id")?;
        let job_id: String = row.try_get("job_id")?;
        let at = slot + jitter();
        if jobs::move_waiting(tx, clock, &job_id, at).await? {
            wait_until(
                tx,
                &enrollment_id,
                Wait {
                    until: at,
                    slot: Some(at),
                },
            )
            .await?;
            slot = at;
        }
    }
    sqlx::query("update senders set queued_until = $2 where id = $1")
        .bind(sender_id)
        .bind(slot)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

async fn pace(conn: &mut AnyConnection, sender_id: &str) -> Result<Pace, ApiError> {
    let row = sqlx::query(
        "select queued_until, (select max(at) from sender_usage where sender_id = $1) as last \
         from senders where id = $1",
    )
    .bind(sender_id)
    .fetch_one(conn)
    .await?;
    Ok(Pace {
        last_action_at: row.try_get("last")?,
        queued_until: row.try_get("queued_until")?,
    })
}

/// A busy sender's answer to a step: a reply waits for the end of the gap; a step takes the
/// next slot in the queue (in `tx`, one statement, so two workers never take the same slot),
/// or, when that slot falls outside the working hours, the next window without a slot.
#[allow(clippy::too_many_arguments)]
async fn wait_turn(
    tx: &mut AnyConnection,
    clock: &Clock,
    enrollment_id: Option<&str>,
    sender: &SenderRow,
    prospect_zone: Option<&jiff::tz::TimeZone>,
    turn: Turn,
    pace: Pace,
    now: i64,
) -> Result<Wait, ApiError> {
    let last = pace.last_action_at.unwrap_or(now);
    match turn {
        Turn::First => return Ok(Wait::until(last + jitter())),
        // At most one slot lies within a gap before now, so only one step waits this way.
        Turn::Holds(slot) if now - slot < *GAP_MS.start() => {
            return Ok(Wait {
                until: last + *GAP_MS.start(),
                slot: Some(slot),
            });
        }
        Turn::Holds(_) | Turn::Queue => {}
    }
    let slot: i64 = sqlx::query(
        "update senders set queued_until = \
         (case when coalesce(queued_until, 0) > $2 then queued_until else $2 end) + $3 \
         where id = $1 returning queued_until",
    )
    .bind(&sender.id)
    .bind(last)
    .bind(jitter())
    .fetch_one(&mut *tx)
    .await?
    .try_get("queued_until")?;
    queue_due_steps(tx, clock, &sender.id, enrollment_id, slot, now).await?;
    Ok(match next_window(sender, prospect_zone, slot) {
        Some(at) if at == slot => Wait {
            until: slot,
            slot: Some(slot),
        },
        Some(at) => Wait::until(at + jitter()),
        None => Wait::until(now + DAY_MS),
    })
}

/// What a refusal for the account means for the sender (paused after a limit signal, marked
/// disconnected or restricted), and when to try again. `None` for refusals that concern the
/// person, not the account.
pub(crate) async fn account_refusal(
    tx: &mut AnyConnection,
    sender_id: &str,
    error: &NetworkError,
    now: i64,
) -> Result<Option<i64>, ApiError> {
    Ok(Some(match error {
        NetworkError::LimitExceeded { retry_at_ms } => {
            let until = retry_at_ms.unwrap_or(now + DAY_MS);
            senders::pause_sender(
                tx,
                sender_id,
                until,
                "the network signalled its limit for this account",
                now,
            )
            .await?;
            until
        }
        NetworkError::AccountRestricted => {
            senders::set_sender_status(tx, sender_id, SenderStatus::Restricted, now).await?;
            now + BLOCKED_RETRY_MS
        }
        NetworkError::AccountDisconnected => {
            senders::set_sender_status(tx, sender_id, SenderStatus::Disconnected, now).await?;
            now + BLOCKED_RETRY_MS
        }
        _ => return Ok(None),
    }))
}

/// The sender's last counted action other than `except` (the unit just taken).
async fn last_action_at_before(
    conn: &mut AnyConnection,
    sender_id: &str,
    except: &str,
) -> Result<Option<i64>, ApiError> {
    let row =
        sqlx::query("select max(at) as last from sender_usage where sender_id = $1 and id <> $2")
            .bind(sender_id)
            .bind(except)
            .fetch_one(conn)
            .await?;
    Ok(row.try_get("last")?)
}

/// The approved text of a step (a note or a message), if it has one.
async fn text_of(
    conn: &mut AnyConnection,
    enrollment: &EnrollmentRow,
    step: &Step,
) -> Result<Option<String>, ApiError> {
    if step.kind == StepType::ViewProfile {
        return Ok(None);
    }
    let texts = approved_texts(conn, &enrollment.workspace_id, &enrollment.id).await?;
    Ok(texts
        .into_iter()
        .find(|text| i64::from(text.step_index) == enrollment.step_index)
        .map(|text| text.text))
}

/// Step 4 of the module header: what came of the call, in the job's second transaction.
#[allow(clippy::too_many_arguments)]
async fn record_outcome(
    tx: &mut AnyConnection,
    job: &JobCtx,
    enrollment: &EnrollmentRow,
    step: &Step,
    text: Option<&str>,
    sender_id: &str,
    (intent_id, usage_id): (&str, Option<&str>),
    result: Result<Sent, NetworkError>,
) -> Result<JobOutcome, ApiError> {
    let now = job.now_ms();
    let step_index = enrollment.step_index;
    let kind = step.kind.as_str();
    let sent_at = match result {
        Ok(sent) => sent.at_ms,
        Err(error) => {
            // Nothing reached the person: the quota unit goes back, whatever the refusal.
            if let Some(usage_id) = usage_id {
                senders::release_quota(tx, usage_id).await?;
            }
            let code = error_code(&error);
            // Already connected: the invitation is not needed; the next step may go.
            if error == NetworkError::AlreadyConnected && step.kind == StepType::ConnectionRequest {
                intents::complete(tx, intent_id, IntentStatus::Failed, code, now).await?;
                record_event(
                    tx,
                    &enrollment.workspace_id,
                    &enrollment.id,
                    now,
                    kind,
                    Some(step_index),
                    text,
                    Some(code),
                )
                .await?;
                sqlx::query("update enrollments set accepted_at = $2 where id = $1")
                    .bind(&enrollment.id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                return advance(tx, job, enrollment, step, now, false).await;
            }
            // Refusals for the account: the intent is forgotten, the sender paused or marked,
            // the step waits.
            if let Some(until) = account_refusal(tx, sender_id, &error, now).await? {
                intents::forget(tx, intent_id).await?;
                record_event(
                    tx,
                    &enrollment.workspace_id,
                    &enrollment.id,
                    now,
                    kind,
                    Some(step_index),
                    None,
                    Some(code),
                )
                .await?;
                wait_until(tx, &enrollment.id, Wait::until(until)).await?;
                return Ok(JobOutcome::Snooze { until_ms: until });
            }
            // Refusals for the person: the enrollment fails with the network's words.
            intents::complete(tx, intent_id, IntentStatus::Failed, code, now).await?;
            record_event(
                tx,
                &enrollment.workspace_id,
                &enrollment.id,
                now,
                kind,
                Some(step_index),
                text,
                Some(code),
            )
            .await?;
            fail(tx, enrollment, &error, now).await?;
            return Ok(JobOutcome::Done);
        }
    };
    intents::complete(tx, intent_id, IntentStatus::Sent, "sent", now).await?;
    record_event(
        tx,
        &enrollment.workspace_id,
        &enrollment.id,
        sent_at,
        kind,
        Some(step_index),
        text,
        Some("sent"),
    )
    .await?;
    if step.kind != StepType::ViewProfile {
        sqlx::query("update prospects set last_contacted_at = $2 where id = $1")
            .bind(&enrollment.prospect_id)
            .bind(sent_at)
            .execute(&mut *tx)
            .await?;
    }
    if step.kind == StepType::Message {
        crate::conversations::record_outbound(
            tx,
            &crate::conversations::Outbound {
                workspace_id: &enrollment.workspace_id,
                sender_id,
                prospect_id: &enrollment.prospect_id,
                sequence_id: Some(&enrollment.sequence_id),
                enrollment_id: Some(&enrollment.id),
                step_index: Some(step_index),
                created_by: None,
                text: text.unwrap_or(""),
                status: crate::conversations::MessageStatus::Sent,
                at_ms: sent_at,
            },
            now,
        )
        .await?;
    }
    let invited = step.kind == StepType::ConnectionRequest;
    if invited {
        sqlx::query("update enrollments set invited_at = $2 where id = $1")
            .bind(&enrollment.id)
            .bind(sent_at)
            .execute(&mut *tx)
            .await?;
        sqlx::query("update prospects set connection_state = 'pending' where id = $1 and (connection_state is null or connection_state = 'not_connected')")
            .bind(&enrollment.prospect_id)
            .execute(&mut *tx)
            .await?;
    }
    advance(tx, job, enrollment, step, sent_at, invited).await
}

fn error_code(error: &NetworkError) -> &'static str {
    error.code().as_str()
}

/// Moves an enrollment past the step just done: to the next step's time, to the acceptance
/// deadline after a connection request, or to `finished` after the last step.
async fn advance(
    tx: &mut AnyConnection,
    job: &JobCtx,
    enrollment: &EnrollmentRow,
    _step: &Step,
    done_at: i64,
    invited: bool,
) -> Result<JobOutcome, ApiError> {
    let now = job.now_ms();
    let sequence =
        crate::sequences::fetch_row(tx, &enrollment.workspace_id, &enrollment.sequence_id).await?;
    let next_index = enrollment.step_index + 1;
    let Some(next) = usize::try_from(next_index)
        .ok()
        .and_then(|index| sequence.steps.get(index))
    else {
        sqlx::query("update enrollments set step_index = $2 where id = $1")
            .bind(&enrollment.id)
            .bind(next_index)
            .execute(&mut *tx)
            .await?;
        finish(tx, enrollment, "completed_steps", now).await?;
        return Ok(JobOutcome::Done);
    };
    let waits_for_acceptance = invited && enrollment.accepted_at.is_none();
    let next_at = if waits_for_acceptance {
        // The acceptance moves it to `accepted_at + delay`; without one, this is the deadline.
        done_at + i64::from(sequence.settings.exit_after_days_without_acceptance) * DAY_MS
    } else {
        done_at + i64::from(next.delay_hours) * HOUR_MS
    };
    // A person may have paused or stopped the enrollment while the call was in flight: the step
    // is recorded, the status they set stays, and the job ends (resuming enqueues it again).
    let status: String = sqlx::query(
        "update enrollments set status = case when status in ('scheduled', 'active') then 'active' else status end, \
         step_index = $2, next_step_at = $3, slot_at = null, updated_at = $4 where id = $1 returning status",
    )
    .bind(&enrollment.id)
    .bind(next_index)
    .bind(next_at)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?
    .try_get("status")?;
    if status != "active" {
        return Ok(JobOutcome::Done);
    }
    Ok(JobOutcome::Snooze {
        until_ms: next_at.max(now),
    })
}

outreach_runtime::prelude::job!("outreach_step", run_step);

/// The earliest time `sender_id` may act at or after `after_ms`: inside its working hours, and
/// not before a limit or pause it is under lifts. What `approve_outreach`'s dry run shows.
pub async fn first_send_time(
    conn: &mut AnyConnection,
    workspace_id: &str,
    sender_id: &str,
    after_ms: i64,
) -> Result<Option<i64>, ApiError> {
    let sender = senders::load(conn, workspace_id, sender_id).await?;
    let at = match senders::limits::standing_refusal(&sender, after_ms) {
        // Disconnected or restricted: no time can be promised.
        Some(refusal) => match refusal.until_ms {
            Some(until) => until.max(after_ms),
            None => return Ok(None),
        },
        None => after_ms,
    };
    Ok(next_window(&sender, None, at))
}
