//! The job that executes an agent run, in phases with recovery points.
//!
//! One `agent_run` job per run. Each step of it is one fenced transaction that commits before the
//! next begins, so a crash loses at most the step in flight, which the rescued job does again:
//!
//! 1. **select** (free): read the agent's inputs again, pick what the run will work on, and write
//!    that list (`agent_run_items`) with the reasons for each, and the real `total`.
//! 2. **process**, a batch of [`BATCH`] items per transaction: do the kind's work on each item
//!    (propose, draft, classify), mark it done with its outcome, and add it to `processed` and its
//!    unit price to `credits_charged` in the same transaction. So the charge is always exactly the
//!    work committed, and a resumed run skips what is done.
//! 3. **finish**: settle the credit hold (keep `credits_charged`, release the rest) and end the run
//!    `awaiting_approval` when proposals wait for a person, `succeeded` otherwise.
//!
//! Every step re-reads the run first (locking its row): a run canceled meanwhile settles what it
//! processed and ends there. A fault the run cannot get past (an input deleted, a sequence
//! stopped) fails it with the API's code and sentence; a database fault is retried, and on the
//! job's last attempt fails the run too, so a run never stays `running` with credits held.

use outreach_runtime::prelude::{
    ApiError, Clock, CredentialKind, Db, ErrorCode, JobArgs, JobCtx, JobOutcome, JobResult,
    JobState, Scope, credits, job, jobs, recovery, scope_now,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::{AnyConnection, Row};

use super::runs::{self, RunInput};
use super::{Agent, AgentKind, prospector, triage, writer};
use crate::approvals::decide::{self, DecideInput};
use crate::approvals::expiry;
use crate::drafting::{Drafter, DraftingModel};
use crate::events::{self, EventType};
use crate::followups::{self, RunsDecided};

/// Attempts before a run that keeps failing on a fault of ours is failed for good.
pub const MAX_ATTEMPTS: i32 = 10;
/// How long a run's credit hold lasts without a renewal (each batch renews it). Only a run whose
/// job vanished outlives it; recovery then returns what it held.
pub const HOLD_MS: i64 = 24 * 3_600_000;
/// Items processed per transaction.
pub const BATCH: usize = 10;
/// How long after a run ends `awaiting_approval` its follow-up looks again: past any decision
/// that was being made while the run ended (a transaction that could not see the run waiting yet).
const DECIDED_CHECK_AFTER_MS: i64 = 500;

job!(RunJob::KIND, run_agent_job);
job!(RunsDecided::KIND, check_proposals_decided);
recovery!("agent runs whose job is gone", recover_runs);

/// The job of an agent run: what it carries.
#[derive(Debug, Serialize, Deserialize)]
pub struct RunJob {
    pub run_id: String,
}

impl JobArgs for RunJob {
    const KIND: &'static str = "agent_run";
}

/// A run as its job reads it.
pub(crate) struct RunRow {
    pub id: String,
    pub workspace_id: String,
    pub status: String,
    pub phase: String,
    pub agent: Agent,
    pub input: RunInput,
    pub autonomous: bool,
    pub person_id: String,
    credential_kind: CredentialKind,
    credential_id: String,
    pub processed: i64,
    pub unit_price: i64,
    credits_reserved: i64,
    credits_charged: i64,
    reservation_id: Option<String>,
}

/// What the job knows while it works on a batch.
pub(crate) struct Work<'a> {
    pub run: &'a RunRow,
    pub db: &'a Db,
    pub now: i64,
    pub clock: &'a Clock,
    pub drafter: &'a Drafter,
    /// A `writer`'s texts for this batch, drafted by the model before its transaction began.
    pub drafted: &'a writer::Drafted,
    /// When the proposals made now expire.
    pub expires_at: i64,
}

/// One entry of a run's work list, written by its select phase.
pub(crate) struct NewItem {
    pub prospect_id: String,
    pub conversation_id: Option<String>,
    /// Why it was selected ([`crate::approvals::ProposalReasons`] as JSON).
    pub reasons: Option<String>,
}

