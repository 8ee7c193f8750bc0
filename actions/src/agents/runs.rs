//! Agent runs: `run_agent` starts one, `get_run`, `list_runs` and `cancel_run` follow it.
//!
//! A run is priced, reserved and queued in one transaction, and returned at once (`queued`): its
//! price function counts what it may work on (at most the agent's or the call's prospect limit)
//! and the reservation, the run row and its job commit together with the stored idempotent answer.
//! The reservation then becomes a hold that the job settles when the run ends, keeping one credit
//! unit per prospect actually processed and returning the rest ([`super::execute`]). One run per
//! agent is live (`queued` or `running`) at a time, held by a unique index rather than a check, so
//! two instances racing cannot both start one; a retry with the same `Idempotency-Key` replays the
//! first answer instead of meeting that 409.
//!
//! A run's work waits for a person: its proposals go to the approval queue, and the run stays
//! `awaiting_approval` until every one is approved, rejected or expired ([`proposals_decided`]).
//! Only an `autonomous` agent started by a caller holding `send` approves its own proposals.

use std::collections::HashMap;

use outreach_runtime::prelude::{
    ApiError, Ctx, ErrorCode, Page, PageParams, Priced, Scope, Timestamp, action, enqueue, ids,
    is_unique_violation, paged, price_item,
};
use outreach_runtime::prelude::{JobArgs, NewJob};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use super::{Agent, AgentKind, AgentMode, execute};
use crate::common::{IdKind, json_text};
use crate::events::{self, EventType};
use crate::lists::placeholders;

outreach_runtime::prelude::resource_tag!(
    "runs",
    toolset = "agents",
    "Runs of agents: queued, running, awaiting approval or ended, with their log, what they processed and what they cost."
);

price_item! {
    /// A prospect an agent run processed (selected, scored and proposed; drafted for; or, for
    /// `inbox_triage`, a conversation whose replies it classified).
    pub AGENT_RUN_PROSPECT = "agent_run.prospect", 1;
}

/// How many of each run's latest log entries `list_runs` shows.
const LIST_LOG_ENTRIES: usize = 5;

/// The most prospect ids a `writer` run takes.
pub const MAX_RUN_PROSPECT_IDS: usize = 1000;

outreach_runtime::prelude::text_enum! {
    /// Where a run is.
    pub enum AgentRunStatus {
        /// Created, its credits reserved; waiting for a worker.
        Queued => "queued",
        /// A worker is selecting and processing.
        Running => "running",
        /// Its work is done and its proposals wait in the approval queue.
        AwaitingApproval => "awaiting_approval",
        /// Done, and nothing of it waits for a person.
        Succeeded => "succeeded",
        /// Stopped by an error (`error` says which); what it processed is charged, the rest released.
        Failed => "failed",
        /// Canceled by a person; what it processed is charged, the rest released.
        Canceled => "canceled",
    }
}

impl AgentRunStatus {
    /// Queued or running: the agent cannot start another run, nor be deleted.
    pub fn is_live(self) -> bool {
        matches!(self, AgentRunStatus::Queued | AgentRunStatus::Running)
    }
}

/// Why a run failed.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RunError {
    /// An error code of the API's table (`not_found`, `invalid_state`, `internal_error`, ...).
    pub code: String,
    pub message: String,
}

/// One entry of a run's log.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RunLogEntry {
    pub at: Timestamp,
    pub message: String,
}

/// An agent run as the API shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Run {
    pub id: String,
    pub agent_id: String,
    /// The agent's name when the run started.
    pub agent_name: String,
    pub kind: AgentKind,
    pub status: AgentRunStatus,
    /// `autonomous` only when the agent is autonomous and the caller held `send` when starting it;
    /// otherwise `review`: its proposals wait for a person.
    pub mode: AgentMode,
    /// Prospects (or, for `inbox_triage`, conversations) processed so far.
    pub processed: i64,
    /// How many it will process: the estimate while `queued`, the number selected from then on.
    pub total: i64,
    /// Approval items it proposed.
    pub proposed: i64,
    /// Of those, how many still wait for a person.
    pub approvals_pending: i64,
    /// Credits set aside when it started.
    pub credits_reserved: i64,
    /// Credits kept: one unit per prospect processed. The rest is released when it ends.
    pub credits_charged: i64,
    /// Set when `failed`.
    pub error: Option<RunError>,
    /// What it did, oldest first: what was selected and why, what was proposed or drafted, what
    /// was charged. `list_runs` shows each run's last 5 entries; `get_run` shows them all.
    pub log: Vec<RunLogEntry>,
    /// The person (`psn_...`) who started it.
    pub started_by: String,
    pub created_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub updated_at: Timestamp,
}

