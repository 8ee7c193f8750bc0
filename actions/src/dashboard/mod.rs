//! The dashboard: the workspace's figures over a period, in one call.
//!
//! Every figure is a count or a sum over tables the other resources keep, so there is nothing to
//! keep in sync: the dashboard can never disagree with the lists it summarises. Credits spent are
//! net of releases and attributed to the action that spent them (a release is joined to its
//! spend). The outreach figures are in [`outreach`], the approval queue's in [`approvals`], the
//! agent runs' in [`agents`], the webhook deliveries' in [`webhooks`].

pub mod agents;
pub mod approvals;
pub mod outreach;
pub mod webhooks;

use crate::prospects::Tier;
use outreach_runtime::prelude::credits::TransactionKind;
use outreach_runtime::prelude::{ApiError, Ctx, MAX_PAGE_BYTES, Timestamp, action};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::Row;

outreach_runtime::prelude::resource_tag!(
    "dashboard",
    toolset = "workspace",
    "Counts and rates over a period."
);

pub use crate::common::Period;

/// The input of `get_dashboard`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetDashboardInput {
    /// The window of the "new", import, scoring and spending figures; totals are always current.
    #[serde(default)]
    pub period: Period,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Dashboard {
    pub period: PeriodWindow,
    pub prospects: ProspectFigures,
    pub lists: ListFigures,
    pub imports: ImportFigures,
    pub scoring_runs: ScoringFigures,
    pub credits: CreditFigures,
    pub outreach: outreach::OutreachFigures,
    /// The approval queue now (not bound to the period).
    pub approvals: approvals::ApprovalFigures,
    /// Agent runs started in the period: by status, and what they processed and cost.
    pub agents: agents::AgentFigures,
    /// The webhook endpoints, and their deliveries that succeeded or failed in the period.
    pub webhooks: webhooks::WebhookFigures,
    /// How many entries of `outreach.by_sequence`, `agents.by_agent` and `outreach.by_sender`
    /// were left out to keep the answer within 100 KB, each list's last first (the sequences
    /// with the fewest invitations, the agents that spent least, the newest senders); zero
    /// otherwise. `get_sequence_stats` gives any sequence's figures.
    pub left_out: LeftOut,
}

/// Entries of the dashboard's lists left out to keep it within its bound.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct LeftOut {
    pub sequences: i64,
    pub agents: i64,
    pub senders: i64,
}

