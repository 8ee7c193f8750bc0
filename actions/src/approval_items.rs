//! The approval items' table (`approvals`): every statement that writes it, one verb each.
//!
//! An item is part of its person's outreach state, beside their enrollment: it is proposed with
//! the enrollment, expires when the enrollment ends, and is decided before anything reaches the
//! person. So its verbs sit in the layer of sequences and enrollments (which expire, re-render
//! and delete items when they stop, edit or delete), below the queue's actions in `approvals/`
//! (which propose, edit and decide them), and every verb takes the person's lock ([`PersonTx`]).
//! What an item means to a caller (kinds, texts, reasons) is `approvals`' business; here it is
//! rows and conditional updates.

use outreach_runtime::prelude::ApiError;
use serde_json::{Value, json};
use sqlx::{AssertSqlSafe, Row};

use crate::events::{self, EventType};
use crate::person_lock::PersonTx;

/// A pending item to insert, its values ready for the table (texts, reasons as JSON text).
pub(crate) struct PendingRow<'a> {
    pub id: &'a str,
    pub kind: &'a str,
    pub subject_id: &'a str,
    pub sequence_id: Option<&'a str>,
    pub prospect_id: &'a str,
    pub sender_id: Option<&'a str>,
    pub texts: String,
    pub run_id: Option<&'a str>,
    pub agent_id: Option<&'a str>,
    pub drafted_by: Option<&'a str>,
    pub reasons: Option<&'a str>,
    pub expires_at: Option<i64>,
}

/// Inserts pending items, a hundred per statement; `proposed_by` is JSON text.
pub(crate) async fn insert_pending(
    tx: &mut PersonTx<'_>,
    workspace_id: &str,
    proposed_by: &str,
    now: i64,
    rows: &[PendingRow<'_>],
) -> Result<(), ApiError> {
    const PER_ROW: usize = 12;
    for chunk in rows.chunks(100) {
        let values: Vec<String> = (0..chunk.len())
            .map(|i| {
                let n = 4 + PER_ROW * i;
                let p: Vec<String> = (n..n + PER_ROW).map(|k| format!("${k}")).collect();
                format!(
                    "({}, $1, {}, {}, {}, {}, {}, 'pending', {}, $2, {}, {}, $3, {}, {}, {})",
                    p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11]
                )
            })
            .collect();
        let sql = format!(
            "insert into approvals (id, workspace_id, kind, subject_id, sequence_id, prospect_id, sender_id, status, \
             texts, proposed_by, run_id, agent_id, created_at, drafted_by, reasons, expires_at) values {}",
            values.join(", ")
        );
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .persistent(false)
            .bind(workspace_id)
            .bind(proposed_by)
            .bind(now);
        for row in chunk {
            query = query
                .bind(row.id)
                .bind(row.kind)
                .bind(row.subject_id)
                .bind(row.sequence_id)
                .bind(row.prospect_id)
                .bind(row.sender_id)
                .bind(row.texts.as_str())
                .bind(row.run_id)
                .bind(row.agent_id)
                .bind(row.drafted_by)
                .bind(row.reasons)
                .bind(row.expires_at);
        }
        query.execute(&mut **tx).await?;
    }
    let requested: Vec<Value> = rows
        .iter()
        .map(|row| {
            json!({
                "approval_id": row.id,
                "kind": row.kind,
                "sequence_id": row.sequence_id,
                "prospect_id": row.prospect_id,
                "run_id": row.run_id,
            })
        })
        .collect();
    events::record_many(
        tx,
        workspace_id,
        now,
        EventType::ApprovalRequested,
        &requested,
    )
    .await
}

/// What a decision makes of a pending item.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Decision<'a> {
    /// Approved by this person (`per_...`), sent from this sender when it names one.
    Approved {
        by: &'a str,
        sender_id: Option<&'a str>,
    },
    /// Rejected by this person.
    Rejected { by: &'a str },
    /// Expired: past its time, or no longer approvable (the person is now do-not-contact).
    Expired,
}