const RUN_COLUMNS: &str = "id, agent_id, agent_name, kind, status, autonomous, total, processed, proposed, \
     credits_reserved, credits_charged, error_code, error_message, person_id, created_at, started_at, finished_at, updated_at";

impl Run {
    fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        let error_code: Option<String> = row.try_get("error_code")?;
        let error_message: Option<String> = row.try_get("error_message")?;
        Ok(Self {
            id: row.try_get("id")?,
            agent_id: row.try_get("agent_id")?,
            agent_name: row.try_get("agent_name")?,
            kind: AgentKind::from_db(&row.try_get::<String, _>("kind")?)?,
            status: AgentRunStatus::from_db(&row.try_get::<String, _>("status")?)?,
            mode: if row.try_get::<i64, _>("autonomous")? != 0 {
                AgentMode::Autonomous
            } else {
                AgentMode::Review
            },
            processed: row.try_get("processed")?,
            total: row.try_get("total")?,
            proposed: row.try_get("proposed")?,
            approvals_pending: 0,
            credits_reserved: row.try_get("credits_reserved")?,
            credits_charged: row.try_get("credits_charged")?,
            error: error_code.map(|code| RunError {
                code,
                message: error_message.unwrap_or_default(),
            }),
            log: Vec::new(),
            started_by: row.try_get("person_id")?,
            created_at: Timestamp(row.try_get("created_at")?),
            started_at: row.try_get::<Option<i64>, _>("started_at")?.map(Timestamp),
            finished_at: row.try_get::<Option<i64>, _>("finished_at")?.map(Timestamp),
            updated_at: Timestamp(row.try_get("updated_at")?),
        })
    }
}

/// Fills in the runs' logs (the last `log_limit` entries of each, or all) and their pending
/// approvals: two queries for the whole page.
async fn attach(
    conn: &mut sqlx::AnyConnection,
    runs: &mut [Run],
    log_limit: Option<usize>,
) -> Result<(), ApiError> {
    if runs.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = runs.iter().map(|run| run.id.as_str()).collect();
    let logs = sqlx::query(AssertSqlSafe(format!(
        "select run_id, at, message from agent_run_log where run_id in {} order by run_id, seq",
        placeholders(1, ids.len())
    )));
    let logs = ids
        .iter()
        .fold(logs.persistent(false), |query, id| query.bind(*id))
        .fetch_all(&mut *conn)
        .await?;
    let pending = sqlx::query(AssertSqlSafe(format!(
        "select run_id, count(*) as n from approvals where status = 'pending' and run_id in {} group by run_id",
        placeholders(1, ids.len())
    )));
    let pending = ids
        .iter()
        .fold(pending.persistent(false), |query, id| query.bind(*id))
        .fetch_all(&mut *conn)
        .await?;
    let mut by_run: HashMap<String, (Vec<RunLogEntry>, i64)> = HashMap::new();
    for row in &logs {
        by_run
            .entry(row.try_get("run_id")?)
            .or_default()
            .0
            .push(RunLogEntry {
                at: Timestamp(row.try_get("at")?),
                message: row.try_get("message")?,
            });
    }
    for row in &pending {
        by_run.entry(row.try_get("run_id")?).or_default().1 = row.try_get("n")?;
    }
    for run in runs.iter_mut() {
        if let Some((mut log, pending)) = by_run.remove(&run.id) {
            if let Some(limit) = log_limit {
                log.drain(..log.len().saturating_sub(limit));
            }
            run.log = log;
            run.approvals_pending = pending;
        }
    }
    Ok(())
}

/// Reads one run of the workspace with its log, or 404.
pub(crate) async fn fetch(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<Run, ApiError> {
    IdKind::Run.check(id)?;
    let row = sqlx::query(AssertSqlSafe(format!(
        "select {RUN_COLUMNS} from agent_runs where workspace_id = $1 and id = $2"
    )))
    .bind(workspace_id)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or_else(|| IdKind::Run.not_found(id))?;
    let mut runs = [Run::from_row(&row)?];
    attach(conn, &mut runs, None).await?;
    let [run] = runs;
    Ok(run)
}

/// The agent's run that is `queued` or `running`, if any.
pub(crate) async fn live_run(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    agent_id: &str,
) -> Result<Option<String>, ApiError> {
    let row = sqlx::query(
        "select id from agent_runs where workspace_id = $1 and agent_id = $2 and status in ('queued', 'running')",
    )
    .bind(workspace_id)
    .bind(agent_id)
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|row| row.try_get("id")).transpose()?)
}

