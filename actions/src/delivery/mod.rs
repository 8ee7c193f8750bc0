//! Delivery: the durable jobs that perform approved outreach on the network, exactly once.
//!
//! Each live enrollment has one job (`outreach_step`, unique per enrollment) that performs its
//! next step when it is due and then snoozes until the step after; pausing, stopping or finishing
//! the enrollment (or pausing its sequence) makes the job's next run end it, and resuming enqueues
//! it again. A run, in order:
//!
//! 1. In the job's transaction, holding the person's lock (`person_lock`): re-read the enrollment, its sequence, its prospect and its
//!    sender; anything that says "not now" (not approved, paused, outside the sender's working
//!    hours in its zone, a call of the sender under way, too soon after its last call, a limit
//!    reached) snoozes the job to the time it lifts, without using an attempt. This is the
//!    [`gate`], the one every call to the network goes through.
//! 2. Still in that transaction: the sender's quota unit is taken and the call noted as the
//!    sender's last (the sender row is locked, so no number of workers overshoots a limit or the
//!    gap) and an intent row is written; all commit ([`JobCtx::commit`]) *before* the network is
//!    called.
//! 3. The network call carries the intent's id as its idempotency token.
//! 4. A new transaction, the person locked again, records the outcome: the intent, the enrollment's history, the
//!    next step's time, the conversation, the prospect's `last_contacted_at`; the unit moves to
//!    the network's time, and the sender's gap restarts from the call's end, whatever came of it.
//!
//! A crash between 2 and 4 leaves a `pending` intent, and a call that fails without an answer an
//! `unanswered` one; before anything else, the next run asks the network whether it happened
//! ([`NetworkProvider::find_outbound`]) and records the answer. When the network has no record,
//! the unit goes back, the intent becomes `unsent`, and the step goes through the gate again like
//! a new one (hours, gap, limits at that moment), sent under the same intent once it passes. A
//! `pending` intent holds its sender meanwhile: no other call of it starts. Recovery makes sure
//! every unsettled intent has a job ([`recover_unsettled`]).
//! Refusals for the account (limit signal, disconnected) give the quota unit back and wait;
//! refusals for the person (unreachable, cannot resend yet) fail the enrollment with the error.
//! Either way the network saw the call: the gap counts it.
//!
//! Each of the job's transactions commits fenced (the runtime's fence is its last statement), so
//! a run that lost its lease commits nothing. The one lock rule every writer of outreach state
//! follows is in [`crate::person_lock`]; each enrollment's step job is in [`crate::step_jobs`].

pub mod branches;
pub mod inbound;
pub mod intents;
pub mod replies;
pub mod unipile;

use outreach_runtime::prelude::{
    ApiError, Clock, Db, JobArgs, JobCtx, JobError, JobOutcome, JobResult, jobs,
};
use rand::Rng;
use serde_json::{Value, json};
use sqlx::{AnyConnection, Row};

use crate::enrollments::{self, EnrollmentEventKind, EnrollmentStatus, record_event};
use crate::events::{self, EventType};
use crate::network::{
    Account, NetworkError, NetworkProvider, Outbound, OutboundKind, OutboundRecord, Sent,
    network_for,
};
use crate::person_lock::{self, PersonTx};
use crate::senders::{self, GAP_MS, QuotaKind, SenderRow, SenderStatus, next_window};
use crate::sequences::{self, Flow, Next, RenderedText, SequenceStatus, Step, StepType};
use crate::step_jobs::{StepJob, locks_rows_one_by_one, step_job, step_key};
use intents::{IntentStatus, NewIntent};

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;
/// How long an enrollment waits before looking again at a sender that cannot send (disconnected,
/// restricted, without working hours).
const BLOCKED_RETRY_MS: i64 = HOUR_MS;
/// How soon a step looks again at a sender with a call under way (a call takes milliseconds; one
/// whose process died is settled once its job's lease lapses, within seconds).
const CALL_UNDER_WAY_RECHECK_MS: i64 = 5_000;

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
    replied_at: Option<i64>,
    condition_until: Option<i64>,
}

/// The workspace and the person of an enrollment, or `None` once it is deleted: what its run
/// locks before it reads the rest (see `person_lock`).
async fn owner_of(
    conn: &mut AnyConnection,
    id: &str,
) -> Result<Option<(String, String)>, ApiError> {
    let row = sqlx::query("select workspace_id, prospect_id from enrollments where id = $1")
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    row.map(|row| Ok((row.try_get("workspace_id")?, row.try_get("prospect_id")?)))
        .transpose()
}

/// The columns of [`EnrollmentRow`], as `e.`.
const ENROLLMENT_ROW_COLUMNS: &str = "e.id, e.workspace_id, e.sequence_id, e.prospect_id, e.sender_id, e.status, \
     e.step_index, e.next_step_at, e.slot_at, e.invited_at, e.accepted_at, e.replied_at, e.condition_until";

/// Reads the enrollment, or `None` once it is deleted. The caller holds its person's lock.
async fn load_enrollment(
    conn: &mut PersonTx<'_>,
    id: &str,
) -> Result<Option<EnrollmentRow>, ApiError> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "select {ENROLLMENT_ROW_COLUMNS} from enrollments e where e.id = $1"
    )))
    .bind(id)
    .fetch_optional(&mut **conn)
    .await?;
    row.as_ref().map(enrollment_row).transpose()
}

