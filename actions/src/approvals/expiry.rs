//! Agent proposals expire: what an agent run proposed waits at most 72 hours for a person.
//!
//! A stale proposal is worse than none: the prospect's situation, the texts and the sender's
//! calendar have moved on, and an enrollment waiting for approval holds the prospect (no other
//! run selects someone in a live sequence). So each agent proposal carries `expires_at`, deciding
//! one past it is a 409 even before the expiry runs, and one `expire_proposals` job per run, due
//! at its proposals' expiry on the service clock (which tests and demos move), marks what is still
//! pending `expired`, finishes their enrollments (`exit_reason` `expired`) and lets the run end.
//! Nothing is charged back: the run was charged for the work it did, not for the decision.

use outreach_runtime::prelude::{
    ApiError, Clock, JobArgs, JobCtx, JobOutcome, JobResult, NewJob, enqueue, job,
};
use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::approval_items::{self, Decision};
use crate::enrollments;
use crate::person_lock::PersonTx;

/// How long an agent's proposal waits for a decision.
pub const EXPIRES_AFTER_MS: i64 = 72 * 3_600_000;

job!(ExpiryJob::KIND, expire_proposals);

/// The job that expires a run's proposals: what it carries.
#[derive(Debug, Serialize, Deserialize)]
pub struct ExpiryJob {
    pub run_id: String,
}

impl JobArgs for ExpiryJob {
    const KIND: &'static str = "expire_proposals";
}

/// Enqueues (in the caller's transaction) the expiry of a run's proposals at `at_ms`; one job per
/// run, which comes back for proposals made after it was enqueued.
pub(crate) async fn schedule(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    run_id: &str,
    at_ms: i64,
) -> Result<(), ApiError> {
    enqueue(
        conn,
        clock,
        NewJob::of(&ExpiryJob {
            run_id: run_id.to_owned(),
        })
        .workspace(workspace_id)
        .run_at(at_ms)
        .unique_key(format!("run:{run_id}")),
    )
    .await?;
    Ok(())
}

async fn expire_proposals(job: JobCtx) -> JobResult {
    let payload: ExpiryJob = job.args()?;
    let now = job.now_ms();
    let mut tx = job.tx().await?;
    let rows = sqlx::query(
        "select id, workspace_id, kind, subject_id, prospect_id, expires_at from approvals \
         where run_id = $1 and status = 'pending' and expires_at is not null order by expires_at, id",
    )
    .bind(&payload.run_id)
    .fetch_all(&mut *tx)
    .await?;
    let mut later = None;
    let mut due = Vec::new();
    for row in rows {
        let expires_at: i64 = row.try_get("expires_at")?;
        if expires_at > now {
            later = Some(later.map_or(expires_at, |at: i64| at.min(expires_at)));
        } else {
            due.push(row);
        }
    }
    // A run's items are of one workspace; their people are locked first (see `person_lock`),
    // and an item decided before the lock is left as it was decided.
    let workspace: Option<String> = due
        .first()
        .map(|row| row.try_get("workspace_id"))
        .transpose()?;
    let people: Vec<String> = due
        .iter()
        .map(|row| row.try_get("prospect_id"))
        .collect::<Result<_, _>>()?;
    let mut tx = crate::person_lock::lock(
        &mut tx,
        workspace.as_deref().unwrap_or(""),
        people.iter().map(String::as_str),
    )
    .await?;
    for row in due {
        let id: String = row.try_get("id")?;
        let workspace_id: String = row.try_get("workspace_id")?;
        let expired = Decision::Expired;
        let expired = approval_items::decide(&mut tx, &workspace_id, &id, expired, now).await?;
        if expired && row.try_get::<String, _>("kind")? == "enrollment" {
            let enrollment_id: String = row.try_get("subject_id")?;
            let clock = job.clock();
            finish_enrollment(
                &mut tx,
                clock,
                &workspace_id,
                &enrollment_id,
                "expired",
                now,
            )
            .await?;
        }
    }
    // Also when nothing expired here: items decided or expired otherwise (a stopped sequence)
    // may have left the run with nothing pending.
    let workspace = match workspace {
        Some(workspace) => Some(workspace),
        None => sqlx::query("select workspace_id from agent_runs where id = $1")
            .bind(&payload.run_id)
            .fetch_optional(&mut *tx)
            .await?
            .map(|row| row.try_get::<String, _>("workspace_id"))
            .transpose()?,
    };
    if let Some(workspace_id) = workspace {
        crate::followups::runs_decided(&mut tx, job.clock(), &workspace_id, now).await?;
    }
    Ok(match later {
        Some(until_ms) => JobOutcome::Snooze { until_ms },
        None => JobOutcome::Done,
    })
}

/// Finishes an enrollment still awaiting approval, with `exit_reason`, recording why.
pub(crate) async fn finish_enrollment(
    conn: &mut PersonTx<'_>,
    clock: &Clock,
    workspace_id: &str,
    enrollment_id: &str,
    exit_reason: &str,
    now: i64,
) -> Result<(), ApiError> {
    let ids = [enrollment_id.to_owned()];
    if enrollments::finish(conn, clock, workspace_id, &ids, exit_reason, now).await? == 1 {
        enrollments::record_event(
            conn,
            workspace_id,
            enrollment_id,
            now,
            enrollments::EnrollmentEventKind::Finished,
            None,
            None,
            Some(exit_reason),
        )
        .await?;
    }
    Ok(())
}