/// The 409 for an agent whose run is still live: it cannot start another, nor be `verb`.
pub(crate) fn live_run_error(agent_id: &str, run_id: &str, verb: &str) -> ApiError {
    ApiError::new(
        ErrorCode::INVALID_STATE,
        format!(
            "Agent `{agent_id}` has a run in progress (`{run_id}`), so it cannot be {verb} now; wait for it \
             (`get_run`) or cancel it (`cancel_run`). Nothing was done or charged."
        ),
    )
    .with_extra("run_id", run_id.to_owned())
}

/// Appends a line to a run's log, in the caller's transaction.
pub(crate) async fn log(
    conn: &mut sqlx::AnyConnection,
    run_id: &str,
    at: i64,
    message: &str,
) -> Result<(), ApiError> {
    sqlx::query(
        "insert into agent_run_log (run_id, seq, at, message) \
         select $1, coalesce(max(seq), 0) + 1, $2, $3 from agent_run_log where run_id = $1",
    )
    .bind(run_id)
    .bind(at)
    .bind(message)
    .execute(conn)
    .await?;
    Ok(())
}

/// Ends the runs of the workspace that were waiting for their proposals once none is pending
/// (`succeeded`): the follow-up job a decision enqueues calls it (`followups::runs_decided`).
pub(crate) async fn proposals_decided(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    now: i64,
) -> Result<(), ApiError> {
    let done = sqlx::query(
        "select id, agent_id, kind from agent_runs r where r.workspace_id = $1 and r.status = 'awaiting_approval' \
         and not exists (select 1 from approvals a where a.run_id = r.id and a.status = 'pending')",
    )
    .bind(workspace_id)
    .fetch_all(&mut *conn)
    .await?;
    for row in done {
        let id: String = row.try_get("id")?;
        let counts = sqlx::query(
            "select cast(coalesce(sum(case when status = 'approved' then 1 else 0 end), 0) as bigint) as approved, \
             cast(coalesce(sum(case when status = 'rejected' then 1 else 0 end), 0) as bigint) as rejected, \
             cast(coalesce(sum(case when status = 'expired' then 1 else 0 end), 0) as bigint) as expired \
             from approvals where run_id = $1",
        )
        .bind(&id)
        .fetch_one(&mut *conn)
        .await?;
        let (approved, rejected, expired): (i64, i64, i64) = (
            counts.try_get("approved")?,
            counts.try_get("rejected")?,
            counts.try_get("expired")?,
        );
        let ended = sqlx::query(
            "update agent_runs set status = 'succeeded', updated_at = $2 where id = $1 and status = 'awaiting_approval'",
        )
        .bind(&id)
        .bind(now)
        .execute(&mut *conn)
        .await?;
        if ended.rows_affected() == 1 {
            let data = serde_json::json!({
                "run_id": id,
                "agent_id": row.try_get::<String, _>("agent_id")?,
                "kind": row.try_get::<String, _>("kind")?,
            });
            events::record(conn, workspace_id, now, EventType::RunCompleted, data).await?;
            log(
                conn,
                &id,
                now,
                &format!(
                    "Every proposal is decided: {approved} approved, {rejected} rejected, {expired} expired. The run succeeded."
                ),
            )
            .await?;
        }
    }
    Ok(())
}

// ----- run_agent -----

/// The input of `run_agent`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunAgentInput {
    /// `agt_...`
    pub id: String,
    /// At most the agent's `max_prospects_per_run`, the default.
    #[schemars(range(min = 1, max = 1000))]
    pub max_prospects: Option<i64>,
    /// `writer` only: these `prs_...` ids instead of its list.
    #[schemars(length(min = 1, max = 1000))]
    pub prospect_ids: Option<Vec<String>>,
}

/// What a run will do, worked out by its price function.
pub struct RunPlan {
    agent: Agent,
    /// The most prospects it processes.
    limit: i64,
    /// What the reservation covers: `min(limit, candidates)`.
    quantity: i64,
    /// The run's own input, kept on the run.
    input: RunInput,
}

/// What a run keeps of its call's input.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct RunInput {
    pub limit: i64,
    pub prospect_ids: Option<Vec<String>>,
    /// How many items the reservation pays for (`min(limit, candidates)` when priced): the most
    /// the run processes, however many candidates appear before it starts.
    #[serde(default)]
    pub reserved: i64,
}

impl RunInput {
    /// The most items the run may take: its limit, and no more than its reservation pays for.
    pub(crate) fn capacity(&self) -> usize {
        usize::try_from(self.limit.min(self.reserved)).unwrap_or(0)
    }
}

