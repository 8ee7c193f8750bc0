//! How many prospects a workspace holds, without counting them.
//!
//! An unfiltered `list_prospects` page shows the exact total; counting 100,000 rows for it on
//! every page cost more than the page itself. The total lives in `prospect_totals` and every
//! statement that adds or removes prospects moves it in the same transaction ([`add`]), so it is
//! exact whenever a reader can see the prospects. The writers are `create_prospect`,
//! `delete_prospect` and the import's batch insert; the test `totals_follow_every_writer` in
//! `tests/api/prospects.rs` compares the total with `count(*)` after each of them.

use outreach_runtime::prelude::ApiError;
use sqlx::AnyConnection;

/// Moves the workspace's total by `delta` (negative when prospects were removed).
pub async fn add(conn: &mut AnyConnection, workspace_id: &str, delta: i64) -> Result<(), ApiError> {
    if delta == 0 {
        return Ok(());
    }
    sqlx::query(
        "insert into prospect_totals (workspace_id, total) values ($1, $2) \
         on conflict (workspace_id) do update set total = prospect_totals.total + excluded.total",
    )
    .bind(workspace_id)
    .bind(delta)
    .execute(conn)
    .await?;
    Ok(())
}

/// The workspace's total, for the workspace `$1` (no row before its first prospect: 0).
pub const READ_SQL: &str = "select total from prospect_totals where workspace_id = $1";
