//! The job that attempts an endpoint's due deliveries, one at a time, oldest first.
//!
//! A run claims a delivery (`deliveries::claim`) and commits the claim, makes the attempt with no
//! transaction open, then records it (`deliveries::finish`, which schedules the retry) together
//! with what it means for the endpoint (a `410` disables it; a success ends a run of failures,
//! and failures that have lasted [`FAILING_DAYS`] days disable it). It goes on with the next due
//! delivery until none is, for at most [`RUN_FOR`] of real time; then it hands the rest to a new
//! run, so one busy endpoint does not hold a worker for ever.
//!
//! The message is built from the stored event each time, so every attempt of a delivery carries
//! the same `webhook-id` and body; `webhook-timestamp` is the attempt's own time, as the
//! specification says.

use std::time::{Duration, Instant};

use outreach_runtime::prelude::{ApiError, JobArgs, JobCtx, JobOutcome, JobResult, job, rfc3339};
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

/// The longest a run attempts deliveries before it hands the rest to a new run.
const RUN_FOR: Duration = Duration::from_secs(30);

job!(DeliveryJob::KIND, run);

async fn run(job: JobCtx) -> JobResult {
    let args: DeliveryJob = job.args()?;
    let started = Instant::now();
    let settings = WebhookSettings::of(job.config());
    let reach = Reach::of(&job.config().environment);
    loop {
        let now = job.now_ms();
        let claimed = {
            let mut tx = job.tx().await?;
            deliveries::claim(&mut tx, &args.endpoint_id, job.id(), now).await?
        };
        let Some(delivery) = claimed else {
            let mut tx = job.tx().await?;
            fail_if_disabled(&mut tx, &args.endpoint_id, now).await?;
            return Ok(JobOutcome::Done);
        };
        let target = {
            let mut tx = job.tx().await?;
            target(
                &mut tx,
                &args.endpoint_id,
                &delivery.event_id,
                &settings,
                now,
            )
            .await?
        };
        job.commit().await?;
        let attempt = match &target {
            Ok(target) => {
                let message = Message {
                    id: &delivery.event_id,
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
        let now = job.now_ms();
        {
            let mut tx = job.tx().await?;
            let workspace_id = workspace_of(&mut tx, &args.endpoint_id).await?;
            let Some(workspace_id) = workspace_id else {
                // Deleted meanwhile: its deliveries went with it.
                return Ok(JobOutcome::Done);
            };
            let finished = deliveries::finish(
                &mut tx,
                &workspace_id,
                &args.endpoint_id,
                &delivery,
                &attempt,
                now,
            )
            .await?;
            if attempt.response_status == Some(410) {
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
            if started.elapsed() >= RUN_FOR {
                deliveries::wake(&mut tx, &workspace_id, &args.endpoint_id, now).await?;
                return Ok(JobOutcome::Done);
            }
        }
        job.commit().await?;
    }
}

/// Fails the pending deliveries of a disabled endpoint: those queued by a transaction that read
/// the endpoint enabled just before it was disabled, and committed after the disabling failed
/// the others. Their own run finds them here.
async fn fail_if_disabled(
    conn: &mut AnyConnection,
    endpoint_id: &str,
    now_ms: i64,
) -> Result<(), ApiError> {
    let row = sqlx::query("select enabled, disabled_reason from webhook_endpoints where id = $1")
        .bind(endpoint_id)
        .fetch_optional(&mut *conn)
        .await?;
    let Some(row) = row else {
        return Ok(());
    };
    if row.try_get::<i64, _>("enabled")? != 0 {
        return Ok(());
    }
    let reason = match row.try_get::<Option<String>, _>("disabled_reason")? {
        Some(reason) => format!("the endpoint was disabled: {reason}"),
        None => "the endpoint was disabled by a member".to_owned(),
    };
    deliveries::fail_pending(conn, endpoint_id, &reason, now_ms).await?;
    Ok(())
}

/// Where and how a delivery goes: the URL, the signing keys, the body.
struct Target {
    url: String,
    keys: Vec<Vec<u8>>,
    body: String,
}

async fn workspace_of(
    conn: &mut AnyConnection,
    endpoint_id: &str,
) -> Result<Option<String>, ApiError> {
    Ok(
        sqlx::query_scalar("select workspace_id from webhook_endpoints where id = $1")
            .bind(endpoint_id)
            .fetch_optional(conn)
            .await?,
    )
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

/// The endpoint's URL and keys and the event's body; `Err` with a sentence when the delivery
/// cannot be made (a secret that does not open, an event gone), which fails the attempt.
async fn target(
    conn: &mut AnyConnection,
    endpoint_id: &str,
    event_id: &str,
    settings: &WebhookSettings,
    now_ms: i64,
) -> Result<Result<Target, String>, ApiError> {
    let Some(signer) = signer(conn, endpoint_id, settings, now_ms).await? else {
        return Ok(Err("the endpoint was deleted".to_owned()));
    };
    let keys = match signer.keys {
        Ok(keys) => keys,
        Err(why) => return Ok(Err(why)),
    };
    let event = sqlx::query("select type, created_at, data from events where id = $1")
        .bind(event_id)
        .fetch_optional(&mut *conn)
        .await?;
    let Some(event) = event else {
        return Ok(Err("the event is gone (events are kept 30 days)".to_owned()));
    };
    let data: Map<String, Value> =
        serde_json::from_str(&event.try_get::<String, _>("data")?).map_err(ApiError::internal)?;
    let body = json!({
        "id": event_id,
        "type": event.try_get::<String, _>("type")?,
        "timestamp": rfc3339(event.try_get("created_at")?),
        "data": data,
    })
    .to_string();
    Ok(Ok(Target {
        url: signer.url,
        keys,
        body,
    }))
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