/// A run priced over its agent's `max_credits_per_run` is refused (400), estimate included.
fn check_cap(agent: &Agent, price: i64, quantity: i64) -> Result<(), ApiError> {
    match agent.max_credits_per_run {
        Some(cap) if price > cap => Err(ApiError::invalid_request(format!(
            "This run would reserve {price} credits for {quantity} prospects, over agent `{}`'s \
             `max_credits_per_run` of {cap}; nothing was done or charged. Lower `max_prospects`, or raise the cap \
             with `update_agent`.",
            agent.id
        ))
        .with_extra("price", price)
        .with_extra("max_credits_per_run", cap)),
        _ => Ok(()),
    }
}

async fn price_run(ctx: &Ctx, input: &RunAgentInput) -> Result<Priced<RunPlan>, ApiError> {
    let mut conn = ctx.db().pool().acquire().await?;
    let agent = super::fetch(&mut conn, ctx.workspace_id(), &input.id).await?;
    let limit = match input.max_prospects {
        None => agent.max_prospects_per_run,
        Some(limit) if (1..=agent.max_prospects_per_run).contains(&limit) => limit,
        Some(limit) => {
            return Err(ApiError::invalid_request(format!(
                "`max_prospects` must be between 1 and the agent's `max_prospects_per_run` ({}); it is {limit}.",
                agent.max_prospects_per_run
            )));
        }
    };
    let prospect_ids = match &input.prospect_ids {
        None => None,
        Some(_) if agent.kind != AgentKind::Writer => {
            return Err(ApiError::invalid_request(format!(
                "`prospect_ids` is for `writer` agents; a `{}` agent selects its own prospects.",
                agent.kind
            )));
        }
        Some(ids) => {
            let mut seen = std::collections::HashSet::new();
            let ids: Vec<String> = ids
                .iter()
                .map(|id| id.trim().to_owned())
                .filter(|id| seen.insert(id.clone()))
                .collect();
            if ids.is_empty() || ids.len() > MAX_RUN_PROSPECT_IDS {
                return Err(ApiError::invalid_request(format!(
                    "`prospect_ids` must hold 1 to {MAX_RUN_PROSPECT_IDS} ids; it holds {}.",
                    ids.len()
                )));
            }
            Some(ids)
        }
    };
    let mut run_input = RunInput {
        limit,
        prospect_ids,
        reserved: 0,
    };
    let candidates = execute::count_candidates(
        &mut conn,
        ctx.workspace_id(),
        &agent,
        &run_input,
        ctx.now_ms(),
    )
    .await?;
    let quantity = candidates.min(limit);
    run_input.reserved = quantity;
    let price = ctx.price(AGENT_RUN_PROSPECT, quantity);
    check_cap(&agent, price.total, quantity)?;
    Ok(price
        .detail("candidates", candidates)
        .detail("max_prospects", limit)
        .detail("max_credits_per_run", agent.max_credits_per_run)
        .plan(RunPlan {
            agent,
            limit,
            quantity,
            input: run_input,
        }))
}