/// What a select phase chose, with the lines it adds to the log.
pub(crate) struct Selection {
    pub items: Vec<NewItem>,
    pub log: Vec<String>,
}

/// One entry of the work list, to process.
pub(crate) struct WorkItem {
    pub position: i64,
    pub prospect_id: String,
    pub conversation_id: Option<String>,
    pub reasons: Option<String>,
}

/// What processing one item came to.
pub(crate) enum Outcome {
    /// Proposed for approval: these approval items.
    Proposed(Vec<String>, String),
    /// Worked on, nothing proposed (a classification that needs no reply, a prospect that no
    /// longer qualifies); the sentence says why.
    Done(String),
}

async fn run_agent_job(job: JobCtx) -> JobResult {
    let payload: RunJob = job.args()?;
    let drafter = Drafter::new(job.config().extensions.get::<DraftingModel>());
    match advance(&job, &payload.run_id, &drafter).await {
        Err(error) if !error.is_lease_lost() && job.attempt() >= job.job().max_attempts => {
            job.rollback().await;
            let mut tx = job.tx().await?;
            let failure = ApiError::new(
                ErrorCode::INTERNAL_ERROR,
                "The run kept failing on a fault of ours and was stopped; what it processed is charged, \
                 the rest released. Run the agent again.",
            );
            tracing::warn!(run = %payload.run_id, error = %error, "an agent run failed for good");
            fail(
                &mut tx,
                job.clock(),
                &payload.run_id,
                &failure,
                job.now_ms(),
            )
            .await?;
            Ok(JobOutcome::Done)
        }
        result => result,
    }
}