fn enrollment_row(row: &sqlx::any::AnyRow) -> Result<EnrollmentRow, ApiError> {
    Ok(EnrollmentRow {
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
        replied_at: row.try_get("replied_at")?,
        condition_until: row.try_get("condition_until")?,
    })
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
    conn: &mut PersonTx<'_>,
    enrollment: &EnrollmentRow,
    exit_reason: &str,
    now: i64,
) -> Result<(), ApiError> {
    if !enrollments::finish_approved(conn, &enrollment.id, exit_reason, now).await? {
        return Ok(());
    }

    record_event(
        conn,
        &enrollment.workspace_id,
        &enrollment.id,
        now,
        EnrollmentEventKind::Finished,
        None,
        None,
        Some(exit_reason),
    )
    .await?;
    sequences::complete_if_done(conn, &enrollment.sequence_id, now).await
}

/// Fails an enrollment with the network's refusal.
async fn fail(
    conn: &mut PersonTx<'_>,
    enrollment: &EnrollmentRow,
    error: &NetworkError,
    now: i64,
) -> Result<(), ApiError> {
    let api: ApiError = error.clone().into();
    let last_error = format!("{}: {}", api.code, api.message);
    if !enrollments::fail(conn, &enrollment.id, &last_error, now).await? {
        return Ok(());
    }

    record_event(
        conn,
        &enrollment.workspace_id,
        &enrollment.id,
        now,
        EnrollmentEventKind::Failed,
        Some(enrollment.step_index),
        None,
        Some(api.code.as_str()),
    )
    .await?;
    sequences::complete_if_done(conn, &enrollment.sequence_id, now).await
}

/// Moves an enrollment's next step to `wait.until`, holding `wait.slot` in its sender's queue.
async fn wait_until(
    conn: &mut PersonTx<'_>,
    enrollment_id: &str,
    wait: Wait,
) -> Result<(), ApiError> {
    enrollments::set_wait(conn, enrollment_id, wait.until, wait.slot).await
}

fn jitter() -> i64 {
    rand::rng().random_range(GAP_MS)
}

fn network_kind(kind: StepType) -> OutboundKind {
    match kind {
        StepType::ViewProfile => OutboundKind::ProfileView,
        StepType::ConnectionRequest => OutboundKind::Invitation,
        StepType::Message => OutboundKind::Message,
        StepType::Inmail => OutboundKind::Inmail,
        // Never called for a condition, which reaches no network.
        StepType::Condition => OutboundKind::ProfileView,
    }
}

/// What the step's run decided before the network call (one value per run: its size is no cost).
#[allow(clippy::large_enum_variant)]
enum Plan {
    /// Nothing to send now; the job's outcome.
    Outcome(JobOutcome),
    /// A condition was decided and its enrollment moved on to a step that is due now: the run
    /// commits and goes on with it (so a sender's first run sends, and its next queues the
    /// sender's other due steps and conditions together, as in a sequence without branches).
    Decided,
    /// An earlier call of this step whose outcome is unknown: ask the network first.
    Settle(Box<Unsettled>),
    /// Call the network with this intent (fresh, or sent again after the network had no record
    /// of it), through the gate.
    Send(Box<Call>),
}

/// The step, its approved text, and who sends it: what a call and its outcome need.
struct StepWork {
    enrollment: EnrollmentRow,
    step: Step,
    text: StepText,
    sender_id: String,
}

/// The approved text a step sends (none for a view), with its A/B variant and an InMail's subject.
#[derive(Debug, Clone, Default)]
struct StepText {
    text: Option<String>,
    subject: Option<String>,
    variant: Option<String>,
}

/// A network call about to be made for a step, and what it needs.
struct Call {
    work: StepWork,
    profile_url: String,
    intent_id: String,
    /// The quota unit the gate took for it.
    usage_id: String,
}

/// A step whose intent is `pending` (its process died mid-call) or `unanswered` (the call failed
/// without an answer).
struct Unsettled {
    work: StepWork,
    intent: intents::Intent,
}

async fn run_step(job: JobCtx) -> JobResult {
    let payload: StepJob = job.args()?;
    // Settling an unknown outcome ends the run, or leaves the intent `unsent`; the step is then
    // prepared again and goes through the gate like any other (so this loops at most twice,
    // and once more per condition decided on the way: a sequence has at most 20 steps).
    loop {
        match prepare(&job, &payload.enrollment_id).await? {
            Plan::Outcome(outcome) => return Ok(outcome),
            Plan::Decided => job.commit().await?,
            Plan::Settle(unsettled) => {
                if let Some(outcome) = settle_unknown(&job, *unsettled).await? {
                    return Ok(outcome);
                }
            }
            Plan::Send(call) => return call_network(&job, *call).await,
        }
    }
}