/// Run an agent: select, score and draft, and propose the results for approval.
///
/// **Nothing is sent before a person approves it**, unless the agent is `autonomous` and the caller
/// holds `send`. Costs one `agent_run.prospect` unit per prospect, reserved at the start;
/// `estimate_only` prices it. Poll `get_run`.
///
/// Returns the run `queued`, then `running`, and `awaiting_approval`, `succeeded` or `failed`; stop
/// it with `cancel_run`. A `prospector` proposes prospects, a `writer` drafts texts, an
/// `inbox_triage` drafts answers to replies.
#[action(scope = "write", credits = price_run, idempotent, http = "POST /agents/{id}/run")]
pub async fn run_agent(ctx: Ctx, _input: RunAgentInput, plan: RunPlan) -> Result<Run, ApiError> {
    let RunPlan {
        agent,
        limit,
        quantity,
        input,
    } = plan;
    let unit_price = ctx.unit_price(AGENT_RUN_PROSPECT);
    let price = quantity.saturating_mul(unit_price);
    let principal = ctx.principal();
    let autonomous = agent.mode == AgentMode::Autonomous && principal.allows(Scope::Send);
    let workspace_id = ctx.workspace_id();
    let now = ctx.now_ms();
    let run_id = ids::new_id("run");

    let mut tx = ctx.tx().await?;
    // The agent row as it is now, locked against a concurrent change or delete: the run keeps
    // these settings, so they are the ones checked.
    let agent = super::fetch_for_update(&mut tx, workspace_id, &agent.id).await?;
    if !agent.enabled {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "Agent `{}` is disabled; enable it with `update_agent` (`enabled: true`) to run it. Nothing was done or charged.",
                agent.id
            ),
        ));
    }
    check_cap(&agent, price, quantity)?;
    let inserted = sqlx::query(
        "insert into agent_runs (id, workspace_id, agent_id, agent_name, kind, status, phase, settings, input, \
         autonomous, person_id, credential_kind, credential_id, total, unit_price, \
         credits_reserved, created_at, updated_at) \
         values ($1, $2, $3, $4, $5, 'queued', 'select', $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15)",
    )
    .bind(&run_id)
    .bind(workspace_id)
    .bind(&agent.id)
    .bind(&agent.name)
    .bind(agent.kind.as_str())
    .bind(json_text(&agent)?)
    .bind(json_text(&input)?)
    .bind(i64::from(autonomous))
    .bind(&principal.person_id)
    .bind(principal.credential_kind.as_str())
    .bind(&principal.credential_id)
    .bind(quantity)
    .bind(unit_price)
    .bind(price)
    .bind(now)
    .execute(&mut *tx)
    .await;
    if let Err(error) = inserted {
        if is_unique_violation(&error, "agent_runs_live_key") {
            // The transaction is spoiled on PostgreSQL; the live run is read outside it.
            drop(tx);
            let mut conn = ctx.db().pool().acquire().await?;
            return Err(match live_run(&mut conn, workspace_id, &agent.id).await? {
                Some(live) => live_run_error(&agent.id, &live, "run again"),
                None => ApiError::new(
                    ErrorCode::INVALID_STATE,
                    format!(
                        "Agent `{}` had a run in progress that ended just now; nothing was done or charged. Retry.",
                        agent.id
                    ),
                ),
            });
        }
        return Err(error.into());
    }
    let reservation = ctx.hold(&mut tx, &run_id, now + execute::HOLD_MS).await?;
    crate::credits::spent(&mut tx, ctx.workspace_id(), reservation.amount, now).await?;
    sqlx::query("update agent_runs set reservation_id = $2 where id = $1")
        .bind(&run_id)
        .bind(&reservation.id)
        .execute(&mut *tx)
        .await?;
    let mode = if autonomous {
        "autonomous: it approves its own proposals".to_owned()
    } else if agent.mode == AgentMode::Autonomous {
        "review: the agent is autonomous, but the caller does not hold `send`, so its proposals wait for a person"
            .to_owned()
    } else {
        "review: its proposals wait for a person".to_owned()
    };
    log(
        &mut tx,
        &run_id,
        now,
        &format!(
            "Queued by {} ({}): up to {limit} prospects, {quantity} of them possible now; {price} credits reserved \
             ({unit_price} per prospect processed, the rest released at the end). Mode {mode}.",
            principal.email, principal.credential_name
        ),
    )
    .await?;
    let job_id = enqueue(
        &mut tx,
        ctx.clock(),
        NewJob::of(&execute::RunJob {
            run_id: run_id.clone(),
        })
        .workspace(workspace_id)
        .unique_key(format!("run:{run_id}"))
        .max_attempts(execute::MAX_ATTEMPTS),
    )
    .await?;
    sqlx::query("update agent_runs set job_id = $2 where id = $1")
        .bind(&run_id)
        .bind(&job_id)
        .execute(&mut *tx)
        .await?;
    fetch(&mut tx, workspace_id, &run_id).await
}

outreach_runtime::prelude::example!(run_agent,
    request: {"id": "agt_uC25m6KD9jMP26hUnu2B", "max_prospects": 10},
    response: {
        "agent_id": "agt_uC25m6KD9jMP26hUnu2B",
        "agent_name": "Finder",
        "approvals_pending": 0,
        "created_at": "2026-11-24T10:43:43.680Z",
        "credits_charged": 0,
        "credits_reserved": 2,
        "error": null,
        "finished_at": null,
        "id": "run_qouf72evK04FKb8aJCy8",
        "kind": "prospector",
        "log": [
            {
                "at": "2026-11-24T10:43:43.680Z",
                "message": "Queued by owner@example.com (First key): up to 10 prospects, 2 of them possible now; 2 credits reserved (1 per prospect processed, the rest released at the end). Mode review: its proposals wait for a person."
            }
        ],
        "mode": "review",
        "processed": 0,
        "proposed": 0,
        "started_at": null,
        "started_by": "psn_S78PHjQ1Gxxrs0AaGiVl",
        "status": "queued",
        "total": 2,
        "updated_at": "2026-11-24T10:43:43.680Z"
    }
);