/// Holds the dashboard's answer to [`MAX_PAGE_BYTES`], the bound of every tool result (a host
/// refuses a longer one): a workspace with many sequences, each with figures per step and
/// variant, would otherwise grow without end. The lists lose their last entries (the least
/// active sequences and agents; the newest senders), sequences first (they are the largest), then
/// agents, then senders.
fn within_bound(mut dashboard: Dashboard) -> Result<Dashboard, ApiError> {
    fn bytes(value: &impl Serialize) -> Result<usize, ApiError> {
        Ok(serde_json::to_vec(value).map_err(ApiError::internal)?.len())
    }
    loop {
        let total = bytes(&dashboard)?;
        if total <= MAX_PAGE_BYTES {
            return Ok(dashboard);
        }
        // Drop what covers the excess, counting each entry with the comma before it; then
        // measure again, since a count in `left_out` may have grown by a digit.
        let mut over = total - MAX_PAGE_BYTES;
        while over > 0 {
            let left = if let Some(last) = dashboard.outreach.by_sequence.pop() {
                dashboard.left_out.sequences += 1;
                bytes(&last)?
            } else if let Some(last) = dashboard.agents.by_agent.pop() {
                dashboard.left_out.agents += 1;
                bytes(&last)?
            } else if let Some(last) = dashboard.outreach.by_sender.pop() {
                dashboard.left_out.senders += 1;
                bytes(&last)?
            } else {
                return Ok(dashboard);
            };
            over = over.saturating_sub(left + 1);
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct PeriodWindow {
    pub name: Period,
    /// The start of the window; null for `all`.
    pub starts_at: Option<Timestamp>,
    /// The end of the window: the time of the call.
    pub ends_at: Timestamp,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ProspectFigures {
    pub total: i64,
    /// Created in the period.
    pub new: i64,
    /// Current prospects by their latest tier.
    pub by_tier: TierCounts,
}

#[derive(Debug, Default, Serialize, JsonSchema)]
// Named apart from the scoring run's `TierCounts`, so generated clients get two distinct classes.
#[schemars(rename = "DashboardTierCounts")]
pub struct TierCounts {
    pub a: i64,
    pub b: i64,
    pub c: i64,
    pub d: i64,
    pub disqualified: i64,
    /// Never scored.
    pub unscored: i64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListFigures {
    pub total: i64,
    /// Created in the period.
    pub new: i64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ImportFigures {
    /// Imports in the period.
    pub count: i64,
    /// Prospects those imports created.
    pub rows_created: i64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ScoringFigures {
    /// Scoring runs in the period.
    pub count: i64,
    /// Prospects those runs scored.
    pub prospects_scored: i64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CreditFigures {
    pub balance: i64,
    /// Granted in the period.
    pub granted: i64,
    /// Spent in the period, net of releases.
    pub spent: i64,
    /// Spent in the period by the action that spent it, largest first.
    pub spent_by_source: Vec<SourceSpend>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SourceSpend {
    /// The action that spent (every action that spends credits), or `other`.
    #[schemars(extend("enum" = SPEND_SOURCES))]
    pub source: String,
    pub credits: i64,
}

/// What `spent_by_source` names: the actions that spend credits (a test checks the list against
/// the registry in `tests/api/openapi.rs`), and `other` for a spend that names none.
const SPEND_SOURCES: [&str; 5] = [
    "import_prospects",
    "process_list",
    "run_agent",
    "start_scoring_run",
    "other",
];

/// Show the workspace's dashboard.
///
/// Prospects, lists, imports, scoring, credits, outreach rates per sequence and sender, the
/// approval queue, agent runs and webhook deliveries.
///
/// Prospects (total, new, by tier), lists, imports, scoring runs, credits (balance, granted,
/// spent by source), outreach (invitations sent and accepted, messages, replies and their rates,
/// per sequence and per sender with its usage against its limits), the approval queue now
/// (waiting, from agents, oldest, by age), agent runs, and webhook deliveries (succeeded and
/// failed in the period, pending now).
#[action(scope = "read", http = "GET /dashboard")]
pub async fn get_dashboard(ctx: Ctx, input: GetDashboardInput) -> Result<Dashboard, ApiError> {
    let now = ctx.now_ms();
    let since = input
        .period
        .length_ms()
        .map_or(i64::MIN, |length| now - length);
    let workspace = ctx.workspace_id();
    let pool = ctx.db().pool();

    let prospects = sqlx::query(
        "select count(*) as total, cast(coalesce(sum(case when created_at >= $2 then 1 else 0 end), 0) as bigint) as new_count \
         from prospects where workspace_id = $1",
    )
    .bind(workspace)
    .bind(since)
    .fetch_one(pool)
    .await?;
    let mut by_tier = TierCounts::default();
    let tiers = sqlx::query(
        "select tier, count(*) as n from prospects where workspace_id = $1 group by tier",
    )
    .bind(workspace)
    .fetch_all(pool)
    .await?;
    for row in &tiers {
        let count: i64 = row.try_get("n")?;
        let tier = row.try_get::<Option<String>, _>("tier")?;
        match tier.as_deref().and_then(Tier::parse) {
            Some(Tier::A) => by_tier.a = count,
            Some(Tier::B) => by_tier.b = count,
            Some(Tier::C) => by_tier.c = count,
            Some(Tier::D) => by_tier.d = count,
            Some(Tier::Disqualified) => by_tier.disqualified = count,
            None => by_tier.unscored += count,
        }
    }
    let lists = sqlx::query(
        "select count(*) as total, cast(coalesce(sum(case when created_at >= $2 then 1 else 0 end), 0) as bigint) as new_count \
         from lists where workspace_id = $1",
    )
    .bind(workspace)
    .bind(since)
    .fetch_one(pool)
    .await?;
    let imports = sqlx::query(
        "select count(*) as n, cast(coalesce(sum(created_count), 0) as bigint) as created from imports where workspace_id = $1 and created_at >= $2",
    )
    .bind(workspace)
    .bind(since)
    .fetch_one(pool)
    .await?;
    let runs = sqlx::query(
        "select count(*) as n, cast(coalesce(sum(total), 0) as bigint) as scored from scoring_runs where workspace_id = $1 and created_at >= $2",
    )
    .bind(workspace)
    .bind(since)
    .fetch_one(pool)
    .await?;
    let granted = sqlx::query(
        "select cast(coalesce(sum(amount), 0) as bigint) as granted from credit_ledger where workspace_id = $1 and kind = $3 and created_at >= $2",
    )
    .bind(workspace)
    .bind(since)
    .bind(TransactionKind::Grant.as_str())
    .fetch_one(pool)
    .await?;
    // PostgreSQL sums bigints into numeric, hence the casts back to bigint.
    // A spend is its own reservation; a release points at the spend it returns credits of.
    let spending = sqlx::query(
        "select coalesce(s.action, 'other') as source, cast(-sum(l.amount) as bigint) as credits \
         from credit_ledger l left join credit_ledger s on s.id = coalesce(l.reservation_id, l.id) \
         where l.workspace_id = $1 and l.kind in ($3, $4) and l.created_at >= $2 \
         group by coalesce(s.action, 'other') order by credits desc, source",
    )
    .bind(workspace)
    .bind(since)
    .bind(TransactionKind::Spend.as_str())
    .bind(TransactionKind::Release.as_str())
    .fetch_all(pool)
    .await?;
    let spent_by_source = spending
        .iter()
        .map(|row| {
            Ok(SourceSpend {
                source: row.try_get("source")?,
                credits: row.try_get("credits")?,
            })
        })
        .collect::<Result<Vec<_>, sqlx::Error>>()?
        .into_iter()
        .filter(|spend| spend.credits != 0)
        .collect::<Vec<_>>();
    let balance = outreach_runtime::prelude::credits::balance(ctx.db(), workspace).await?;
    let outreach = {
        let mut conn = pool.acquire().await?;
        outreach::figures(&mut conn, workspace, since, now).await?
    };
    let approvals = {
        let mut conn = pool.acquire().await?;
        approvals::figures(&mut conn, workspace, now).await?
    };
    let agents = {
        let mut conn = pool.acquire().await?;
        agents::figures(&mut conn, workspace, since).await?
    };
    let webhooks = {
        let mut conn = pool.acquire().await?;
        webhooks::figures(&mut conn, workspace, since).await?
    };

    Ok(Dashboard {
        period: PeriodWindow {
            name: input.period,
            starts_at: input.period.length_ms().map(|_| Timestamp(since)),
            ends_at: Timestamp(now),
        },
        prospects: ProspectFigures {
            total: prospects.try_get("total")?,
            new: prospects.try_get("new_count")?,
            by_tier,
        },
        lists: ListFigures {
            total: lists.try_get("total")?,
            new: lists.try_get("new_count")?,
        },
        imports: ImportFigures {
            count: imports.try_get("n")?,
            rows_created: imports.try_get("created")?,
        },
        scoring_runs: ScoringFigures {
            count: runs.try_get("n")?,
            prospects_scored: runs.try_get("scored")?,
        },
        credits: CreditFigures {
            balance,
            granted: granted.try_get("granted")?,
            spent: spent_by_source.iter().map(|spend| spend.credits).sum(),
            spent_by_source,
        },
        outreach,
        approvals,
        agents,
        webhooks,
        left_out: LeftOut::default(),
    })
    .and_then(within_bound)
}

outreach_runtime::prelude::example!(get_dashboard,
    request: {"period": "30d"},
    response: {
        "agents": {
            "by_agent": [
                {
                    "agent_id": "agt_uC25m6KD9jMP26hUnu2B",
                    "agent_name": "Finder",
                    "credits_spent": 2,
                    "prospects_processed": 2,
                    "runs": 1
                }
            ],
            "credits_spent": 2,
            "prospects_processed": 2,
            "proposed": 2,
            "runs": 1,
            "runs_by_status": {
                "awaiting_approval": 1,
                "canceled": 0,
                "failed": 0,
                "queued": 0,
                "running": 0,
                "succeeded": 0
            }
        },
        "approvals": {
            "by_age": {"from_1_to_3_days": 1, "over_3_days": 0, "under_1_day": 2},
            "oldest_age_hours": 30,
            "oldest_waiting_since": "2026-11-22T12:22:30.106Z",
            "proposed_by_agents": 0,
            "waiting": 3
        },
        "credits": {
            "balance": 995,
            "granted": 1000,
            "spent": 5,
            "spent_by_source": [
                {"credits": 2, "source": "process_list"},
                {"credits": 2, "source": "start_scoring_run"},
                {"credits": 1, "source": "import_prospects"}
            ]
        },
        "imports": {"count": 1, "rows_created": 1},
        "left_out": {"agents": 0, "senders": 0, "sequences": 0},
        "lists": {"new": 1, "total": 1},
        "outreach": {
            "invitations_sent": 42,
            "invitations_accepted": 17,
            "acceptance_rate": 0.4047619047619048,
            "messages_sent": 31,
            "profile_views": 40,
            "replies": 6,
            "reply_rate": 0.35294117647058826,
            "by_sequence": [
                {
                    "sequence_id": "seq_G9hJ1kL3mN5pQ7rS9tU1",
                    "name": "Q3 heads of sales",
                    "invitations_sent": 42,
                    "invitations_accepted": 17,
                    "acceptance_rate": 0.4047619047619048,
                    "messages_sent": 31,
                    "replies": 6,
                    "reply_rate": 0.35294117647058826,
                    "steps": [
                        {"accepted": 17, "acceptance_rate": 0.4047619047619048, "failed": 1, "replied": 1, "reply_rate": 0.023809523809523808, "sent": 42, "step_index": 0, "type": "connection_request"},
                        {"accepted": null, "acceptance_rate": null, "failed": 0, "replied": 5, "reply_rate": 0.3125, "sent": 16, "step_index": 1, "type": "message"}
                    ]
                }
            ],
            "by_sender": [
                {
                    "sender_id": "snd_T5uV7wX9yZ1aB3cD5eF7",
                    "name": "Ada (sales)",
                    "invitations_sent": 42,
                    "messages_sent": 31,
                    "profile_views": 40,
                    "replies": 6,
                    "usage": {
                        "local_day": "2026-11-25",
                        "connection_requests_per_day": {"used": 4, "limit": 20, "available_again_at": null},
                        "connection_requests_per_week": {"used": 42, "limit": 100, "available_again_at": null},
                        "messages_per_day": {"used": 3, "limit": 50, "available_again_at": null},
                        "profile_views_per_day": {"used": 5, "limit": 80, "available_again_at": null},
                        "inmails_per_day": {"used": 0, "limit": 10, "available_again_at": null}
                    }
                }
            ]
        },
        "period": {
            "ends_at": "2026-11-23T18:22:30.106Z",
            "name": "30d",
            "starts_at": "2026-10-24T18:22:30.106Z"
        },
        "prospects": {
            "by_tier": {"a": 1, "b": 0, "c": 1, "d": 0, "disqualified": 0, "unscored": 0},
            "new": 2,
            "total": 2
        },
        "scoring_runs": {"count": 2, "prospects_scored": 4},
        "webhooks": {
            "deliveries_failed": 1,
            "deliveries_pending": 0,
            "deliveries_succeeded": 41,
            "disabled_endpoints": 0,
            "endpoints": 1
        }
    }
);

outreach_runtime::prelude::parity!(get_dashboard, timed_read,
    ok: {"period": "7d"},
    fails: {"period": "week"} => INVALID_REQUEST
);
