//! The dashboard's webhook figures: the endpoints, and how their deliveries went in the period.
//!
//! A delivery counts in the period its last change fell in (`updated_at`): it succeeded or
//! failed for good then. Pending ones are counted as they stand now.

use outreach_runtime::prelude::ApiError;
use schemars::JsonSchema;
use serde::Serialize;
use sqlx::{AnyConnection, Row};

/// The webhook endpoints and their deliveries.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WebhookFigures {
    /// Endpoints the workspace has.
    pub endpoints: i64,
    /// Of those, how many are disabled.
    pub disabled_endpoints: i64,
    /// Deliveries that succeeded in the period.
    pub deliveries_succeeded: i64,
    /// Deliveries that failed for good in the period (out of attempts, or their endpoint
    /// disabled).
    pub deliveries_failed: i64,
    /// Deliveries waiting for an attempt now.
    pub deliveries_pending: i64,
}

/// The webhook figures of `workspace_id` since `since` (epoch ms).
pub async fn figures(
    conn: &mut AnyConnection,
    workspace_id: &str,
    since: i64,
) -> Result<WebhookFigures, ApiError> {
    // Sums are cast to bigint: PostgreSQL sums bigints into numeric.
    let endpoints = sqlx::query(
        "select count(*) as total, \
         cast(coalesce(sum(case when enabled = 0 then 1 else 0 end), 0) as bigint) as disabled \
         from webhook_endpoints where workspace_id = $1",
    )
    .bind(workspace_id)
    .fetch_one(&mut *conn)
    .await?;
    let deliveries = sqlx::query(
        "select \
         cast(coalesce(sum(case when status = 'succeeded' and updated_at >= $2 then 1 else 0 end), 0) as bigint) as succeeded, \
         cast(coalesce(sum(case when status = 'failed' and updated_at >= $2 then 1 else 0 end), 0) as bigint) as failed, \
         cast(coalesce(sum(case when status = 'pending' then 1 else 0 end), 0) as bigint) as pending \
         from webhook_deliveries where workspace_id = $1",
    )
    .bind(workspace_id)
    .bind(since)
    .fetch_one(&mut *conn)
    .await?;
    Ok(WebhookFigures {
        endpoints: endpoints.try_get("total")?,
        disabled_endpoints: endpoints.try_get("disabled")?,
        deliveries_succeeded: deliveries.try_get("succeeded")?,
        deliveries_failed: deliveries.try_get("failed")?,
        deliveries_pending: deliveries.try_get("pending")?,
    })
}