/// Step 3 and 4 of the module header: the call, under the intent committed before it, and what
/// came of it.
async fn call_network(job: &JobCtx, call: Call) -> JobResult {
    let Call {
        work,
        profile_url,
        intent_id,
        usage_id,
    } = call;
    // The intent and its quota unit are durable before the network hears of it.
    job.commit().await?;

    let network = network_for(job.config(), job.db(), job.clock())?;
    let enrollment = &work.enrollment;
    let to = Outbound {
        account: Account {
            workspace_id: &enrollment.workspace_id,
            sender_id: &work.sender_id,
        },
        profile_url: &profile_url,
        prospect_id: Some(&enrollment.prospect_id),
        intent: &intent_id,
    };
    let result = match work.step.kind {
        StepType::ViewProfile => network.view_profile(to).await.map(|viewed| Sent {
            provider_id: String::new(),
            at_ms: viewed.at_ms,
        }),
        // A note-less variant's approved text is empty: no note.
        StepType::ConnectionRequest => {
            let note = work.text.text.as_deref().filter(|note| !note.is_empty());
            network.invite(to, note).await
        }
        StepType::Message => {
            network
                .send_message(to, work.text.text.as_deref().unwrap_or(""))
                .await
        }
        StepType::Inmail => {
            let subject = work.text.subject.as_deref().unwrap_or("");
            let text = work.text.text.as_deref().unwrap_or("");
            network.send_inmail(to, subject, text).await
        }
        StepType::Condition => {
            return Err(JobError::discard("a condition step reached the network"));
        }
    };
    if let Err(NetworkError::Transient(cause)) = &result {
        // The call is over, its outcome unknown: the sender is free again (its gap counts from
        // now), and the retry asks the network before this step goes again.
        let mut tx = job.tx().await?;
        intents::mark_unanswered(&mut tx, &intent_id).await?;
        senders::note_call(&mut tx, &work.sender_id, job.now_ms()).await?;
        drop(tx);
        job.commit().await?;
        return Err(JobError::retry(format!("the network failed: {cause}")));
    }
    let mut tx = job.tx().await?;
    let mut tx = lock_person_of(&mut tx, &work).await?;
    record_outcome(&mut tx, job, &work, (&intent_id, Some(&usage_id)), result)
        .await
        .map_err(JobError::from)
}

/// Locks the person of a step's enrollment (see `person_lock`) before its outcome is written.
async fn lock_person_of<'c>(
    tx: &'c mut AnyConnection,
    work: &StepWork,
) -> Result<PersonTx<'c>, ApiError> {
    let enrollment = &work.enrollment;
    person_lock::lock(
        tx,
        &enrollment.workspace_id,
        [enrollment.prospect_id.as_str()],
    )
    .await
}

