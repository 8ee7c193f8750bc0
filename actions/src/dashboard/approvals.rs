//! The dashboard's approval figures: what waits for a person now, and for how long.
//!
//! Unlike the other figures these are not bound to the period: a proposal waiting since before it
//! is still waiting, and its age is what a person acting on the queue needs to see. Ages are
//! bucketed by day because proposals expire after three days.

use outreach_runtime::prelude::{ApiError, Timestamp};
use schemars::JsonSchema;
use serde::Serialize;
use sqlx::{AnyConnection, Row};

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// The approval queue as it stands.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ApprovalFigures {
    /// Items waiting for a person (`pending`).
    pub waiting: i64,
    /// Of those, how many an agent run proposed.
    pub proposed_by_agents: i64,
    /// When the oldest waiting item was proposed; null when none waits.
    pub oldest_waiting_since: Option<Timestamp>,
    /// The oldest waiting item's age in hours (rounded down); null when none waits.
    pub oldest_age_hours: Option<i64>,
    /// Waiting items by age.
    pub by_age: AgeBuckets,
}

/// Waiting items by how long they have waited.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct AgeBuckets {
    /// Less than a day.
    pub under_1_day: i64,
    /// One to three days.
    pub from_1_to_3_days: i64,
    /// Three days or more.
    pub over_3_days: i64,
}

/// The approval figures of `workspace_id` as of `now` (epoch ms).
pub async fn figures(
    conn: &mut AnyConnection,
    workspace_id: &str,
    now: i64,
) -> Result<ApprovalFigures, ApiError> {
    // Sums are cast to bigint: PostgreSQL sums bigints into numeric.
    let row = sqlx::query(
        "select count(*) as waiting, \
         cast(coalesce(sum(case when run_id is not null then 1 else 0 end), 0) as bigint) as by_agents, \
         min(created_at) as oldest, \
         cast(coalesce(sum(case when created_at > $2 then 1 else 0 end), 0) as bigint) as under_1, \
         cast(coalesce(sum(case when created_at <= $2 and created_at > $3 then 1 else 0 end), 0) as bigint) as under_3 \
         from approvals where workspace_id = $1 and status = 'pending'",
    )
    .bind(workspace_id)
    .bind(now - DAY_MS)
    .bind(now - 3 * DAY_MS)
    .fetch_one(conn)
    .await?;
    let waiting: i64 = row.try_get("waiting")?;
    let under_1_day: i64 = row.try_get("under_1")?;
    let from_1_to_3_days: i64 = row.try_get("under_3")?;
    let oldest: Option<i64> = row.try_get("oldest")?;
    Ok(ApprovalFigures {
        waiting,
        proposed_by_agents: row.try_get("by_agents")?,
        oldest_waiting_since: oldest.map(Timestamp),
        oldest_age_hours: oldest.map(|at| (now - at).max(0) / (60 * 60 * 1000)),
        by_age: AgeBuckets {
            under_1_day,
            from_1_to_3_days,
            over_3_days: waiting - under_1_day - from_1_to_3_days,
        },
    })
}