/// Runs steps until the run ends: each commits before the next (a recovery point).
async fn advance(job: &JobCtx, run_id: &str, drafter: &Drafter) -> JobResult {
    loop {
        let now = job.now_ms();
        let Ahead { drafted, selection } = prepare(job, run_id, drafter, now).await;
        let mut tx = job.tx().await?;
        let Some(run) = lock(&mut tx, run_id).await? else {
            return Ok(JobOutcome::Done);
        };
        match run.status.as_str() {
            "canceled" if run.phase != "done" => {
                end_canceled(&mut tx, job.clock(), &run.workspace_id, run_id, now).await?;
                return Ok(JobOutcome::Done);
            }
            "queued" => {
                sqlx::query(
                    "update agent_runs set status = 'running', started_at = $2, updated_at = $2 where id = $1",
                )
                .bind(run_id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                runs::log(&mut tx, run_id, now, "Started.").await?;
            }
            "running" => {}
            _ => return Ok(JobOutcome::Done),
        }
        let work = Work {
            run: &run,
            db: job.db(),
            now,
            clock: job.clock(),
            drafter,
            drafted: &drafted,
            expires_at: now + expiry::EXPIRES_AFTER_MS,
        };
        let step = match run.phase.as_str() {
            "select" => select(&mut tx, &work, selection).await,
            "process" => process(&mut tx, &work).await,
            _ => {
                finish(&mut tx, job.clock(), &run, now).await?;
                return Ok(JobOutcome::Done);
            }
        };
        match step {
            Ok(()) => {}
            Err(error) if error.is_transient() => return Err(error.into()),
            Err(failure) => {
                // The step's writes go; the failure is recorded in a fresh transaction.
                drop(tx);
                job.rollback().await;
                let mut tx = job.tx().await?;
                fail(&mut tx, job.clock(), run_id, &failure, now).await?;
                return Ok(JobOutcome::Done);
            }
        }
        drop(tx);
        job.commit().await?;
    }
}

/// What a step works out before its transaction begins, so that no write (on SQLite, no
/// writer at all) waits on it: a `writer`'s drafts from the model (seconds per text), a
/// `prospector`'s selection (every candidate of the workspace read and scored).
#[derive(Default)]
struct Ahead {
    drafted: writer::Drafted,
    selection: Option<Selection>,
}

/// Prepares the next step from a snapshot outside its transaction. Anything that fails here is
/// left to the step itself, which does the work in its transaction instead and fails or retries
/// there with the right code.
async fn prepare(job: &JobCtx, run_id: &str, drafter: &Drafter, now: i64) -> Ahead {
    let prepared = async {
        let mut conn = job.db().pool().acquire().await?;
        let Some(run) = read(&mut conn, run_id).await? else {
            return Ok(Ahead::default());
        };
        let nothing = writer::Drafted::new();
        let work = Work {
            run: &run,
            db: job.db(),
            now,
            clock: job.clock(),
            drafter,
            drafted: &nothing,
            expires_at: now,
        };
        let live = matches!(run.status.as_str(), "queued" | "running");
        Ok::<_, ApiError>(match (run.agent.kind, run.phase.as_str()) {
            (AgentKind::Writer, "process") if live && drafter.is_configured() => Ahead {
                drafted: writer::draft_ahead(&mut conn, &work).await?,
                selection: None,
            },
            (AgentKind::Prospector, "select") if live => Ahead {
                drafted: writer::Drafted::new(),
                selection: Some(prospector::select(&mut conn, &work).await?),
            },
            _ => Ahead::default(),
        })
    };
    prepared.await.unwrap_or_default()
}

/// The follow-up of a decision, an expiry, a stop or a run that ended `awaiting_approval`
/// ([`followups::runs_decided`]): ends the workspace's waiting runs with nothing pending.
async fn check_proposals_decided(job: JobCtx) -> JobResult {
    let payload: RunsDecided = job.args()?;
    let mut tx = job.tx().await?;
    let workspace_id = match (payload.workspace_id, payload.run_id) {
        (Some(workspace_id), _) => Some(workspace_id),
        (None, Some(run_id)) => sqlx::query("select workspace_id from agent_runs where id = $1")
            .bind(&run_id)
            .fetch_optional(&mut *tx)
            .await?
            .map(|row| row.try_get::<String, _>("workspace_id"))
            .transpose()?,
        (None, None) => None,
    };
    if let Some(workspace_id) = workspace_id {
        runs::proposals_decided(&mut tx, &workspace_id, job.now_ms()).await?;
    }
    Ok(JobOutcome::Done)
}

/// Ends the runs whose job is gone, and the waiting runs with nothing left to wait for. A job is
/// gone when its rescue discarded it after its last attempt (the process died on every one), so
/// its handler never got to fail the run; without this the run would stay `running`, block its
/// agent, and its hold would lapse, returning what it had charged. A `canceled` run whose job was
/// gone ends as canceled. Also, every 30 seconds, a safety net for `awaiting_approval` runs whose
/// last pending item went some way no hook saw (a prospect deleted with its items).
async fn recover_runs(db: &Db, clock: &Clock) -> Result<u64, ApiError> {
    let now = clock.now_ms();
    let live = sqlx::query(
        "select id, workspace_id, status, job_id from agent_runs \
         where phase <> 'done' and status in ('queued', 'running', 'canceled')",
    )
    .fetch_all(db.pool())
    .await?;
    let mut ended = 0;
    for row in live {
        let id: String = row.try_get("id")?;
        let job_id: Option<String> = row.try_get("job_id")?;
        let job = match &job_id {
            Some(job_id) => jobs::get(db.pool(), job_id).await?,
            None => None,
        };
        if job.is_some_and(|job| matches!(job.state, JobState::Available | JobState::Running)) {
            continue;
        }
        let mut tx = db.begin_write().await?;
        if row.try_get::<String, _>("status")? == "canceled" {
            let workspace_id: String = row.try_get("workspace_id")?;
            end_canceled(&mut tx, clock, &workspace_id, &id, now).await?;
        } else {
            let failure = ApiError::new(
                ErrorCode::INTERNAL_ERROR,
                "The run's job was lost after failing on every attempt, and the run was stopped; what it \
                 processed is charged, the rest released. Run the agent again.",
            );
            fail(&mut tx, clock, &id, &failure, now).await?;
        }
        tx.commit().await?;
        ended += 1;
    }
    let waiting = sqlx::query(
        "select distinct workspace_id from agent_runs r where r.status = 'awaiting_approval' \
         and not exists (select 1 from approvals a where a.run_id = r.id and a.status = 'pending')",
    )
    .fetch_all(db.pool())
    .await?;
    for row in waiting {
        let workspace_id: String = row.try_get("workspace_id")?;
        let mut tx = db.begin_write().await?;
        runs::proposals_decided(&mut tx, &workspace_id, now).await?;
        tx.commit().await?;
        ended += 1;
    }
    Ok(ended)
}

/// Reads the run and locks its row for this transaction (a cancel waits for the step in flight).
async fn lock(conn: &mut AnyConnection, run_id: &str) -> Result<Option<RunRow>, ApiError> {
    sqlx::query("update agent_runs set updated_at = updated_at where id = $1")
        .bind(run_id)
        .execute(&mut *conn)
        .await?;
    read(conn, run_id).await
}

async fn read(conn: &mut AnyConnection, run_id: &str) -> Result<Option<RunRow>, ApiError> {
    let Some(row) = sqlx::query(
        "select id, workspace_id, status, phase, settings, input, autonomous, person_id, credential_kind, \
         credential_id, processed, unit_price, credits_reserved, credits_charged, reservation_id \
         from agent_runs where id = $1",
    )
    .bind(run_id)
    .fetch_optional(&mut *conn)
    .await?
    else {
        return Ok(None);
    };
    let agent: Agent =
        serde_json::from_str(&row.try_get::<String, _>("settings")?).map_err(ApiError::internal)?;
    let input: RunInput =
        serde_json::from_str(&row.try_get::<String, _>("input")?).map_err(ApiError::internal)?;
    Ok(Some(RunRow {
        id: row.try_get("id")?,
        workspace_id: row.try_get("workspace_id")?,
        status: row.try_get("status")?,
        phase: row.try_get("phase")?,
        agent,
        input,
        autonomous: row.try_get::<i64, _>("autonomous")? != 0,
        person_id: row.try_get("person_id")?,
        credential_kind: {
            let kind: String = row.try_get("credential_kind")?;
            CredentialKind::parse(&kind).ok_or_else(|| {
                ApiError::internal(format!("unknown credential kind `{kind}` on a run"))
            })?
        },
        credential_id: row.try_get("credential_id")?,
        processed: row.try_get("processed")?,
        unit_price: row.try_get("unit_price")?,
        credits_reserved: row.try_get("credits_reserved")?,
        credits_charged: row.try_get("credits_charged")?,
        reservation_id: row.try_get("reservation_id")?,
    }))
}

/// How many items a run of `agent` would work on now (its price function's count): an upper
/// bound, since its select phase checks more than this count does.
pub(crate) async fn count_candidates(
    conn: &mut AnyConnection,
    workspace_id: &str,
    agent: &Agent,
    input: &RunInput,
    now: i64,
) -> Result<i64, ApiError> {
    match agent.kind {
        AgentKind::Prospector => prospector::count(conn, workspace_id, agent, now).await,
        AgentKind::Writer => writer::count(conn, workspace_id, agent, input).await,
        AgentKind::InboxTriage => triage::count(conn, workspace_id).await,
    }
}

async fn select(
    conn: &mut AnyConnection,
    work: &Work<'_>,
    prepared: Option<Selection>,
) -> Result<(), ApiError> {
    let run = work.run;
    let selection = match run.agent.kind {
        AgentKind::Prospector => match prepared {
            Some(selection) => selection,
            None => prospector::select(conn, work).await?,
        },
        AgentKind::Writer => writer::select(conn, work).await?,
        AgentKind::InboxTriage => triage::select(conn, work).await?,
    };
    for (position, item) in selection.items.iter().enumerate() {
        sqlx::query(
            "insert into agent_run_items (run_id, position, prospect_id, conversation_id, state, reasons) \
             values ($1, $2, $3, $4, 'pending', $5)",
        )
        .bind(&run.id)
        .bind(i64::try_from(position).unwrap_or(i64::MAX))
        .bind(&item.prospect_id)
        .bind(&item.conversation_id)
        .bind(&item.reasons)
        .execute(&mut *conn)
        .await?;
    }
    sqlx::query(
        "update agent_runs set phase = 'process', total = $2, updated_at = $3 where id = $1",
    )
    .bind(&run.id)
    .bind(i64::try_from(selection.items.len()).unwrap_or(i64::MAX))
    .bind(work.now)
    .execute(&mut *conn)
    .await?;
    for line in &selection.log {
        runs::log(conn, &run.id, work.now, line).await?;
    }
    Ok(())
}

async fn process(conn: &mut AnyConnection, work: &Work<'_>) -> Result<(), ApiError> {
    let run = work.run;
    if let Some(reservation_id) = &run.reservation_id
        && !credits::renew_hold(conn, reservation_id, work.now + HOLD_MS).await?
    {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            "The run's credit reservation lapsed while it waited (its job could not run for a day), and was \
             returned; it stopped here. Run the agent again.",
        ));
    }
    let rows = sqlx::query(
        "select position, prospect_id, conversation_id, reasons from agent_run_items \
         where run_id = $1 and state = 'pending' order by position limit $2",
    )
    .bind(&run.id)
    .bind(i64::try_from(BATCH).unwrap_or(10))
    .fetch_all(&mut *conn)
    .await?;
    if rows.is_empty() {
        sqlx::query("update agent_runs set phase = 'finish', updated_at = $2 where id = $1")
            .bind(&run.id)
            .bind(work.now)
            .execute(&mut *conn)
            .await?;
        return Ok(());
    }
    let items: Vec<WorkItem> = rows
        .iter()
        .map(|row| {
            Ok(WorkItem {
                position: row.try_get("position")?,
                prospect_id: row.try_get("prospect_id")?,
                conversation_id: row.try_get("conversation_id")?,
                reasons: row.try_get("reasons")?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()?;
    let outcomes = match run.agent.kind {
        AgentKind::Prospector => prospector::process(conn, work, &items).await?,
        AgentKind::Writer => writer::process(conn, work, &items).await?,
        AgentKind::InboxTriage => triage::process(conn, work, &items).await?,
    };
    let mut proposed_ids = Vec::new();
    let mut done = 0;
    for (item, outcome) in items.iter().zip(&outcomes) {
        let (state, sentence) = match outcome {
            Outcome::Proposed(ids, sentence) => {
                proposed_ids.extend(ids.iter().cloned());
                ("proposed", sentence)
            }
            Outcome::Done(sentence) => {
                done += 1;
                ("done", sentence)
            }
        };
        sqlx::query(
            "update agent_run_items set state = $3, outcome = $4 where run_id = $1 and position = $2",
        )
        .bind(&run.id)
        .bind(item.position)
        .bind(state)
        .bind(sentence)
        .execute(&mut *conn)
        .await?;
    }
    let count = i64::try_from(items.len()).unwrap_or(i64::MAX);
    let proposed = i64::try_from(proposed_ids.len()).unwrap_or(i64::MAX);
    let charge = count.saturating_mul(run.unit_price);
    sqlx::query(
        "update agent_runs set processed = processed + $2, proposed = proposed + $3, \
         credits_charged = credits_charged + $4, updated_at = $5 where id = $1",
    )
    .bind(&run.id)
    .bind(count)
    .bind(proposed)
    .bind(charge)
    .bind(work.now)
    .execute(&mut *conn)
    .await?;
    let mut line = format!(
        "Processed {count} ({} so far): {proposed} proposed for approval, {done} without a proposal. Charged {charge} credits.",
        run.processed + count
    );
    for (item, outcome) in items.iter().zip(&outcomes) {
        let sentence = match outcome {
            Outcome::Proposed(_, sentence) | Outcome::Done(sentence) => sentence,
        };
        line.push_str(&format!("\n- `{}`: {sentence}", item.prospect_id));
    }
    runs::log(conn, &run.id, work.now, &line).await?;
    if !proposed_ids.is_empty() {
        propose_or_approve(conn, work, proposed_ids).await?;
    }
    Ok(())
}

/// Proposals of an autonomous run started by someone holding `send` are approved at once, on that
/// person's behalf, if their credential still allows it now; all others wait for a person, and
/// expire after 72 hours. An `inbox_triage` run's reply drafts always wait: it never sends.
async fn propose_or_approve(
    conn: &mut AnyConnection,
    work: &Work<'_>,
    ids: Vec<String>,
) -> Result<(), ApiError> {
    let run = work.run;
    if run.autonomous && run.agent.kind != AgentKind::InboxTriage {
        // The same database read every request makes of its credential, by its id: a key revoked
        // or a person demoted since the run started stops it from sending on their behalf.
        let scope = scope_now(
            work.db,
            work.now,
            run.credential_kind,
            &run.credential_id,
            &run.workspace_id,
        )
        .await?;
        if scope.is_some_and(|scope| scope >= Scope::Send) {
            let count = ids.len();
            let mut input = DecideInput {
                ids: Some(ids),
                dry_run: true,
                ..DecideInput::default()
            };
            // The dry run first: what a person's approval would refuse (a sender that cannot send,
            // a sequence without senders) leaves the proposals for a person instead of failing
            // the run.
            let preview = decide::approve(
                conn,
                work.clock,
                &run.workspace_id,
                &run.person_id,
                &input,
                work.now,
            )
            .await;
            if let Err(refusal) = preview {
                if refusal.is_transient() {
                    return Err(refusal);
                }
                runs::log(
                    conn,
                    &run.id,
                    work.now,
                    &format!(
                        "Could not approve its proposals itself ({}); they wait for a person.",
                        refusal.message
                    ),
                )
                .await?;
                return expiry::schedule(
                    conn,
                    work.clock,
                    &run.workspace_id,
                    &run.id,
                    work.expires_at,
                )
                .await;
            }
            input.dry_run = false;
            let outcome = decide::approve(
                conn,
                work.clock,
                &run.workspace_id,
                &run.person_id,
                &input,
                work.now,
            )
            .await?;
            runs::log(
                conn,
                &run.id,
                work.now,
                &format!(
                    "Approved {} of its {count} proposals itself (autonomous, on behalf of `{}`); they go out within \
                     the senders' working hours and limits.{}",
                    outcome.approved,
                    run.person_id,
                    if outcome.not_approved.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " {} were not approved (do-not-contact).",
                            outcome.not_approved.len()
                        )
                    }
                ),
            )
            .await?;
            return Ok(());
        }
        runs::log(
            conn,
            &run.id,
            work.now,
            "The credential that started this autonomous run no longer holds `send`; its proposals wait for a person.",
        )
        .await?;
    }
    expiry::schedule(
        conn,
        work.clock,
        &run.workspace_id,
        &run.id,
        work.expires_at,
    )
    .await
}

/// Ends a run whose work is done: the hold keeps what was charged and releases the rest.
async fn finish(
    conn: &mut AnyConnection,
    clock: &Clock,
    run: &RunRow,
    now: i64,
) -> Result<(), ApiError> {
    let released = settle(conn, clock, run).await?;
    let pending: i64 =
        sqlx::query("select count(*) as n from approvals where run_id = $1 and status = 'pending'")
            .bind(&run.id)
            .fetch_one(&mut *conn)
            .await?
            .try_get("n")?;
    let status = if pending > 0 {
        "awaiting_approval"
    } else {
        "succeeded"
    };
    if pending > 0 {
        // A person may be deciding the last proposal right now, in a transaction that cannot see
        // this run waiting yet: once both have committed, the follow-up ends the run if nothing
        // is left pending (instead of the 30 s safety net of `recover_runs`).
        followups::runs_decided(conn, clock, &run.workspace_id, now + DECIDED_CHECK_AFTER_MS)
            .await?;
    }
    sqlx::query(
        "update agent_runs set status = $2, phase = 'done', finished_at = $3, updated_at = $3 where id = $1",
    )
    .bind(&run.id)
    .bind(status)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    let (kind, data) = if pending > 0 {
        let data = json!({"run_id": run.id, "agent_id": run.agent.id, "kind": run.agent.kind,
                          "approvals_pending": pending});
        (EventType::RunAwaitingApproval, data)
    } else {
        let data = json!({"run_id": run.id, "agent_id": run.agent.id, "kind": run.agent.kind});
        (EventType::RunCompleted, data)
    };
    events::record(conn, &run.workspace_id, now, kind, data).await?;
    let waiting = if pending > 0 {
        format!(
            " {pending} proposals wait in the approval queue (`list_approvals` with `run_id`) until {}.",
            outreach_runtime::prelude::rfc3339(now + expiry::EXPIRES_AFTER_MS)
        )
    } else {
        String::new()
    };
    runs::log(
        conn,
        &run.id,
        now,
        &format!(
            "Finished: {} processed. Charged {} credits, released {released}.{waiting}",
            run.processed, run.credits_charged
        ),
    )
    .await
}

/// Settles the run's hold at what it charged; returns what was released.
async fn settle(conn: &mut AnyConnection, clock: &Clock, run: &RunRow) -> Result<i64, ApiError> {
    let Some(reservation_id) = &run.reservation_id else {
        return Ok(0);
    };
    let reservation = credits::Reservation {
        id: reservation_id.clone(),
        workspace_id: run.workspace_id.clone(),
        amount: run.credits_reserved,
    };
    credits::settle(
        conn,
        clock,
        &reservation,
        run.credits_charged.min(run.credits_reserved),
        Some(&run.id),
    )
    .await?;
    Ok(run.credits_reserved - run.credits_charged.min(run.credits_reserved))
}

/// Ends a canceled run, in `cancel_run`'s transaction (or, for a run canceled before this was so,
/// in its job's or recovery's): what it processed is charged, the rest released.
pub(crate) async fn end_canceled(
    conn: &mut AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    run_id: &str,
    now: i64,
) -> Result<(), ApiError> {
    let Some(run) = lock(conn, run_id).await? else {
        return Ok(());
    };
    if run.workspace_id != workspace_id || run.phase == "done" {
        return Ok(());
    }
    let released = settle(conn, clock, &run).await?;
    sqlx::query(
        "update agent_runs set phase = 'done', finished_at = $2, updated_at = $2 where id = $1",
    )
    .bind(run_id)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    runs::log(
        conn,
        run_id,
        now,
        &format!(
            "Stopped after {} processed. Charged {} credits, released {released}.",
            run.processed, run.credits_charged
        ),
    )
    .await
}

/// Fails a run with `failure`'s code and sentence: what it processed is charged, the rest released.
async fn fail(
    conn: &mut AnyConnection,
    clock: &Clock,
    run_id: &str,
    failure: &ApiError,
    now: i64,
) -> Result<(), ApiError> {
    let Some(run) = lock(conn, run_id).await? else {
        return Ok(());
    };
    if run.phase == "done" {
        return Ok(());
    }
    let released = settle(conn, clock, &run).await?;
    sqlx::query(
        "update agent_runs set status = 'failed', phase = 'done', error_code = $2, error_message = $3, \
         finished_at = $4, updated_at = $4 where id = $1",
    )
    .bind(run_id)
    .bind(failure.code.as_str())
    .bind(&failure.message)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    let data = json!({"run_id": run.id, "agent_id": run.agent.id, "kind": run.agent.kind,
                      "error": failure.message});
    events::record(conn, &run.workspace_id, now, EventType::RunFailed, data).await?;
    runs::log(
        conn,
        run_id,
        now,
        &format!(
            "Failed: {} Charged {} credits for {} processed, released {released}.",
            failure.message, run.credits_charged, run.processed
        ),
    )
    .await?;
    Ok(())
}