/// Asks the network what came of a step's earlier call (its intent's id is the token the network
/// saw) and records it. When the network has no record, the call did not happen: its quota unit
/// goes back, the intent becomes `unsent`, and `None` tells the run to prepare the step again,
/// through the gate, as if it were new.
async fn settle_unknown(
    job: &JobCtx,
    unsettled: Unsettled,
) -> Result<Option<JobOutcome>, JobError> {
    let Unsettled { work, intent } = unsettled;
    job.commit().await?;
    let network = network_for(job.config(), job.db(), job.clock())?;
    let account = Account {
        workspace_id: &work.enrollment.workspace_id,
        sender_id: &intent.sender_id,
    };
    let found = network
        .find_outbound(account, &intent.id)
        .await
        .map_err(|error| network_fault(&error))?;
    let mut guard = job.tx().await?;
    let mut tx = lock_person_of(&mut guard, &work).await?;
    match found {
        Some(record) => {
            let usage_id = intent.usage_id.as_deref();
            record_outcome(
                &mut tx,
                job,
                &work,
                (&intent.id, usage_id),
                outcome_of(record),
            )
            .await
            .map(Some)
            .map_err(JobError::from)
        }
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
            "not_allowed_inmail" => NetworkError::NotAllowedInmail,
            "insufficient_inmail_credits" => NetworkError::InsufficientCredits,
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
    // Its person first, as every writer of a person's outreach state (see `person_lock`): what
    // this run decides, it decides on what every change made before the lock left.
    let owner = owner_of(&mut tx, enrollment_id).await?;
    let (workspace_id, prospect_id) = owner.unwrap_or_default();
    let mut tx = person_lock::lock(&mut tx, &workspace_id, [prospect_id.as_str()]).await?;
    let Some(enrollment) = load_enrollment(&mut tx, enrollment_id).await? else {
        // Deleted with its prospect: a call it left under way can no longer be recorded
        // anywhere, but it must stop holding its sender, whose gap restarts now.
        let abandoned =
            intents::abandon(&mut tx, intents::Subject::Enrollment(enrollment_id), now).await?;
        for sender_id in abandoned {
            senders::note_call(&mut tx, &sender_id, now).await?;
        }
        return Ok(Plan::Outcome(JobOutcome::Done));
    };
    let Ok(index) = usize::try_from(enrollment.step_index) else {
        return Err(JobError::discard("a negative step index"));
    };
    // An earlier call of this step comes first (see `earlier_call`).
    let (enrollment, unsent) = match earlier_call(&mut tx, enrollment, index).await? {
        Ok(pair) => pair,
        Err(settle) => return Ok(settle),
    };
    if !matches!(enrollment.status.as_str(), "scheduled" | "active") {
        // Paused, finished or failed: resuming enqueues the job again.
        return Ok(Plan::Outcome(JobOutcome::Done));
    }
    // Held until this transaction ends (see `sequences::fetch_row_for_step`).
    let sequence =
        sequences::fetch_row_for_step(&mut tx, &enrollment.workspace_id, &enrollment.sequence_id)
            .await?;
    if sequence.status != SequenceStatus::Active {
        // A paused sequence's enrollments wait for `resume_sequence`, which enqueues them again;
        // a draft one's for `activate_sequence`.
        return Ok(Plan::Outcome(JobOutcome::Done));
    }
    if let Some(at) = enrollment.next_step_at.filter(|at| *at > now) {
        return Ok(Plan::Outcome(JobOutcome::Snooze { until_ms: at }));
    }
    let Some(step) = sequence.steps.get(index).cloned() else {
        finish(&mut tx, &enrollment, "completed_steps", now).await?;
        return Ok(Plan::Outcome(JobOutcome::Done));
    };
    // Waiting for an acceptance: until its deadline (the invitation's time and the sequence's
    // `exit_after_days_without_acceptance`; an acceptance before it moves the step), then ask the
    // network once more, and exit. A condition asks about the acceptance itself, and an InMail
    // needs none.
    if waits_for_acceptance(&step)
        && let Some(invited_at) = enrollment.invited_at
        && enrollment.accepted_at.is_none()
    {
        let deadline =
            invited_at + i64::from(sequence.settings.exit_after_days_without_acceptance) * DAY_MS;
        if now < deadline {
            wait_until(&mut tx, &enrollment.id, Wait::until(deadline)).await?;
            return Ok(Plan::Outcome(JobOutcome::Snooze { until_ms: deadline }));
        }
        let accepted = acceptance_came(job, &mut tx, &enrollment).await?;
        if !accepted {
            finish(&mut tx, &enrollment, "not_accepted", now).await?;
            return Ok(Plan::Outcome(JobOutcome::Done));
        }
        enrollments::mark_accepted(&mut tx, &enrollment.id, now, None).await?;
    }
    let Some(person) = load_person(&mut tx, &enrollment.prospect_id).await? else {
        return Ok(Plan::Outcome(JobOutcome::Done));
    };
    if person.do_not_contact {
        finish(&mut tx, &enrollment, "do_not_contact", now).await?;
        return Ok(Plan::Outcome(JobOutcome::Done));
    }
    if step.kind == StepType::Condition {
        let outcome =
            branches::decide_in_run(job, &mut tx, &enrollment, &sequence, index, now).await?;
        return Ok(match outcome {
            JobOutcome::Snooze { until_ms } if until_ms <= now => Plan::Decided,
            outcome => Plan::Outcome(outcome),
        });
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

    // A step that sends a text sends the approved one, or nothing: one the sequence gained after
    // the approval (edited while paused) was never approved for this person. A step sent again
    // after the network had no record of it keeps its variant.
    let variant = unsent.as_ref().and_then(|intent| intent.variant.clone());
    let text = text_of(&mut tx, &enrollment, &step, variant.as_deref()).await?;
    let unapproved = match step.kind {
        StepType::Message => text.text.is_none(),
        StepType::Inmail => text.text.is_none() || text.subject.is_none(),
        _ => false,
    };
    if unapproved {
        finish(&mut tx, &enrollment, "not_approved", now).await?;
        return Ok(Plan::Outcome(JobOutcome::Done));
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
        step.kind
            .quota_kind()
            .ok_or_else(|| JobError::discard("a step that sends nothing reached the gate"))?,
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
    let intent_id = match unsent {
        // The network had no record of the earlier call: the same intent goes again, with the
        // unit the gate took now.
        Some(intent) => {
            intents::rearm(&mut tx, &intent.id, &usage_id).await?;
            intent.id
        }
        None => {
            intents::insert(
                &mut tx,
                &NewIntent {
                    workspace_id: &enrollment.workspace_id,
                    sender_id: &sender_id,
                    prospect_id: &enrollment.prospect_id,
                    kind: network_kind(step.kind).as_str(),
                    enrollment_id: Some(&enrollment.id),
                    step_index: Some(enrollment.step_index),
                    message_id: None,
                    text: text.text.as_deref(),
                    variant: text.variant.as_deref(),
                    usage_id: Some(&usage_id),
                },
                now,
            )
            .await?
        }
    };
    Ok(Plan::Send(Box::new(Call {
        work: StepWork {
            enrollment,
            step,
            text,
            sender_id,
        },
        profile_url,
        intent_id,
        usage_id,
    })))
}

/// An earlier call of this step comes first, whatever happened to the enrollment since: a run
/// that died after its intent committed, or a call that failed without an answer, is settled by
/// asking the network (`Err` with the plan that does), never by sending blindly again. Otherwise
/// answers the enrollment back with the step's `unsent` intent, if the network had no record of
/// an earlier call. (The unique (enrollment, step) index refuses a second intent for the step.)
async fn earlier_call(
    tx: &mut AnyConnection,
    enrollment: EnrollmentRow,
    index: usize,
) -> Result<Result<(EnrollmentRow, Option<intents::Intent>), Plan>, JobError> {
    let unsent = match intents::of_step(tx, &enrollment.id, enrollment.step_index).await? {
        Some(intent) if intent.status.outcome_unknown() => {
            let sequence =
                sequences::fetch_row(tx, &enrollment.workspace_id, &enrollment.sequence_id).await?;
            let Some(step) = sequence.steps.get(index).cloned() else {
                return Err(JobError::discard(format!(
                    "intent `{}` is for step {index}, which the sequence no longer has",
                    intent.id
                )));
            };
            let text = text_of(tx, &enrollment, &step, intent.variant.as_deref()).await?;
            let sender_id = intent.sender_id.clone();
            return Ok(Err(Plan::Settle(Box::new(Unsettled {
                work: StepWork {
                    enrollment,
                    step,
                    text,
                    sender_id,
                },
                intent,
            }))));
        }
        Some(intent) if intent.status == IntentStatus::Unsent => Some(intent),
        Some(intent) => {
            return Err(JobError::discard(format!(
                "step {index} already has a completed intent `{}`",
                intent.id
            )));
        }
        None => None,
    };
    Ok(Ok((enrollment, unsent)))
}

/// Whether an enrollment waiting for its invitation's acceptance, now at its deadline, was
/// accepted after all: the network is asked once more (its signal can be late).
async fn acceptance_came(
    job: &JobCtx,
    tx: &mut AnyConnection,
    enrollment: &EnrollmentRow,
) -> Result<bool, JobError> {
    Ok(
        match (
            &enrollment.sender_id,
            load_person(tx, &enrollment.prospect_id).await?,
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
        },
    )
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
/// given), clear of every limit, no other call of it under way, far enough from its last call
/// (refused or not) and, for a step without a slot, with no step queued ahead. When it may, one
/// quota unit is taken in `tx` and the call noted as the sender's last (the sender row is locked
/// first, so workers on every instance decide one after the other), and the unit's id returned.
/// When it is only busy, a step takes the next slot in the sender's queue, 30-90 s after the
/// last one handed out, so the steps waiting for one sender wake one at a time instead of all
/// together.
///
/// This is the one gate of every call that reaches the network: a step, a reply, and a step or
/// reply sent again after the network had no record of an earlier attempt.
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
    // sender's last call and its queue only get later), never let one through: the check under
    // the lock below decides.
    let unlocked = pace(tx, &sender.id).await?;
    let queued_ahead =
        |pace: &Pace| turn == Turn::Queue && pace.queued_until.is_some_and(|at| at > now);
    let busy = 'decide: {
        if queued_ahead(&unlocked) || unlocked.busy(now) {
            break 'decide unlocked;
        }
        let (sender, pace) = if locks_rows_one_by_one(tx) {
            let locked = senders::load_locked(tx, &sender.id).await?;
            let pace = pace(tx, &sender.id).await?;
            (std::borrow::Cow::Owned(locked), pace)
        } else {
            (std::borrow::Cow::Borrowed(sender), unlocked)
        };
        if queued_ahead(&pace) || pace.busy(now) {
            break 'decide pace;
        }
        return match senders::take_quota(tx, &sender, kind, now).await? {
            Ok(usage_id) => {
                senders::note_call(tx, &sender.id, now).await?;
                Ok(Ok(usage_id))
            }
            Err(refusal) => {
                let until = refusal
                    .until_ms
                    .unwrap_or(now + BLOCKED_RETRY_MS)
                    .max(now + 1);
                let until = next_window(&sender, prospect_zone, until).unwrap_or(until) + jitter();
                Ok(Err(Wait::until(until)))
            }
        };
    };
    if busy.call_under_way {
        // A call of the sender is on its way to the network (or its process died mid-call, and
        // a job is about to ask the network what came of it): wait for its outcome, without a
        // slot, looking again a little later rather than at once.
        let last = busy.last_action_at.unwrap_or(now);
        return Ok(Err(Wait::until(
            (last + jitter()).max(now + CALL_UNDER_WAY_RECHECK_MS),
        )));
    }
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

/// A sender's pace: its last call, whether one is under way, and the last slot handed out in its
/// queue.
#[derive(Debug, Clone, Copy)]
struct Pace {
    last_action_at: Option<i64>,
    call_under_way: bool,
    queued_until: Option<i64>,
}

impl Pace {
    /// A call is under way, or it is inside the gap after the sender's last call.
    fn busy(&self, now: i64) -> bool {
        self.call_under_way
            || self
                .last_action_at
                .is_some_and(|last| last + *GAP_MS.start() > now)
    }
}

/// How many of a busy sender's other due steps one run queues.
const QUEUE_BATCH: i64 = 200;

/// Gives the sender's other steps that are due now and hold no slot the slots after `after`, one
/// each, 30-90 s apart, in this transaction: one run queues them all, instead of each of them
/// running only to find the sender busy. A slot is only when a step runs again; its run decides
/// everything anew. The steps are found by their enrollments (due by `next_step_at`, through
/// `enrollments_sender_queue_idx`, in active sequences: a paused or draft sequence's steps have
/// no job to move); a step is moved only if its job waits and is due too. An
/// enrollment waiting for an acceptance is left out: what is due for it is its deadline, which
/// sends nothing and must not wait in the queue. These are other people's rows, which this run
/// did not lock (`person_lock`): on PostgreSQL, a step whose enrollment or job another
/// transaction holds is skipped (it queues itself), never waited for.
async fn queue_due_steps(
    tx: &mut AnyConnection,
    clock: &Clock,
    sender_id: &str,
    except_enrollment: Option<&str>,
    after: i64,
    now: i64,
) -> Result<(), ApiError> {
    let due = sqlx::query(sqlx::AssertSqlSafe(format!(
        "select e.workspace_id, e.prospect_id from enrollments e \
         join sequences s on s.id = e.sequence_id and s.status = 'active' \
         where e.sender_id = $1 and e.slot_at is null and e.status in ('scheduled', 'active') \
         and e.next_step_at <= $3 and not (e.invited_at is not null and e.accepted_at is null) \
         and e.id <> $2 order by e.next_step_at, e.id limit {QUEUE_BATCH}"
    )))
    .bind(sender_id)
    .bind(except_enrollment.unwrap_or(""))
    .bind(now)
    .fetch_all(&mut *tx)
    .await?;
    let Some(first) = due.first() else {
        return Ok(());
    };
    let workspace_id: String = first.try_get("workspace_id")?;
    let people: Vec<String> = due
        .iter()
        .map(|row| row.try_get("prospect_id"))
        .collect::<Result<_, _>>()?;
    // Other people's steps: only those whose person no one holds are queued, and read again
    // under that lock (what was read above may have moved meanwhile).
    let mut others =
        person_lock::try_lock(tx, &workspace_id, people.iter().map(String::as_str)).await?;
    if others.people().is_empty() {
        return Ok(());
    }
    let held_people = others.people().to_vec();
    let held = crate::lists::placeholders(4, held_people.len());
    let mut again = sqlx::query(sqlx::AssertSqlSafe(format!(
        "select {ENROLLMENT_ROW_COLUMNS} from enrollments e \
         join sequences s on s.id = e.sequence_id and s.status = 'active' \
         where e.sender_id = $1 and e.slot_at is null and e.status in ('scheduled', 'active') \
         and e.next_step_at <= $3 and not (e.invited_at is not null and e.accepted_at is null) \
         and e.id <> $2 and e.prospect_id in {held} order by e.next_step_at, e.id limit {QUEUE_BATCH}"
    )))
    .persistent(false)
    .bind(sender_id)
    .bind(except_enrollment.unwrap_or(""))
    .bind(now);
    for person in &held_people {
        again = again.bind(person.as_str());
    }
    let rows = again.fetch_all(&mut *others).await?;
    // A condition reaches no network and takes no slot: those due are decided here, together
    // (but a `connected` one that needs the network's word, left to its own run), and the step
    // each goes to is queued with the others when it is due now.
    let mut sequences_of: std::collections::HashMap<String, sequences::Sequence> =
        Default::default();
    let mut due = Vec::with_capacity(rows.len());
    for row in rows {
        let id: String = row.try_get("id")?;
        let sequence_id: String = row.try_get("sequence_id")?;
        if !sequences_of.contains_key(&sequence_id) {
            let workspace_id: String = row.try_get("workspace_id")?;
            let sequence = sequences::fetch_row(&mut others, &workspace_id, &sequence_id).await?;
            sequences_of.insert(sequence_id.clone(), sequence);
        }
        let sequence = &sequences_of[&sequence_id];
        let index = usize::try_from(row.try_get::<i64, _>("step_index")?).unwrap_or(usize::MAX);
        if sequence
            .steps
            .get(index)
            .is_none_or(|step| step.kind.sends())
        {
            due.push(id);
            continue;
        }
        let enrollment = enrollment_row(&row)?;
        let key = step_key(&id);
        let decided =
            branches::decide(&mut others, &enrollment, sequence, index, now, None).await?;
        match decided {
            Some(branches::Decision {
                outcome: JobOutcome::Snooze { until_ms },
                next,
            }) => {
                let sends_now = until_ms <= now
                    && next
                        .and_then(|i| sequence.steps.get(i))
                        .is_some_and(|step| step.kind.sends());
                if sends_now {
                    due.push(id);
                } else {
                    jobs::move_due_unique(&mut others, clock, StepJob::KIND, &key, now, until_ms)
                        .await?;
                }
            }
            Some(_) => {
                jobs::cancel_unique(&mut others, clock, StepJob::KIND, &key).await?;
            }
            None => {}
        }
    }
    let mut slot = after;
    for enrollment_id in &due {
        let at = slot + jitter();
        let key = step_key(enrollment_id);
        if jobs::move_due_unique(&mut others, clock, StepJob::KIND, &key, now, at).await? {
            wait_until(
                &mut others,
                enrollment_id,
                Wait {
                    until: at,
                    slot: Some(at),
                },
            )
            .await?;
            slot = at;
        }
    }
    drop(others);
    senders::set_queued_until(tx, sender_id, slot).await
}

async fn pace(conn: &mut AnyConnection, sender_id: &str) -> Result<Pace, ApiError> {
    let row = sqlx::query("select queued_until, last_action_at from senders where id = $1")
        .bind(sender_id)
        .fetch_one(&mut *conn)
        .await?;
    Ok(Pace {
        last_action_at: row.try_get("last_action_at")?,
        call_under_way: intents::call_under_way(conn, sender_id).await?,
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
    let slot = senders::take_queue_slot(tx, &sender.id, last, jitter()).await?;
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
        NetworkError::NeedsReauth => {
            senders::set_sender_status(tx, sender_id, SenderStatus::NeedsReauth, now).await?;
            now + BLOCKED_RETRY_MS
        }
        _ => return Ok(None),
    }))
}

/// The approved text of a step (a note, a message, an InMail), if it has one. On a step with A/B
/// variants: the text of `variant` when the step's intent already has one (a call settled or
/// sent again keeps its variant), otherwise of the variant the enrollment is given among the
/// approved ones ([`sequences::variants::assign`]).
async fn text_of(
    conn: &mut AnyConnection,
    enrollment: &EnrollmentRow,
    step: &Step,
    variant: Option<&str>,
) -> Result<StepText, ApiError> {
    if matches!(step.kind, StepType::ViewProfile | StepType::Condition) {
        return Ok(StepText::default());
    }
    let texts: Vec<RenderedText> = approved_texts(conn, &enrollment.workspace_id, &enrollment.id)
        .await?
        .into_iter()
        .filter(|text| i64::from(text.step_index) == enrollment.step_index)
        .collect();
    let approved = |key: &str| texts.iter().any(|t| t.variant.as_deref() == Some(key));
    let chosen = match variant {
        Some(variant) => Some(variant.to_owned()),
        None if step.variants.is_some() => {
            // Among the live variants with an approved text; if the step's variants changed
            // since the approval so that none is, among what was approved.
            sequences::variants::assign(&enrollment.id, step, approved)
                .map(str::to_owned)
                .or_else(|| texts.first().and_then(|t| t.variant.clone()))
        }
        None => None,
    };
    let text = texts
        .into_iter()
        .find(|text| chosen.is_none() || text.variant == chosen);
    Ok(StepText {
        variant: text.as_ref().and(chosen),
        subject: text.as_ref().and_then(|t| t.subject.clone()),
        text: text.map(|t| t.text),
    })
}

/// Whether an enrollment invited and not yet accepted waits for the acceptance before `step`
/// (until its deadline, then finishes `not_accepted`): every step but a condition, which asks
/// about the acceptance itself, and an InMail, which needs none.
fn waits_for_acceptance(step: &Step) -> bool {
    !matches!(step.kind, StepType::Condition | StepType::Inmail)
}

/// Step 4 of the module header: what came of the call, in the job's second transaction. The call
/// is over, so the sender's gap counts from now whatever came of it (the network saw a refused
/// call too); a unit it performed moves to the network's time. The sender's row is written last,
/// as the gate takes it last.
async fn record_outcome(
    tx: &mut PersonTx<'_>,
    job: &JobCtx,
    work: &StepWork,
    (intent_id, usage_id): (&str, Option<&str>),
    result: Result<Sent, NetworkError>,
) -> Result<JobOutcome, ApiError> {
    let sent_at = result.as_ref().ok().map(|sent| sent.at_ms);
    let outcome = apply_outcome(tx, job, work, (intent_id, usage_id), result).await?;
    if let (Some(sent_at), Some(usage_id)) = (sent_at, usage_id) {
        let sender = senders::load_locked(tx, &work.sender_id).await?;
        senders::restamp_quota(tx, &sender, usage_id, sent_at).await?;
    }
    senders::note_call(tx, &work.sender_id, job.now_ms()).await?;
    Ok(outcome)
}

async fn apply_outcome(
    tx: &mut PersonTx<'_>,
    job: &JobCtx,
    work: &StepWork,
    (intent_id, usage_id): (&str, Option<&str>),
    result: Result<Sent, NetworkError>,
) -> Result<JobOutcome, ApiError> {
    let StepWork {
        enrollment,
        step,
        text,
        sender_id,
    } = work;
    let variant = text.variant.as_deref();
    let (step, text, sender_id) = (step, text.text.as_deref(), sender_id.as_str());
    // Its first step to reach the person (a condition before it reached no one).
    let first = !enrollments::any_sent(tx, &enrollment.id).await?;
    let now = job.now_ms();
    let step_index = enrollment.step_index;
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
                    step.kind.into(),
                    Some(step_index),
                    text,
                    Some(code),
                )
                .await?;
                enrollments::mark_accepted(tx, &enrollment.id, now, None).await?;
                started_if_first(tx, enrollment, sender_id, first, now).await?;
                return advance(tx, job, enrollment, now, false).await;
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
                    step.kind.into(),
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
            record_step_event(
                tx,
                enrollment,
                now,
                (step.kind, Some(step_index)),
                (text, variant),
                code,
            )
            .await?;
            let refused = match step.kind {
                StepType::ConnectionRequest => Some(EventType::ConnectionRequestFailed),
                StepType::Message | StepType::Inmail => Some(EventType::MessageFailed),
                StepType::ViewProfile | StepType::Condition => None,
            };
            if let Some(refused) = refused {
                let mut data = step_event_data(enrollment, sender_id);
                data["error"] = Value::from(ApiError::from(error.clone()).message);
                events::record(tx, &enrollment.workspace_id, now, refused, data).await?;
            }
            // An InMail the account cannot send (no premium plan, no credits left) finishes the
            // enrollment with that reason: the person was not refused, the account was.
            let account_cannot = match error {
                NetworkError::NotAllowedInmail => Some(enrollments::ExitReason::NotAllowedInmail),
                NetworkError::InsufficientCredits => {
                    Some(enrollments::ExitReason::InsufficientCredits)
                }
                _ => None,
            };
            if let Some(reason) = account_cannot {
                finish(tx, enrollment, reason.as_str(), now).await?;
            } else {
                fail(tx, enrollment, &error, now).await?;
            }
            return Ok(JobOutcome::Done);
        }
    };
    intents::complete(tx, intent_id, IntentStatus::Sent, "sent", now).await?;
    record_step_event(
        tx,
        enrollment,
        sent_at,
        (step.kind, Some(step_index)),
        (text, variant),
        "sent",
    )
    .await?;
    started_if_first(tx, enrollment, sender_id, first, now).await?;
    let performed = match step.kind {
        StepType::ViewProfile => Some(EventType::ProfileViewed),
        StepType::ConnectionRequest => Some(EventType::ConnectionRequested),
        // `message.sent` is the conversation's, with the message's id.
        StepType::Message | StepType::Inmail | StepType::Condition => None,
    };
    if let Some(performed) = performed {
        let data = step_event_data(enrollment, sender_id);
        events::record(tx, &enrollment.workspace_id, now, performed, data).await?;
    }
    if step.kind != StepType::ViewProfile {
        crate::prospects::note_contacted(tx, &enrollment.prospect_id, sent_at).await?;
    }
    if matches!(step.kind, StepType::Message | StepType::Inmail) {
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
        enrollments::mark_invited(tx, &enrollment.id, sent_at).await?;
        crate::prospects::mark_invitation_pending(tx, &enrollment.prospect_id, &enrollment.id)
            .await?;
    }
    advance(tx, job, enrollment, sent_at, invited).await
}