outreach_runtime::prelude::parity!(run_agent, write,
    ok: {"id": "$agent", "max_prospects": 5},
    fails: {"id": "$missing:agt"} => NOT_FOUND
);

// ----- get_run, list_runs, cancel_run -----

/// The input of `get_run` and `cancel_run`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunId {
    /// `run_...`
    pub id: String,
}

/// Get an agent run by id.
///
/// Poll it after `run_agent` until it is no longer `queued` or `running`.
///
/// Returns its status, progress (`processed` of `total`), what it reserved and charged, how many
/// of its proposals still wait for a person, and its log.
#[action(scope = "read", http = "GET /runs/{id}")]
pub async fn get_run(ctx: Ctx, input: RunId) -> Result<Run, ApiError> {
    let mut conn = ctx.db().pool().acquire().await?;
    fetch(&mut conn, ctx.workspace_id(), &input.id).await
}

outreach_runtime::prelude::example!(get_run,
    request: {"id": "run_qouf72evK04FKb8aJCy8"},
    response: {
        "agent_id": "agt_uC25m6KD9jMP26hUnu2B",
        "agent_name": "Finder",
        "approvals_pending": 2,
        "created_at": "2026-11-24T10:43:43.680Z",
        "credits_charged": 2,
        "credits_reserved": 2,
        "error": null,
        "finished_at": "2026-11-24T10:43:43.711Z",
        "id": "run_qouf72evK04FKb8aJCy8",
        "kind": "prospector",
        "log": [
            {
                "at": "2026-11-24T10:43:43.680Z",
                "message": "Queued by owner@example.com (First key): up to 10 prospects, 2 of them possible now; 2 credits reserved (1 per prospect processed, the rest released at the end). Mode review: its proposals wait for a person."
            },
            {"at": "2026-11-24T10:43:43.697Z", "message": "Started."},
            {
                "at": "2026-11-24T10:43:43.697Z",
                "message": "Selected 2 of 2 candidates (not do-not-contact, reachable, in no live sequence and never in sequence `seq_okRb3aRfHsHWtBVIOdmk`, not contacted within 30 days): 2 scored tier b or better against targeting `Heads of sales` (version 1), 0 scored lower and 0 were disqualified by a gate; the best 2 by score are kept."
            },
            {
                "at": "2026-11-24T10:43:43.697Z",
                "message": "Scores from 60 (`prs_ildJ5mhOZtanJSHbrKwU`) down to 60 (`prs_rnCByDKSyoytsxw895o3`)."
            },
            {
                "at": "2026-11-24T10:43:43.702Z",
                "message": "Processed 2 (2 so far): 2 proposed for approval, 0 without a proposal. Charged 2 credits.\n- `prs_ildJ5mhOZtanJSHbrKwU`: added to list `Heads of sales (found by Finder)` and proposed for sequence `Q3 heads of sales (DACH)` (score 60, tier b) as `apr_ZFnPzALrdqvyIl0Jp5w1`.\n- `prs_rnCByDKSyoytsxw895o3`: added to list `Heads of sales (found by Finder)` and proposed for sequence `Q3 heads of sales (DACH)` (score 60, tier b) as `apr_p5L2rgg2QtA5fTSXhFiQ`."
            },
            {
                "at": "2026-11-24T10:43:43.711Z",
                "message": "Finished: 2 processed. Charged 2 credits, released 0. 2 proposals wait in the approval queue (`list_approvals` with `run_id`) until 2026-11-27T10:43:43.711Z."
            }
        ],
        "mode": "review",
        "processed": 2,
        "proposed": 2,
        "started_at": "2026-11-24T10:43:43.697Z",
        "started_by": "psn_S78PHjQ1Gxxrs0AaGiVl",
        "status": "awaiting_approval",
        "total": 2,
        "updated_at": "2026-11-24T10:43:43.711Z"
    }
);

outreach_runtime::prelude::parity!(get_run, read,
    ok: {"id": "$agent_run"},
    fails: {"id": "$missing:run"} => NOT_FOUND
);

/// The input of `list_runs`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListRunsInput {
    /// `agt_...`
    pub agent_id: Option<String>,
    /// Only runs in this status.
    pub status: Option<AgentRunStatus>,
    #[serde(flatten)]
    pub page: PageParams,
}

