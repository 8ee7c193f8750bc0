//! The dashboard's agent figures: runs by status and what agents spent, over the period.
//!
//! Credits are the runs' own `credits_charged` (what a run kept once settled; a live run's charge
//! so far), so they add up to the ledger's net spend of `run_agent` once every run has ended. Per
//! agent, the name is the one its newest run in the period carried, so a deleted agent still
//! shows what it cost.

use outreach_runtime::prelude::ApiError;
use schemars::JsonSchema;
use serde::Serialize;
use sqlx::{AnyConnection, Row};

use crate::agents::runs::AgentRunStatus;

/// Agent runs started in the period.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AgentFigures {
    /// Runs started in the period.
    pub runs: i64,
    /// Those runs by their status now.
    pub runs_by_status: RunsByStatus,
    /// Prospects (or conversations) those runs processed.
    pub prospects_processed: i64,
    /// Approval items those runs proposed.
    pub proposed: i64,
    /// Credits those runs were charged.
    pub credits_spent: i64,
    /// Per agent, most credits first.
    pub by_agent: Vec<AgentSpend>,
}

/// Runs by status.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct RunsByStatus {
    pub queued: i64,
    pub running: i64,
    pub awaiting_approval: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub canceled: i64,
}

/// What one agent's runs in the period did and cost.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AgentSpend {
    pub agent_id: String,
    pub agent_name: String,
    pub runs: i64,
    pub prospects_processed: i64,
    pub credits_spent: i64,
}

/// The agent figures of `workspace_id` for runs created at or after `since` (epoch ms).
pub async fn figures(
    conn: &mut AnyConnection,
    workspace_id: &str,
    since: i64,
) -> Result<AgentFigures, ApiError> {
    let mut by_status = RunsByStatus::default();
    let rows = sqlx::query(
        "select status, count(*) as n from agent_runs where workspace_id = $1 and created_at >= $2 group by status",
    )
    .bind(workspace_id)
    .bind(since)
    .fetch_all(&mut *conn)
    .await?;
    for row in &rows {
        let n: i64 = row.try_get("n")?;
        match AgentRunStatus::from_db(&row.try_get::<String, _>("status")?)? {
            AgentRunStatus::Queued => by_status.queued = n,
            AgentRunStatus::Running => by_status.running = n,
            AgentRunStatus::AwaitingApproval => by_status.awaiting_approval = n,
            AgentRunStatus::Succeeded => by_status.succeeded = n,
            AgentRunStatus::Failed => by_status.failed = n,
            AgentRunStatus::Canceled => by_status.canceled = n,
        }
    }
    // Sums are cast to bigint: PostgreSQL sums bigints into numeric.
    let agents = sqlx::query(
        "select agent_id, max(agent_name) as agent_name, count(*) as runs, \
         cast(coalesce(sum(processed), 0) as bigint) as processed, \
         cast(coalesce(sum(proposed), 0) as bigint) as proposed, \
         cast(coalesce(sum(credits_charged), 0) as bigint) as credits \
         from agent_runs where workspace_id = $1 and created_at >= $2 \
         group by agent_id order by credits desc, agent_id",
    )
    .bind(workspace_id)
    .bind(since)
    .fetch_all(&mut *conn)
    .await?;
    let mut figures = AgentFigures {
        runs: 0,
        runs_by_status: by_status,
        prospects_processed: 0,
        proposed: 0,
        credits_spent: 0,
        by_agent: Vec::with_capacity(agents.len()),
    };
    for row in &agents {
        let spend = AgentSpend {
            agent_id: row.try_get("agent_id")?,
            agent_name: row.try_get("agent_name")?,
            runs: row.try_get("runs")?,
            prospects_processed: row.try_get("processed")?,
            credits_spent: row.try_get("credits")?,
        };
        figures.runs += spend.runs;
        figures.prospects_processed += spend.prospects_processed;
        figures.proposed += row.try_get::<i64, _>("proposed")?;
        figures.credits_spent += spend.credits_spent;
        figures.by_agent.push(spend);
    }
    Ok(figures)
}
