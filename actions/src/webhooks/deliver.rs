//! The job that attempts an endpoint's due deliveries, one at a time, oldest first.
//!
//! A run claims up to [`BATCH`] due deliveries (`deliveries::claim`) and commits the claim, makes
//! the attempts one after another with no transaction open (after a failure the rest go back to
//! the queue), then records them (`deliveries::finish`, which schedules each retry) together with
//! what they mean for the endpoint (a `410` disables it; a success ends a run of failures, and
//! failures that have lasted [`FAILING_DAYS`] days disable it), in one transaction. It goes on
//! until nothing is due, for at most [`RUN_FOR`] of real time; then it hands the rest to a new
//! run, so one busy endpoint does not hold a worker for ever. Runs holding a delivery take at
//! most half the engine's workers ([`slots`]); a run past that waits a second for its turn. A
//! process killed mid-batch sends the batch again when the job is rescued: at least once.
//!
//! The message is built from the stored event each time, so every attempt of a delivery carries
//! the same `webhook-id` and body; `webhook-timestamp` is the attempt's own time, as the
//! specification says.

use std::time::{Duration, Instant};

use outreach_runtime::prelude::{
    ApiError, Backend, JobArgs, JobCtx, JobOutcome, JobResult, job, rfc3339,
};
use serde_json::{Map, Value, json};
use sqlx::{AnyConnection, Row};

use super::address::Reach;
use super::seal::{self, WebhookSettings};
use super::send::{self, Message};
use super::signing;
use crate::deliveries::{self, Attempt, DeliveryJob, Finished};

/// How long an endpoint's deliveries may fail, every one, before it is disabled.
pub const FAILING_DAYS: i64 = 5;
pub const FAILING_MS: i64 = FAILING_DAYS * 24 * 3_600_000;

/// The deliveries a run claims at once: one claim and one record for up to this many attempts.
const BATCH: i64 = 25;

/// The longest a run attempts deliveries before it hands the rest to a new run.
const RUN_FOR: Duration = Duration::from_secs(10);

/// How long a run waits for a slot when deliveries already hold as many of the engine's workers
/// as they may ([`slots`]).
const SLOT_WAIT_MS: i64 = 1_000;

job!(DeliveryJob::KIND, run);

/// The workers deliveries may hold at once, across the instances: half of one instance's (at
/// least one), so endpoints that answer slowly or not at all cannot take every slot outreach
/// runs in.
fn slots(job: &JobCtx) -> i64 {
    i64::try_from(job.config().jobs.workers / 2)
        .unwrap_or(1)
        .max(1)
}

