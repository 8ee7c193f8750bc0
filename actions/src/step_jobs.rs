//! Each live enrollment's step job: which job that is, and how it is scheduled.
//!
//! The step job (`outreach_step`, unique per enrollment) performs the enrollment's next step when
//! it is due (see `delivery`). It sits at the bottom of the actions (it imports none of them), so
//! every module that starts or resumes an enrollment can schedule it. A writer that schedules a
//! step holds the person's lock (`person_lock`); so does the job whenever it decides anything, so
//! a run that is about to end sees every change made before it took the lock, and a change made
//! after sees the job ended and enqueues a new one.

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

/// Enqueues (in the caller's transaction) the job that performs an enrollment's next step at
/// `run_at_ms`. An enrollment already holding a waiting job gets it moved to `run_at_ms`; one
/// whose job is running keeps that run, which decides under the person's lock the caller holds
/// (see the module header) and snoozes to the enrollment's next step.
pub async fn schedule(
    conn: &mut AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    enrollment_id: &str,
    run_at_ms: i64,
) -> Result<(), ApiError> {
    let key = step_key(enrollment_id);
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
/// before it was locked may be out of date; not on SQLite, whose write transaction
/// (`BEGIN IMMEDIATE`) holds the whole database.
pub fn locks_rows_one_by_one(tx: &AnyConnection) -> bool {
    Backend::of(tx) == Backend::Postgres
}