/// List agent runs, newest first.
///
/// Each run with its last 5 log entries (`get_run` has them all).
#[action(scope = "read", http = "GET /runs")]
pub async fn list_runs(ctx: Ctx, input: ListRunsInput) -> Result<Page<Run>, ApiError> {
    let mut filter = String::from("workspace_id = $1");
    filter.push_str(if input.agent_id.is_some() {
        " and agent_id = $2"
    } else {
        " and $2 = $2"
    });
    filter.push_str(if input.status.is_some() {
        " and status = $3"
    } else {
        " and $3 = $3"
    });
    let agent_id = input.agent_id.clone().unwrap_or_default();
    let status = input.status.map_or("", AgentRunStatus::as_str);
    let mut page = paged(
        ctx.db().pool(),
        input.page,
        format!("select count(*) from agent_runs where {filter}"),
        format!(
            "select {RUN_COLUMNS} from agent_runs where {filter} order by created_at desc, id desc limit $4 offset $5"
        ),
        |query| {
            query
                .bind(ctx.workspace_id())
                .bind(agent_id.clone())
                .bind(status)
        },
        Run::from_row,
    )
    .await?;
    let mut conn = ctx.db().pool().acquire().await?;
    attach(&mut conn, &mut page.items, Some(LIST_LOG_ENTRIES)).await?;
    Ok(page)
}

outreach_runtime::prelude::example!(list_runs,
    request: {"agent_id": "agt_uC25m6KD9jMP26hUnu2B", "limit": 1},
    response: {
        "count": 1,
        "has_more": false,
        "items": [
            {
                "agent_id": "agt_uC25m6KD9jMP26hUnu2B",
                "agent_name": "Finder",
                "approvals_pending": 2,
                "created_at": "2026-11-24T10:43:43.680Z",
                "credits_charged": 2,
                "credits_reserved": 2,
                "error": null,
                "finished_at": "2026-11-24T10:43:43.711Z",
                "id": "run_qouf72evK04FKb8aJCy8",
                "kind": "prospector",
                "log": [
                    {
                        "at": "2026-11-24T10:43:43.680Z",
                        "message": "Queued by owner@example.com (First key): up to 10 prospects, 2 of them possible now; 2 credits reserved (1 per prospect processed, the rest released at the end). Mode review: its proposals wait for a person."
                    },
                    {"at": "2026-11-24T10:43:43.697Z", "message": "Started."},
                    {
                        "at": "2026-11-24T10:43:43.697Z",
                        "message": "Selected 2 of 2 candidates (not do-not-contact, reachable, in no live sequence and never in sequence `seq_okRb3aRfHsHWtBVIOdmk`, not contacted within 30 days): 2 scored tier b or better against targeting `Heads of sales` (version 1), 0 scored lower and 0 were disqualified by a gate; the best 2 by score are kept."
                    },
                    {
                        "at": "2026-11-24T10:43:43.697Z",
                        "message": "Scores from 60 (`prs_ildJ5mhOZtanJSHbrKwU`) down to 60 (`prs_rnCByDKSyoytsxw895o3`)."
                    },
                    {
                        "at": "2026-11-24T10:43:43.702Z",
                        "message": "Processed 2 (2 so far): 2 proposed for approval, 0 without a proposal. Charged 2 credits.\n- `prs_ildJ5mhOZtanJSHbrKwU`: added to list `Heads of sales (found by Finder)` and proposed for sequence `Q3 heads of sales (DACH)` (score 60, tier b) as `apr_ZFnPzALrdqvyIl0Jp5w1`.\n- `prs_rnCByDKSyoytsxw895o3`: added to list `Heads of sales (found by Finder)` and proposed for sequence `Q3 heads of sales (DACH)` (score 60, tier b) as `apr_p5L2rgg2QtA5fTSXhFiQ`."
                    },
                    {
                        "at": "2026-11-24T10:43:43.711Z",
                        "message": "Finished: 2 processed. Charged 2 credits, released 0. 2 proposals wait in the approval queue (`list_approvals` with `run_id`) until 2026-11-27T10:43:43.711Z."
                    }
                ],
                "mode": "review",
                "processed": 2,
                "proposed": 2,
                "started_at": "2026-11-24T10:43:43.697Z",
                "started_by": "psn_S78PHjQ1Gxxrs0AaGiVl",
                "status": "awaiting_approval",
                "total": 2,
                "updated_at": "2026-11-24T10:43:43.711Z"
            }
        ],
        "next_offset": null,
        "offset": 0,
        "total": 1
    }
);

outreach_runtime::prelude::parity!(list_runs, read,
    ok: {"agent_id": "$runner", "limit": 5, "status": "queued"},
    fails: {"status": "done"} => INVALID_REQUEST
);

