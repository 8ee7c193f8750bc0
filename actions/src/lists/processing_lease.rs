//! A list's processing mark: the lease on the list's row that keeps two `process_list` calls
//! from working on one list at once. Its statements are here, with the list's other writes;
//! `processing` decides when to take, renew and give the mark back.
//!
//! The mark is a compare-and-set of `processing_token` with a lease (`processing_lease_expires_at`)
//! that a heartbeat renews; every statement after the first is fenced by the token, so a call
//! whose lease lapsed and was taken over changes nothing.

use outreach_runtime::prelude::{ApiError, Db};
use sqlx::AnyConnection;

use super::ProcessingStatus;

/// What a call saw of the list when it planned, and its own token.
pub struct Mark<'a> {
    pub workspace_id: &'a str,
    pub list_id: &'a str,
    pub token: &'a str,
    /// The token the list carried when the call planned (`''` for none).
    pub seen_token: &'a str,
}

/// Marks the list `processing` under `mark.token` until `lease_until`, unless another call marked
/// it since the plan or holds it now; a lapsed mark, or one under this same token, is taken over.
/// Answers whether it marked the list.
pub async fn take(db: &Db, mark: &Mark<'_>, lease_until: i64, now: i64) -> Result<bool, ApiError> {
    let marked = sqlx::query(
        "update lists set processing_status = $7, processing_token = $3, processing_lease_expires_at = $4, \
         updated_at = $5 where workspace_id = $1 and id = $2 and coalesce(processing_token, '') = $6 \
         and (processing_status <> $7 or coalesce(processing_lease_expires_at, 0) <= $5 or processing_token = $3)",
    )
    .bind(mark.workspace_id)
    .bind(mark.list_id)
    .bind(mark.token)
    .bind(lease_until)
    .bind(now)
    .bind(mark.seen_token)
    .bind(ProcessingStatus::Processing.as_str())
    .execute(db.writes())
    .await?;
    Ok(marked.rows_affected() == 1)
}

/// Extends the lease of a mark this call still holds (the heartbeat).
pub async fn renew(db: &Db, mark: &Mark<'_>, lease_until: i64) -> Result<(), ApiError> {
    sqlx::query(
        "update lists set processing_lease_expires_at = $4 where workspace_id = $1 and id = $2 \
         and processing_token = $3 and processing_status = $5",
    )
    .bind(mark.workspace_id)
    .bind(mark.list_id)
    .bind(mark.token)
    .bind(lease_until)
    .bind(ProcessingStatus::Processing.as_str())
    .execute(db.writes())
    .await?;
    Ok(())
}

/// Puts the list back as the call found it (`status`, `updated_at` and token as seen): the call
/// was refused and did nothing.
pub async fn give_back(
    db: &Db,
    mark: &Mark<'_>,
    seen_status: &str,
    seen_updated_at: i64,
) -> Result<(), ApiError> {
    sqlx::query(
        "update lists set processing_status = $4, updated_at = $5, processing_token = nullif($6, ''), \
         processing_lease_expires_at = null where workspace_id = $1 and id = $2 and processing_token = $3",
    )
    .bind(mark.workspace_id)
    .bind(mark.list_id)
    .bind(mark.token)
    .bind(seen_status)
    .bind(seen_updated_at)
    .bind(mark.seen_token)
    .execute(db.writes())
    .await?;
    Ok(())
}

/// Leaves the list `failed`: the call's processing did not finish (its work rolled back).
pub async fn fail(db: &Db, mark: &Mark<'_>, now: i64) -> Result<(), ApiError> {
    sqlx::query(
        "update lists set processing_status = $5, processing_lease_expires_at = null, updated_at = $4 \
         where workspace_id = $1 and id = $2 and processing_token = $3",
    )
    .bind(mark.workspace_id)
    .bind(mark.list_id)
    .bind(mark.token)
    .bind(now)
    .bind(ProcessingStatus::Failed.as_str())
    .execute(db.writes())
    .await?;
    Ok(())
}

/// Marks the list `processed` in the call's transaction, fenced by its token, and rotates the
/// token (calls planned while this one ran cannot mark the list). Answers whether the call still
/// held the mark.
pub async fn finish(
    conn: &mut AnyConnection,
    mark: &Mark<'_>,
    next_token: &str,
    now: i64,
) -> Result<bool, ApiError> {
    let finished = sqlx::query(
        "update lists set processing_status = $6, processed_at = $3, updated_at = $3, \
         processing_token = $5, processing_lease_expires_at = null \
         where workspace_id = $1 and id = $2 and processing_token = $4",
    )
    .bind(mark.workspace_id)
    .bind(mark.list_id)
    .bind(now)
    .bind(mark.token)
    .bind(next_token)
    .bind(ProcessingStatus::Processed.as_str())
    .execute(&mut *conn)
    .await?;
    Ok(finished.rows_affected() == 1)
}

/// Sets `failed` on lists whose lease lapsed (the call that marked them died, and its work
/// rolled back with its transaction), clearing the token so the next call can mark them;
/// answers how many.
pub async fn recover_lapsed(db: &Db, now: i64) -> Result<u64, ApiError> {
    let recovered = sqlx::query(
        "update lists set processing_status = $2, processing_token = null, processing_lease_expires_at = null, \
         updated_at = $1 where processing_status = $3 and coalesce(processing_lease_expires_at, 0) < $1",
    )
    .bind(now)
    .bind(ProcessingStatus::Failed.as_str())
    .bind(ProcessingStatus::Processing.as_str())
    .execute(db.writes())
    .await?;
    Ok(recovered.rows_affected())
}