/// The history entry of a step that reached the network: `(kind, step)`, `(text, variant)`.
async fn record_step_event(
    tx: &mut PersonTx<'_>,
    enrollment: &EnrollmentRow,
    at: i64,
    (kind, step_index): (StepType, Option<i64>),
    (text, variant): (Option<&str>, Option<&str>),
    outcome: &str,
) -> Result<(), ApiError> {
    enrollments::record_step_event(
        tx,
        &enrollment.workspace_id,
        &enrollment.id,
        at,
        (kind.into(), step_index),
        (text, variant),
        Some(outcome),
    )
    .await
}

/// `enrollment.started`, when the step just done was the enrollment's `first` to reach the person.
async fn started_if_first(
    tx: &mut PersonTx<'_>,
    enrollment: &EnrollmentRow,
    sender_id: &str,
    first: bool,
    now: i64,
) -> Result<(), ApiError> {
    if !first {
        return Ok(());
    }
    let data = step_event_data(enrollment, sender_id);
    events::record(
        tx,
        &enrollment.workspace_id,
        now,
        EventType::EnrollmentStarted,
        data,
    )
    .await?;
    Ok(())
}

/// The `data` of an event about one step of an enrollment, sent from `sender_id`.
fn step_event_data(enrollment: &EnrollmentRow, sender_id: &str) -> Value {
    json!({
        "enrollment_id": enrollment.id,
        "sequence_id": enrollment.sequence_id,
        "prospect_id": enrollment.prospect_id,
        "sender_id": sender_id,
    })
}