/// Cancel an agent run.
///
/// A `queued` run releases its whole reservation; a `running` one stops after its current batch,
/// charging what it processed. A run whose work is done is a 409 `invalid_state`: reject its
/// proposals with `reject_outreach` and `run_id` instead.
///
/// A batch in flight (ten prospects at most) finishes first; the rest of the reservation is
/// released at once, in this call, and the proposals so far stay in the approval queue for a
/// person to decide. Done means `awaiting_approval`, `succeeded`, `failed` or `canceled`.
#[action(scope = "write", idempotent, http = "POST /runs/{id}/cancel")]
pub async fn cancel_run(ctx: Ctx, input: RunId) -> Result<Run, ApiError> {
    IdKind::Run.check(&input.id)?;
    let workspace_id = ctx.workspace_id();
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let run = fetch(&mut tx, workspace_id, &input.id).await?;
    if !run.status.is_live() {
        let hint = if run.status == AgentRunStatus::AwaitingApproval {
            " Its work is done; reject its proposals with `reject_outreach` and `run_id` instead."
        } else {
            ""
        };
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "Run `{}` is `{}`; only a `queued` or `running` run can be canceled.{hint}",
                run.id, run.status
            ),
        )
        .with_extra("status", run.status.as_str()));
    }
    // The job first: a job that is not running (queued, or waiting out a retry) is dropped here
    // (a running one's row is not touched: the statement only matches a waiting job). Then the
    // run, then the workspace's balance, the order a batch in flight takes them (its fence at
    // commit comes last), so the two queue instead of deadlocking: the batch commits what it
    // charged before this reads it. A running job finds the run ended at its next step and
    // stops (and one whose process died does the same once it is rescued).
    outreach_runtime::prelude::jobs::cancel_unique(
        &mut tx,
        ctx.clock(),
        <execute::RunJob as JobArgs>::KIND,
        &format!("run:{}", run.id),
    )
    .await?;
    let canceled = sqlx::query(
        "update agent_runs set status = 'canceled', updated_at = $3 where workspace_id = $1 and id = $2 \
         and status in ('queued', 'running')",
    )
    .bind(workspace_id)
    .bind(&run.id)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    if canceled.rows_affected() != 1 {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "Run `{}` ended while it was being canceled; see `get_run`.",
                run.id
            ),
        ));
    }
    log(
        &mut tx,
        &run.id,
        now,
        &format!("Canceled by {}.", ctx.principal().email),
    )
    .await?;
    // What it processed is charged, the rest released, now: a canceled run never shows
    // `canceled` while it still holds credits.
    execute::end_canceled(&mut tx, ctx.clock(), workspace_id, &run.id, now).await?;
    fetch(&mut tx, workspace_id, &run.id).await
}

outreach_runtime::prelude::example!(cancel_run,
    request: {"id": "run_U90BZ23PwwHacViY7ygy"},
    response: {
        "agent_id": "agt_aP46iU3MM8div28g1Hbd",
        "agent_name": "Writer",
        "approvals_pending": 0,
        "created_at": "2026-11-24T10:43:43.803Z",
        "credits_charged": 0,
        "credits_reserved": 2,
        "error": null,
        "finished_at": null,
        "id": "run_U90BZ23PwwHacViY7ygy",
        "kind": "writer",
        "log": [
            {
                "at": "2026-11-24T10:43:43.803Z",
                "message": "Queued by owner@example.com (First key): up to 50 prospects, 2 of them possible now; 2 credits reserved (1 per prospect processed, the rest released at the end). Mode review: its proposals wait for a person."
            },
            {"at": "2026-11-24T10:43:43.808Z", "message": "Started."},
            {
                "at": "2026-11-24T10:43:43.808Z",
                "message": "Selected 0 of the 2 prospects of list `Heads of sales (found by Finder)` for sequence `Q3 heads of sales (DACH)` (0 eligible; left out: 2 already_enrolled)."
            },
            {"at": "2026-11-24T10:43:43.808Z", "message": "Canceled by owner@example.com."}
        ],
        "mode": "review",
        "processed": 0,
        "proposed": 0,
        "started_at": "2026-11-24T10:43:43.808Z",
        "started_by": "psn_S78PHjQ1Gxxrs0AaGiVl",
        "status": "canceled",
        "total": 0,
        "updated_at": "2026-11-24T10:43:43.808Z"
    }
);

outreach_runtime::prelude::parity!(cancel_run, write,
    ok: {"id": "$agent_run"},
    fails: {"id": "$missing:run"} => NOT_FOUND
);