/// Decides one item if it is still pending; answers whether it was (a `false` means another
/// call decided it meanwhile).
pub(crate) async fn decide(
    tx: &mut PersonTx<'_>,
    workspace_id: &str,
    id: &str,
    decision: Decision<'_>,
    now: i64,
) -> Result<bool, ApiError> {
    let (status, by, sender_id) = match decision {
        Decision::Approved { by, sender_id } => ("approved", Some(by), sender_id),
        Decision::Rejected { by } => ("rejected", Some(by), None),
        Decision::Expired => ("expired", None, None),
    };
    let done = sqlx::query(
        "update approvals set status = $3, decided_at = $4, decided_by = $5, \
         sender_id = coalesce($6, sender_id) \
         where workspace_id = $1 and id = $2 and status = 'pending' \
         returning id, sequence_id, prospect_id",
    )
    .bind(workspace_id)
    .bind(id)
    .bind(status)
    .bind(now)
    .bind(by)
    .bind(sender_id)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(done) = done else { return Ok(false) };
    if matches!(decision, Decision::Expired) {
        let expired = [expired_data(&done)?];
        events::record_many(tx, workspace_id, now, EventType::ApprovalExpired, &expired).await?;
    }
    Ok(true)
}

/// The `approval.expired` data of an item an update returned (`id, sequence_id, prospect_id`).
fn expired_data(row: &sqlx::any::AnyRow) -> Result<Value, ApiError> {
    Ok(json!({
        "approval_id": row.try_get::<String, _>("id")?,
        "sequence_id": row.try_get::<Option<String>, _>("sequence_id")?,
        "prospect_id": row.try_get::<String, _>("prospect_id")?,
    }))
}

/// Whose pending items [`expire_pending`] expires.
#[derive(Debug, Clone, Copy)]
pub(crate) enum PendingOf<'a> {
    /// The item that decides whether this enrollment (`enr_...`) may start.
    Enrollment(&'a str),
    /// Every item of this sequence (`seq_...`).
    Sequence(&'a str),
    /// Every item about this prospect (`prs_...`): enrollments and reply drafts.
    Prospect(&'a str),
}

/// Expires the pending items of an enrollment, a sequence or a prospect (they ended).
pub(crate) async fn expire_pending(
    tx: &mut PersonTx<'_>,
    workspace_id: &str,
    of: PendingOf<'_>,
    now: i64,
) -> Result<(), ApiError> {
    let (filter, id) = match of {
        PendingOf::Enrollment(id) => ("kind = 'enrollment' and subject_id = $2", id),
        PendingOf::Sequence(id) => ("sequence_id = $2", id),
        PendingOf::Prospect(id) => ("prospect_id = $2", id),
    };
    let expired = sqlx::query(AssertSqlSafe(format!(
        "update approvals set status = 'expired', decided_at = $3 \
         where workspace_id = $1 and {filter} and status = 'pending' \
         returning id, sequence_id, prospect_id"
    )))
    .bind(workspace_id)
    .bind(id)
    .bind(now)
    .fetch_all(&mut **tx)
    .await?;
    let expired: Vec<Value> = expired.iter().map(expired_data).collect::<Result<_, _>>()?;
    events::record_many(tx, workspace_id, now, EventType::ApprovalExpired, &expired).await
}

/// A person's edit of a pending item's texts (JSON text); answers whether it was still pending.
pub(crate) async fn edit_texts(
    tx: &mut PersonTx<'_>,
    workspace_id: &str,
    id: &str,
    texts: &str,
    person_id: &str,
    now: i64,
) -> Result<bool, ApiError> {
    let updated = sqlx::query(
        "update approvals set texts = $3, edited_at = $4, edited_by = $5 \
         where workspace_id = $1 and id = $2 and status = 'pending'",
    )
    .bind(workspace_id)
    .bind(id)
    .bind(texts)
    .bind(now)
    .bind(person_id)
    .execute(&mut **tx)
    .await?;
    Ok(updated.rows_affected() == 1)
}

/// An item's texts rendered again from its sequence's new steps (JSON text): an agent's drafts
/// and a person's edits give way to them.
pub(crate) async fn render_again(
    tx: &mut PersonTx<'_>,
    workspace_id: &str,
    id: &str,
    texts: &str,
) -> Result<(), ApiError> {
    sqlx::query(
        "update approvals set texts = $3, edited_at = null, edited_by = null, \
         drafted_by = case when drafted_by is null then null else 'template' end \
         where workspace_id = $1 and id = $2",
    )
    .bind(workspace_id)
    .bind(id)
    .bind(texts)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Deletes a sequence's items (the draft sequence is being deleted).
pub(crate) async fn delete_of_sequence(
    tx: &mut PersonTx<'_>,
    workspace_id: &str,
    sequence_id: &str,
) -> Result<(), ApiError> {
    sqlx::query("delete from approvals where workspace_id = $1 and sequence_id = $2")
        .bind(workspace_id)
        .bind(sequence_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}
