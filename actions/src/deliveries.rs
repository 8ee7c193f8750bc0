//! Webhook deliveries: each event on its way to each endpoint that wants it, as rows and jobs.
//!
//! This module owns the `webhook_deliveries` table and sits at the bottom of the layers beside
//! `events`, which calls [`fan_out`] in the transaction that writes an event: a delivery exists
//! for every enabled endpoint whose types include the event exactly when the event committed.
//! The endpoints themselves, the signing and the sending are `webhooks`' (above), which
//! registers the handler of [`DeliveryJob`] and changes the rows here only through the verbs
//! below.
//!
//! **Jobs as tokens, one attempt in flight per endpoint.** Every transaction that queues
//! deliveries for an endpoint (or schedules a retry) enqueues a [`DeliveryJob`] for it. A run of
//! that job [`claim`]s the endpoint's oldest due delivery, but only while no other *live* run
//! holds one of the endpoint's deliveries (the `jobs` row of `claimed_by` is `running`); it
//! attempts it, [`finish`]es it, and claims the next, until none is due. A run that finds
//! another one busy ends at once: the busy one drains what is due, and it reads after this
//! run's deliveries committed (they committed before this run could start). So an endpoint's
//! first attempts go out one at a time, in the order their events were written, and a delivery
//! is never left without a run that will attempt it.
//!
//! A process killed during an attempt leaves its claim behind; the engine rescues the job when
//! its lease lapses, the claim stops counting (its job is no longer `running`), and the rescued
//! run (or any other) claims the delivery again: at least once, never lost.