async fn run(job: JobCtx) -> JobResult {
    let args: DeliveryJob = job.args()?;
    let started = Instant::now();
    let settings = WebhookSettings::of(job.config());
    let reach = Reach::of(&job.config().environment);
    if other_runs(&job).await? >= slots(&job) {
        return Ok(JobOutcome::Snooze {
            until_ms: job.now_ms() + SLOT_WAIT_MS,
        });
    }
    loop {
        let now = job.now_ms();
        let claimed = {
            let mut tx = job.tx().await?;
            deliveries::claim(&mut tx, &args.endpoint_id, job.id(), now, BATCH).await?
        };
        if claimed.is_empty() {
            let mut tx = job.tx().await?;
            if !fail_if_disabled(&mut tx, &args.endpoint_id, now).await?
                && let Some(at) = deliveries::earliest_pending(&mut tx, &args.endpoint_id).await?
                && let Some(workspace_id) = job.workspace_id()
            {
                // Deliveries wait, due later or held by a run that may end before they are due
                // on its clock: make sure a run comes for them (a no-op while one waits).
                deliveries::wake_once(
                    &mut tx,
                    workspace_id,
                    &args.endpoint_id,
                    at.max(now + SLOT_WAIT_MS),
                )
                .await?;
            }
            return Ok(JobOutcome::Done);
        }
        let targets = {
            let mut tx = job.tx().await?;
            targets(&mut tx, &args.endpoint_id, &claimed, &settings, now).await?
        };
        job.commit().await?;
        // One at a time, oldest first; after a failure the rest go back to the queue, so a
        // receiver that is down costs one attempt per run, not a batch of timeouts.
        let mut attempts = Vec::with_capacity(claimed.len());
        for target in &targets {
            let attempt = match target {
                Ok(target) => {
                    let message = Message {
                        id: &target.event_id,
                        timestamp: send::wall_clock_seconds(),
                        body: &target.body,
                    };
                    send::attempt(reach, &target.url, &target.keys, &message, job.now_ms()).await
                }
                Err(why) => Attempt {
                    error: Some(why.clone()),
                    ..Attempt::default()
                },
            };
            let failed = !attempt.succeeded;
            attempts.push(attempt);
            if failed {
                break;
            }
        }
        let now = job.now_ms();
        {
            let mut tx = job.tx().await?;
            // The endpoint's row first, as every writer of an endpoint and its deliveries takes
            // them (a disabling, a deletion, a claim).
            let workspace_id = lock_endpoint(&mut tx, &args.endpoint_id).await?;
            let Some(workspace_id) = workspace_id else {
                // Deleted meanwhile: its deliveries went with it.
                return Ok(JobOutcome::Done);
            };
            deliveries::release(&mut tx, job.id(), &claimed[attempts.len()..]).await?;
            for (delivery, attempt) in claimed.iter().zip(&attempts) {
                let finished = deliveries::finish(
                    &mut tx,
                    &workspace_id,
                    &args.endpoint_id,
                    job.id(),
                    delivery,
                    attempt,
                    now,
                )
                .await?;
                if finished == Finished::Superseded {
                    // Disabled during the attempt: its deliveries were failed, and stay so.
                } else if attempt.response_status == Some(410) {
                    super::disable(
                        &mut tx,
                        &workspace_id,
                        &args.endpoint_id,
                        "the endpoint answered 410 Gone",
                        now,
                    )
                    .await?;
                } else {
                    super::note_outcome(
                        &mut tx,
                        &workspace_id,
                        &args.endpoint_id,
                        finished == Finished::Succeeded,
                        now,
                    )
                    .await?;
                }
            }
            if started.elapsed() >= RUN_FOR {
                deliveries::wake(&mut tx, &workspace_id, &args.endpoint_id, now).await?;
                return Ok(JobOutcome::Done);
            }
        }
        job.commit().await?;
    }
}

/// The other live runs that hold a delivery now (attempting it), on any instance. Runs that
/// have not claimed one yet do not count, so runs starting together do not all step back; the
/// cap is a soft one.
async fn other_runs(job: &JobCtx) -> Result<i64, ApiError> {
    Ok(sqlx::query_scalar(
        "select count(distinct d.claimed_by) from webhook_deliveries d \
         join jobs j on j.id = d.claimed_by and j.state = 'running' \
         where d.status = 'pending' and d.claimed_by is not null and d.claimed_by <> $1",
    )
    .bind(job.id())
    .fetch_one(job.db().pool())
    .await?)
}

/// Locks the endpoint's row until the transaction ends (PostgreSQL; SQLite's write transaction
/// holds the whole database) and answers its workspace; `None` when it was deleted.
async fn lock_endpoint(
    conn: &mut AnyConnection,
    endpoint_id: &str,
) -> Result<Option<String>, ApiError> {
    let statement = match Backend::of(conn) {
        Backend::Postgres => {
            "select workspace_id from webhook_endpoints where id = $1 for no key update"
        }
        Backend::Sqlite => "select workspace_id from webhook_endpoints where id = $1",
    };
    Ok(sqlx::query_scalar(statement)
        .bind(endpoint_id)
        .fetch_optional(conn)
        .await?)
}

/// Fails the pending deliveries of a disabled endpoint (answers whether it is disabled or gone): those queued by a transaction that read
/// the endpoint enabled just before it was disabled, and committed after the disabling failed
/// the others. Their own run finds them here.
async fn fail_if_disabled(
    conn: &mut AnyConnection,
    endpoint_id: &str,
    now_ms: i64,
) -> Result<bool, ApiError> {
    let row = sqlx::query("select enabled, disabled_reason from webhook_endpoints where id = $1")
        .bind(endpoint_id)
        .fetch_optional(&mut *conn)
        .await?;
    let Some(row) = row else {
        return Ok(true);
    };
    if row.try_get::<i64, _>("enabled")? != 0 {
        return Ok(false);
    }
    let reason = match row.try_get::<Option<String>, _>("disabled_reason")? {
        Some(reason) => format!("the endpoint was disabled: {reason}"),
        None => "the endpoint was disabled by a member".to_owned(),
    };
    deliveries::fail_pending(conn, endpoint_id, &reason, now_ms).await?;
    Ok(true)
}

/// Where and how a delivery goes: the URL, the signing keys, the event and its body.
struct Target {
    url: String,
    keys: Vec<Vec<u8>>,
    event_id: String,
    body: String,
}