fn error_code(error: &NetworkError) -> &'static str {
    error.code().as_str()
}

/// Moves an enrollment past the step just done: to the next step's time, to the acceptance
/// deadline after a connection request, or to `finished` after the last step.
async fn advance(
    tx: &mut PersonTx<'_>,
    job: &JobCtx,
    enrollment: &EnrollmentRow,
    done_at: i64,
    invited: bool,
) -> Result<JobOutcome, ApiError> {
    let now = job.now_ms();
    let sequence =
        sequences::fetch_row(tx, &enrollment.workspace_id, &enrollment.sequence_id).await?;
    let index = usize::try_from(enrollment.step_index).unwrap_or(usize::MAX);
    let Next::Step(next_index) = Flow::new(&sequence.steps).after(index) else {
        // Past every step: the index no step has.
        let past = i64::try_from(sequence.steps.len()).unwrap_or(i64::MAX);
        enrollments::set_step_index(tx, &enrollment.id, past).await?;
        finish(tx, enrollment, "completed_steps", now).await?;
        return Ok(JobOutcome::Done);
    };
    let next = &sequence.steps[next_index];
    let next_index = i64::try_from(next_index).unwrap_or(i64::MAX);
    let waits_for_acceptance =
        invited && enrollment.accepted_at.is_none() && waits_for_acceptance(next);
    let next_at = if waits_for_acceptance {
        // The acceptance moves it to `accepted_at + delay`; without one, this is the deadline.
        done_at + i64::from(sequence.settings.exit_after_days_without_acceptance) * DAY_MS
    } else {
        done_at + i64::from(next.delay_hours) * HOUR_MS
    };
    // A person may have paused or stopped the enrollment while the call was in flight: the step
    // is recorded, the status they set stays, and the job ends (resuming enqueues it again).
    let status = enrollments::advance(tx, &enrollment.id, next_index, next_at, now).await?;
    if status != EnrollmentStatus::Active {
        return Ok(JobOutcome::Done);
    }
    Ok(JobOutcome::Snooze {
        until_ms: next_at.max(now),
    })
}