use outreach_runtime::prelude::{
    ApiError, Backend, Clock, JobArgs, NewJob, Timestamp, enqueue, ids,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::{AnyConnection, Row};

/// The attempts a delivery gets: the first and seven retries.
pub const MAX_ATTEMPTS: i64 = 8;

/// The delays after each failed attempt, before the next (ms): 5 s, 5 min, 30 min, 2 h, 5 h,
/// 10 h, 10 h; each stretched by up to 10 % ([`retry_delay_ms`]).
pub const RETRY_DELAYS_MS: [i64; 7] = [
    5_000,
    5 * 60_000,
    30 * 60_000,
    2 * 3_600_000,
    5 * 3_600_000,
    10 * 3_600_000,
    10 * 3_600_000,
];

outreach_runtime::prelude::text_enum! {
    /// Where a delivery is.
    pub enum DeliveryStatus {
        /// Waiting for its next attempt (or in one).
        Pending => "pending",
        /// An attempt was answered with a 2xx.
        Succeeded => "succeeded",
        /// Out of attempts, or its endpoint was disabled or deleted; `error` says why.
        Failed => "failed",
    }
}

/// The job that attempts an endpoint's due deliveries, one at a time: what it carries.
#[derive(Debug, Serialize, Deserialize)]
pub struct DeliveryJob {
    pub endpoint_id: String,
}

impl JobArgs for DeliveryJob {
    const KIND: &'static str = "webhook_delivery";
}

/// The delay before the attempt after attempt `made` (1-based) failed, with up to 10 % jitter;
/// `None` once the attempts are spent.
pub fn retry_delay_ms(made: i64) -> Option<i64> {
    if made >= MAX_ATTEMPTS {
        return None;
    }
    let base = *RETRY_DELAYS_MS.get(usize::try_from(made - 1).ok()?)?;
    let jitter = rand::random_range(0..=base / 10);
    Some(base + jitter)
}

/// An enabled endpoint of a workspace, as the fan-out reads it.
struct Subscriber {
    id: String,
    /// `None`: every type.
    types: Option<Vec<String>>,
}

impl Subscriber {
    fn wants(&self, kind: &str) -> bool {
        self.types
            .as_ref()
            .is_none_or(|types| types.iter().any(|t| t == kind))
    }
}

/// Queues, in the caller's transaction, a delivery of each event (`(id, type)`) to each enabled
/// endpoint of the workspace whose types include it, and one job per endpoint that got any.
/// Called by `events` with every event it writes.
pub async fn fan_out(
    conn: &mut AnyConnection,
    workspace_id: &str,
    now_ms: i64,
    events: &[(String, &str)],
) -> Result<(), ApiError> {
    let rows = sqlx::query(
        "select id, event_types from webhook_endpoints where workspace_id = $1 and enabled = 1",
    )
    .persistent(true)
    .bind(workspace_id)
    .fetch_all(&mut *conn)
    .await?;
    if rows.is_empty() {
        return Ok(());
    }
    let mut subscribers = Vec::with_capacity(rows.len());
    for row in rows {
        let types: Option<String> = row.try_get("event_types")?;
        subscribers.push(Subscriber {
            id: row.try_get("id")?,
            types: types
                .map(|text| serde_json::from_str(&text))
                .transpose()
                .map_err(ApiError::internal)?,
        });
    }
    for subscriber in &subscribers {
        let wanted: Vec<(&str, &str)> = events
            .iter()
            .filter(|(_, kind)| subscriber.wants(kind))
            .map(|(id, kind)| (id.as_str(), *kind))
            .collect();
        queue(conn, workspace_id, &subscriber.id, now_ms, &wanted).await?;
    }
    Ok(())
}

/// Queues, in the caller's transaction, one new delivery of each event (`(id, type)`) to the
/// endpoint, due at `now_ms`, and the job that attempts them; answers the deliveries' ids. For
/// the fan-out, a redelivery and a replay alike.
pub async fn queue(
    conn: &mut AnyConnection,
    workspace_id: &str,
    endpoint_id: &str,
    now_ms: i64,
    events: &[(&str, &str)],
) -> Result<Vec<String>, ApiError> {
    let mut queued = Vec::with_capacity(events.len());
    for chunk in events.chunks(100) {
        let mut values = Vec::with_capacity(chunk.len());
        for i in 0..chunk.len() {
            let n = 4 + 3 * i;
            values.push(format!(
                "(${n}, $1, $2, ${}, ${}, 'pending', 0, $3, $3, $3)",
                n + 1,
                n + 2
            ));
        }
        let sql = format!(
            "insert into webhook_deliveries (id, workspace_id, endpoint_id, event_id, event_type, \
             status, attempt, next_attempt_at, created_at, updated_at) values {}",
            values.join(", ")
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
            .persistent(chunk.len() == 1)
            .bind(workspace_id)
            .bind(endpoint_id)
            .bind(now_ms);
        for (event_id, kind) in chunk {
            let id = ids::new_id("whd");
            query = query.bind(id.clone()).bind(*event_id).bind(*kind);
            queued.push(id);
        }
        query.execute(&mut *conn).await?;
    }
    if !queued.is_empty() {
        wake(conn, workspace_id, endpoint_id, now_ms).await?;
    }
    Ok(queued)
}

/// The attempts a run of [`DeliveryJob`] gets from the engine: a run fails only on a database
/// error, and a delivery must not be left without its run for that.
const JOB_ATTEMPTS: i32 = 1_000;

/// Enqueues (in the caller's transaction) a run of the endpoint's deliveries, due at `at_ms`.
pub async fn wake(
    conn: &mut AnyConnection,
    workspace_id: &str,
    endpoint_id: &str,
    at_ms: i64,
) -> Result<(), ApiError> {
    enqueue_run(conn, workspace_id, endpoint_id, at_ms, false).await
}

/// Like [`wake`], but a no-op while such a wake of the endpoint waits: for the backstops (a run
/// that ends with deliveries pending, the recovery sweep), which may ask again and again.
pub async fn wake_once(
    conn: &mut AnyConnection,
    workspace_id: &str,
    endpoint_id: &str,
    at_ms: i64,
) -> Result<(), ApiError> {
    enqueue_run(conn, workspace_id, endpoint_id, at_ms, true).await
}

async fn enqueue_run(
    conn: &mut AnyConnection,
    workspace_id: &str,
    endpoint_id: &str,
    at_ms: i64,
    once: bool,
) -> Result<(), ApiError> {
    let args = DeliveryJob {
        endpoint_id: endpoint_id.to_owned(),
    };
    let mut job = NewJob::of(&args)
        .workspace(workspace_id)
        .run_at(at_ms)
        .max_attempts(JOB_ATTEMPTS);
    if once {
        job = job.unique_key(format!("webhook:{endpoint_id}"));
    }
    enqueue(conn, &Clock::starting_at(at_ms), job).await?;
    Ok(())
}

/// When the endpoint's earliest pending delivery is due, if it has one.
pub async fn earliest_pending(
    conn: &mut AnyConnection,
    endpoint_id: &str,
) -> Result<Option<i64>, ApiError> {
    Ok(sqlx::query_scalar(
        "select min(next_attempt_at) from webhook_deliveries \
         where endpoint_id = $1 and status = 'pending'",
    )
    .bind(endpoint_id)
    .fetch_one(&mut *conn)
    .await?)
}

/// How long past due a pending delivery must be, held by no live run, before the sweep wakes its
/// endpoint: a run hands over every 10 s, so this is past any run's turn.
const OVERDUE_MS: i64 = 60_000;

/// The recovery sweep: wakes each endpoint holding a delivery overdue by a minute that no live
/// run holds (its run was discarded, or ended on a clock a little behind another's).
async fn wake_overdue(db: &outreach_runtime::prelude::Db, clock: &Clock) -> Result<u64, ApiError> {
    let now = clock.now_ms();
    let rows = sqlx::query(
        "select distinct d.workspace_id, d.endpoint_id from webhook_deliveries d \
         join webhook_endpoints e on e.id = d.endpoint_id and e.enabled = 1 \
         where d.status = 'pending' and d.next_attempt_at < $1 \
           and not exists (select 1 from webhook_deliveries h join jobs j on j.id = h.claimed_by \
               where h.endpoint_id = d.endpoint_id and h.status = 'pending' and j.state = 'running')",
    )
    .bind(now - OVERDUE_MS)
    .fetch_all(db.pool())
    .await?;
    let mut conn = db.pool().acquire().await?;
    for row in &rows {
        let workspace_id: String = row.try_get("workspace_id")?;
        let endpoint_id: String = row.try_get("endpoint_id")?;
        wake_once(&mut conn, &workspace_id, &endpoint_id, now).await?;
    }
    Ok(u64::try_from(rows.len()).unwrap_or(u64::MAX))
}

outreach_runtime::prelude::recovery!("webhook deliveries no run holds", wake_overdue);

/// A delivery claimed for an attempt.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: String,
    pub event_id: String,
    /// Attempts made before this one.
    pub attempt: i64,
    seq: i64,
}

/// Claims, for the run of job `job_id`, the endpoint's oldest due deliveries (at most `limit`,
/// oldest first), unless another live run holds one of the endpoint's deliveries or the endpoint
/// is disabled or gone: none then, and when nothing is due.
pub async fn claim(
    conn: &mut AnyConnection,
    endpoint_id: &str,
    job_id: &str,
    now_ms: i64,
    limit: i64,
) -> Result<Vec<Claimed>, ApiError> {
    if Backend::of(conn) == Backend::Postgres {
        // Claims of one endpoint queue here; `no key update` leaves the key-share locks of the
        // transactions inserting its deliveries alone.
        let found = sqlx::query(
            "select id from webhook_endpoints where id = $1 and enabled = 1 for no key update",
        )
        .bind(endpoint_id)
        .fetch_optional(&mut *conn)
        .await?;
        if found.is_none() {
            return Ok(Vec::new());
        }
    }
    let rows = sqlx::query(
        "update webhook_deliveries set claimed_by = $2 \
         where seq in (select seq from webhook_deliveries where endpoint_id = $1 \
               and status = 'pending' and next_attempt_at <= $3 order by seq limit $4) \
           and exists (select 1 from webhook_endpoints where id = $1 and enabled = 1) \
           and not exists (select 1 from webhook_deliveries d join jobs j on j.id = d.claimed_by \
               where d.endpoint_id = $1 and d.status = 'pending' and d.claimed_by <> $2 \
                 and j.state = 'running') \
         returning id, event_id, attempt, seq",
    )
    .bind(endpoint_id)
    .bind(job_id)
    .bind(now_ms)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    let mut claimed = rows
        .iter()
        .map(|row| {
            Ok(Claimed {
                id: row.try_get("id")?,
                event_id: row.try_get("event_id")?,
                attempt: row.try_get("attempt")?,
                seq: row.try_get("seq")?,
            })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    claimed.sort_by_key(|delivery| delivery.seq);
    Ok(claimed)
}

/// Gives back deliveries claimed by job `job_id` and not attempted (the rest of a batch after a
/// failure), in the caller's transaction: they stay due for the next claim.
pub async fn release(
    conn: &mut AnyConnection,
    job_id: &str,
    deliveries: &[Claimed],
) -> Result<(), ApiError> {
    for delivery in deliveries {
        sqlx::query(
            "update webhook_deliveries set claimed_by = null \
             where id = $1 and claimed_by = $2 and status = 'pending'",
        )
        .bind(&delivery.id)
        .bind(job_id)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// How an attempt ended, as [`finish`] records it.
#[derive(Debug, Clone, Default)]
pub struct Attempt {
    /// The HTTP status, when an answer came.
    pub response_status: Option<i64>,
    pub duration_ms: i64,
    /// The first 1 KB of the answer's body.
    pub response_body: Option<String>,
    /// Why it failed, when it did (a refused address, a timeout, a redirect, a status).
    pub error: Option<String>,
    /// A 2xx.
    pub succeeded: bool,
    /// When the next attempt may go at the earliest (a `Retry-After`), epoch ms.
    pub not_before_ms: Option<i64>,
}

/// What became of a delivery after [`finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    Succeeded,
    /// Failed; due again at this time.
    Retrying(i64),
    /// Failed for good.
    Failed,
    /// Someone else settled it during the attempt (its endpoint was disabled, which failed it):
    /// the attempt changed nothing.
    Superseded,
}

/// Records an attempt of a delivery claimed by job `job_id` (in the caller's transaction) and
/// schedules the next one when it failed with attempts left (a job at that time included). A
/// delivery no longer pending under this claim (failed meanwhile by a disabling) is left as it is.
pub async fn finish(
    conn: &mut AnyConnection,
    workspace_id: &str,
    endpoint_id: &str,
    job_id: &str,
    delivery: &Claimed,
    attempt: &Attempt,
    now_ms: i64,
) -> Result<Finished, ApiError> {
    let made = delivery.attempt + 1;
    let finished = if attempt.succeeded {
        Finished::Succeeded
    } else {
        match retry_delay_ms(made) {
            Some(delay) => {
                let scheduled = now_ms + delay;
                Finished::Retrying(
                    attempt
                        .not_before_ms
                        .map_or(scheduled, |n| n.max(scheduled)),
                )
            }
            None => Finished::Failed,
        }
    };
    let (status, next) = match finished {
        Finished::Retrying(at) => (DeliveryStatus::Pending, Some(at)),
        Finished::Failed => (DeliveryStatus::Failed, None),
        Finished::Succeeded | Finished::Superseded => (DeliveryStatus::Succeeded, None),
    };
    let recorded = sqlx::query(
        "update webhook_deliveries set status = $2, attempt = $3, next_attempt_at = $4, \
         claimed_by = null, response_status = $5, duration_ms = $6, response_body = $7, \
         error = $8, last_attempt_at = $9, updated_at = $9 \
         where id = $1 and status = 'pending' and claimed_by = $10",
    )
    .bind(&delivery.id)
    .bind(status.as_str())
    .bind(made)
    .bind(next)
    .bind(attempt.response_status)
    .bind(attempt.duration_ms)
    .bind(attempt.response_body.as_deref())
    .bind(attempt.error.as_deref())
    .bind(now_ms)
    .bind(job_id)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if recorded == 0 {
        return Ok(Finished::Superseded);
    }
    if let Finished::Retrying(at) = finished {
        wake(conn, workspace_id, endpoint_id, at).await?;
    }
    Ok(finished)
}

/// Fails every pending delivery of an endpoint with `reason` (it was disabled), in the caller's
/// transaction; answers how many.
pub async fn fail_pending(
    conn: &mut AnyConnection,
    endpoint_id: &str,
    reason: &str,
    now_ms: i64,
) -> Result<u64, ApiError> {
    Ok(sqlx::query(
        "update webhook_deliveries set status = 'failed', next_attempt_at = null, \
         claimed_by = null, error = $2, updated_at = $3 \
         where endpoint_id = $1 and status = 'pending'",
    )
    .bind(endpoint_id)
    .bind(reason)
    .bind(now_ms)
    .execute(&mut *conn)
    .await?
    .rows_affected())
}

/// A delivery as the API shows it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Delivery {
    /// The delivery's id (`whd_...`).
    pub id: String,
    /// The endpoint it goes to (`whe_...`).
    pub endpoint_id: String,
    /// The event it carries (`evt_...`): the `webhook-id` of every attempt.
    pub event_id: String,
    pub event_type: String,
    pub status: DeliveryStatus,
    /// Attempts made so far (at most 8).
    pub attempt: i64,
    /// The HTTP status of the last attempt's answer, if one came.
    pub response_status: Option<i64>,
    /// How long the last attempt took, in milliseconds.
    pub duration_ms: Option<i64>,
    /// The first 1 KB of the last answer's body.
    pub response_body: Option<String>,
    /// Why the last attempt failed, when it did.
    pub error: Option<String>,
    /// When the next attempt is due, while `pending`.
    pub next_attempt_at: Option<Timestamp>,
    pub last_attempt_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The columns [`Delivery::from_row`] reads.
pub const DELIVERY_COLUMNS: &str = "id, endpoint_id, event_id, event_type, status, attempt, \
    response_status, duration_ms, response_body, error, next_attempt_at, last_attempt_at, \
    created_at, updated_at";

impl Delivery {
    pub fn from_row(row: &sqlx::any::AnyRow) -> Result<Self, ApiError> {
        Ok(Self {
            id: row.try_get("id")?,
            endpoint_id: row.try_get("endpoint_id")?,
            event_id: row.try_get("event_id")?,
            event_type: row.try_get("event_type")?,
            status: DeliveryStatus::from_db(&row.try_get::<String, _>("status")?)?,
            attempt: row.try_get("attempt")?,
            response_status: row.try_get("response_status")?,
            duration_ms: row.try_get("duration_ms")?,
            response_body: row.try_get("response_body")?,
            error: row.try_get("error")?,
            next_attempt_at: row
                .try_get::<Option<i64>, _>("next_attempt_at")?
                .map(Timestamp),
            last_attempt_at: row
                .try_get::<Option<i64>, _>("last_attempt_at")?
                .map(Timestamp),
            created_at: Timestamp(row.try_get("created_at")?),
            updated_at: Timestamp(row.try_get("updated_at")?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_is_eight_attempts_over_about_27_6_hours() {
        let total: i64 = RETRY_DELAYS_MS.iter().sum();
        assert_eq!(RETRY_DELAYS_MS.len() as i64 + 1, MAX_ATTEMPTS);
        // 5 s + 5 min + 30 min + 2 h + 5 h + 10 h + 10 h
        assert_eq!(total, 5_000 + 99_300_000);
        for made in 1..MAX_ATTEMPTS {
            let base = RETRY_DELAYS_MS[(made - 1) as usize];
            let delay = retry_delay_ms(made).expect("attempts left");
            assert!(
                (base..=base + base / 10).contains(&delay),
                "{made}: {delay}"
            );
        }
        assert_eq!(retry_delay_ms(MAX_ATTEMPTS), None);
    }
}