/// An endpoint's URL and the keys that sign for it now (the secret, and the one rotated out
/// while it still signs); the keys are a sentence when a secret does not open.
struct Signer {
    url: String,
    keys: Result<Vec<Vec<u8>>, String>,
}

async fn signer(
    conn: &mut AnyConnection,
    endpoint_id: &str,
    settings: &WebhookSettings,
    now_ms: i64,
) -> Result<Option<Signer>, ApiError> {
    let row = sqlx::query(
        "select url, secret, previous_secret, previous_secret_until from webhook_endpoints \
         where id = $1",
    )
    .bind(endpoint_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let mut secrets = vec![row.try_get::<String, _>("secret")?];
    if let (Some(previous), Some(until)) = (
        row.try_get::<Option<String>, _>("previous_secret")?,
        row.try_get::<Option<i64>, _>("previous_secret_until")?,
    ) && until > now_ms
    {
        secrets.push(previous);
    }
    let keys = secrets
        .iter()
        .map(|stored| {
            seal::open(settings, stored).and_then(|secret| {
                signing::secret_key(&secret)
                    .ok_or_else(|| "the signing secret is not base64".to_owned())
            })
        })
        .collect();
    Ok(Some(Signer {
        url: row.try_get("url")?,
        keys,
    }))
}

/// For each claimed delivery, the endpoint's URL and keys and the event's body; a sentence
/// instead when it cannot be made (a secret that does not open, an event gone), which fails
/// that attempt.
async fn targets(
    conn: &mut AnyConnection,
    endpoint_id: &str,
    claimed: &[deliveries::Claimed],
    settings: &WebhookSettings,
    now_ms: i64,
) -> Result<Vec<Result<Target, String>>, ApiError> {
    let Some(signer) = signer(conn, endpoint_id, settings, now_ms).await? else {
        return Ok(claimed
            .iter()
            .map(|_| Err("the endpoint was deleted".to_owned()))
            .collect());
    };
    let mut targets = Vec::with_capacity(claimed.len());
    for delivery in claimed {
        let keys = match &signer.keys {
            Ok(keys) => keys.clone(),
            Err(why) => {
                targets.push(Err(why.clone()));
                continue;
            }
        };
        let event = sqlx::query("select type, created_at, data from events where id = $1")
            .bind(&delivery.event_id)
            .fetch_optional(&mut *conn)
            .await?;
        let Some(event) = event else {
            targets.push(Err("the event is gone (events are kept 30 days)".to_owned()));
            continue;
        };
        let data: Map<String, Value> = serde_json::from_str(&event.try_get::<String, _>("data")?)
            .map_err(ApiError::internal)?;
        let body = json!({
            "id": delivery.event_id,
            "type": event.try_get::<String, _>("type")?,
            "timestamp": rfc3339(event.try_get("created_at")?),
            "data": data,
        })
        .to_string();
        targets.push(Ok(Target {
            url: signer.url.clone(),
            keys,
            event_id: delivery.event_id.clone(),
            body,
        }));
    }
    Ok(targets)
}

/// Signs and sends a `webhook.test` message now (`test_webhook_endpoint`): its own id, not an
/// event of the workspace, and no delivery row.
pub(crate) async fn send_test(
    pool: &sqlx::AnyPool,
    reach: Reach,
    settings: &WebhookSettings,
    endpoint_id: &str,
    test_id: &str,
    now_ms: i64,
) -> Result<Attempt, ApiError> {
    // The connection goes back to the pool before the attempt, which may take 15 seconds.
    let signer = {
        let mut conn = pool.acquire().await?;
        signer(&mut conn, endpoint_id, settings, now_ms).await?
    };
    let signer =
        signer.ok_or_else(|| crate::common::IdKind::WebhookEndpoint.not_found(endpoint_id))?;
    let keys = match signer.keys {
        Ok(keys) => keys,
        Err(why) => {
            return Ok(Attempt {
                error: Some(why),
                ..Attempt::default()
            });
        }
    };
    let body = json!({
        "id": test_id,
        "type": "webhook.test",
        "timestamp": rfc3339(now_ms),
        "data": {"webhook_endpoint_id": endpoint_id},
    })
    .to_string();
    let message = Message {
        id: test_id,
        timestamp: send::wall_clock_seconds(),
        body: &body,
    };
    Ok(send::attempt(reach, &signer.url, &keys, &message, now_ms).await)
}
