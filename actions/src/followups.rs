//! Follow-up jobs: state derived from rows that several modules change, brought up to date by a
//! job enqueued beside each change instead of a call up into the module that owns the state.
//!
//! A sequence completes once none of its enrollments is live, and enrollments end by a stop, a
//! triage, a rejection or an expiry in `enrollments`, below `sequences`' own verbs: each
//! transaction that ends enrollments enqueues [`sequence_ended`] for their sequence.
//!
//! An agent run waiting for its proposals ends (`succeeded`) once none of them is pending, and
//! approval items are decided, expired or deleted by approvals, enrollments and sequences, all
//! below `agents` in the layers. Each transaction that may leave a run with nothing pending
//! enqueues [`runs_decided`] for its workspace, in that transaction, so the follow-up exists
//! exactly when the change commits; `agents` handles it within a second. It takes no unique key:
//! a follow-up already running may have read the items before this change committed.

use outreach_runtime::prelude::{ApiError, Clock, JobArgs, NewJob, enqueue};
use serde::{Deserialize, Serialize};

/// The job that ends a workspace's waiting runs whose proposals were all decided: what it
/// carries.
#[derive(Debug, Serialize, Deserialize)]
pub struct RunsDecided {
    /// The workspace whose waiting runs are looked at.
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// Set by jobs written before the follow-up looked at a whole workspace: that run's.
    #[serde(default)]
    pub run_id: Option<String>,
}

impl JobArgs for RunsDecided {
    const KIND: &'static str = "agent_run_decided";
}

/// Enqueues (in the caller's transaction) the follow-up that ends the workspace's waiting runs
/// with nothing pending, due at `run_at_ms`.
pub async fn runs_decided(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    run_at_ms: i64,
) -> Result<(), ApiError> {
    let args = RunsDecided {
        workspace_id: Some(workspace_id.to_owned()),
        run_id: None,
    };
    enqueue(
        conn,
        clock,
        NewJob::of(&args).workspace(workspace_id).run_at(run_at_ms),
    )
    .await?;
    Ok(())
}

/// The job that completes an active sequence none of whose enrollments is live any more: what it
/// carries.
#[derive(Debug, Serialize, Deserialize)]
pub struct SequenceEnded {
    pub sequence_id: String,
}

impl JobArgs for SequenceEnded {
    const KIND: &'static str = "sequence_ended";
}

/// Enqueues (in the caller's transaction) the follow-up that completes `sequence_id` if none of
/// its enrollments is live once the caller's change has committed.
pub async fn sequence_ended(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    sequence_id: &str,
    run_at_ms: i64,
) -> Result<(), ApiError> {
    let args = SequenceEnded {
        sequence_id: sequence_id.to_owned(),
    };
    enqueue(
        conn,
        clock,
        NewJob::of(&args).workspace(workspace_id).run_at(run_at_ms),
    )
    .await?;
    Ok(())
}