outreach_runtime::prelude::job!(StepJob::KIND, run_step);

outreach_runtime::prelude::recovery!("intents whose outcome is unknown", recover_unsettled);

/// How many unsettled intents one round of [`recover_unsettled`] looks at.
const UNSETTLED_BATCH: i64 = 500;

/// Makes sure every intent whose outcome is unknown has a job that settles it: the step's or the
/// reply's own job normally does, but a job can be gone (discarded after its last attempt, or
/// cancelled when its enrollment ended while the call's outcome was unknown). Until it is settled
/// such an intent holds its sender (see [`gate`]). Returns how many jobs it wrote.
async fn recover_unsettled(db: &Db, clock: &Clock) -> Result<u64, ApiError> {
    let unsettled = {
        let mut conn = db.pool().acquire().await?;
        intents::unsettled(&mut conn, UNSETTLED_BATCH).await?
    };
    if unsettled.is_empty() {
        return Ok(0);
    }
    let mut tx = db.begin_write().await?;
    let mut written = 0;
    for (workspace_id, enrollment_id, message_id) in unsettled {
        let job = match (enrollment_id, message_id) {
            (Some(enrollment_id), _) => step_job(&enrollment_id),
            (None, Some(message_id)) => replies::reply_job(&message_id),
            (None, None) => continue,
        };
        if jobs::enqueue_if_absent(&mut tx, clock, job.workspace(workspace_id))
            .await?
            .is_some()
        {
            written += 1;
        }
    }
    tx.commit().await?;
    Ok(written)
}

/// The earliest time `sender_id` may make a call of `kind` at or after `after_ms`, by the gate's
/// rules ([`senders::earliest_call`]): what `approve_outreach`'s dry run shows.
pub async fn first_send_time(
    conn: &mut AnyConnection,
    workspace_id: &str,
    sender_id: &str,
    kind: Option<QuotaKind>,
    after_ms: i64,
    now: i64,
) -> Result<Option<i64>, ApiError> {
    let sender = senders::load(conn, workspace_id, sender_id).await?;
    senders::earliest_call(conn, &sender, kind, None, after_ms, now).await
}
