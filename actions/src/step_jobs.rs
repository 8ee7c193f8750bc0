//! Each live enrollment's step job, and the lock order every writer of outreach state follows.
//!
//! The step job (`outreach_step`, unique per enrollment) performs the enrollment's next step when
//! it is due (see `delivery`); this module says which job that is, schedules it, and holds the
//! lock helpers. It sits at the bottom of the actions (it imports none of them), so every module
//! that changes a person's outreach state can take the locks in the one order below.
//!
//! ## One lock order (PostgreSQL)
//!
//! A run holds its job row for the whole of each of its transactions. In the first it locks
//! its enrollment (`skip locked`: if another transaction holds it, the job is given back at
//! once); in the outcome transaction it writes the enrollment's history, the prospect, the
//! conversation and the enrollment, and may complete the sequence. Any other transaction that
//! changes those rows takes them in this order, or the two can wait for each other until
//! PostgreSQL ends one (dispatch and the worker then run the loser again in place, and a client
//! sees 409 `conflict` only when those tries run out):
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

use outreach_runtime::prelude::{ApiError, Backend, Clock, JobArgs, NewJob, enqueue, jobs};
use serde::{Deserialize, Serialize};
use sqlx::{AnyConnection, Row};

/// The statuses of a live enrollment, as SQL (`enrollments::EnrollmentStatus::LIVE`, checked by a
/// test there).
pub const LIVE_SQL: &str = "('awaiting_approval', 'scheduled', 'active', 'paused')";

/// The job that performs an enrollment's steps: what it carries.
#[derive(Debug, Serialize, Deserialize)]
pub struct StepJob {
    pub enrollment_id: String,
}

impl JobArgs for StepJob {
    const KIND: &'static str = "outreach_step";
}

/// What a step job's `unique_key` starts with; the enrollment's id follows.
pub(crate) const STEP_KEY_PREFIX: &str = "enrollment:";

pub(crate) fn step_key(enrollment_id: &str) -> String {
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
/// either: `delivery::prepare` gives the job back instead.)
pub async fn lock_step_job(conn: &mut AnyConnection, enrollment_id: &str) -> Result<(), ApiError> {
    if locks_rows_one_by_one(conn) {
        sqlx::query(
            "select id from jobs where kind = $1 and unique_key = $2 and state in ('available', 'running') \
             for update",
        )
        .bind(StepJob::KIND)
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
    let live = LIVE_SQL;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "select j.id from jobs j where j.kind = $1 and j.state in ('available', 'running') \
         and j.unique_key in (select $2 || e.id from enrollments e \
         where e.workspace_id = $3 and {filter} and e.status in {live}) \
         order by j.unique_key for update of j"
    )))
    .bind(StepJob::KIND)
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
/// sequence (`sequences::complete_if_done`); a reply does the same without a job; an approval
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
    let live = LIVE_SQL;
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
    jobs::cancel_unique(&mut *conn, clock, StepJob::KIND, &key).await?;
    enqueue(
        conn,
        clock,
        step_job(enrollment_id)
            .workspace(workspace_id)
            .run_at(run_at_ms),
    )
    .await?;
    Ok(())
}

/// The job that performs an enrollment's steps (one per enrollment: its unique key).
pub(crate) fn step_job(enrollment_id: &str) -> NewJob {
    NewJob::of(&StepJob {
        enrollment_id: enrollment_id.to_owned(),
    })
    .unique_key(step_key(enrollment_id))
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

/// Whether transactions on this connection lock rows one by one (PostgreSQL), so a row read
/// before it was locked may be out of date and a transaction in flight elsewhere must be waited
/// for row by row; not on SQLite, whose write transaction (`BEGIN IMMEDIATE`, from a job's fence
/// on) holds the whole database.
pub fn locks_rows_one_by_one(tx: &AnyConnection) -> bool {
    Backend::of(tx) == Backend::Postgres
}
