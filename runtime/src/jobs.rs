//! Durable jobs: work that outlives a request, in a table of our own (River's and Oban's shape).
//!
//! No job crate can enqueue inside our sqlx `Any` transactions, and that is the point of a job
//! here: [`enqueue`] writes the row on the caller's connection, so the job exists if and only if
//! the state change that needs it commits (an action's `ctx.tx()`, or a job's own transaction).
//!
//! A worker ([`crate::worker`]) claims due jobs under a lease: the claim sets a random token and a
//! lease a few seconds long that a heartbeat renews while the handler runs. A handler is an
//! `async fn(JobCtx) -> Result<JobOutcome, JobError>` registered with [`job!`](crate::job).
//! Its writes go into [`JobCtx::tx`], and the **fence** is the last statement of that
//! transaction, at commit (River's shape): it updates the job row only where the claim's token
//! still holds it and the job still runs. The job's outcome is written that way in the same
//! transaction, so the handler's writes and the job's completion commit together or not at all.
//! If the lease lapsed and the job was rescued (and perhaps claimed by another worker), the old
//! owner's fence finds another token, its transaction rolls back, and its writes never land: a
//! job's committed effect happens once.
//!
//! Fencing at commit rather than at begin means a job holds no row of its own while it works:
//! its transaction takes the domain's rows in the domain's order, and the job row last, for
//! the instant of the fence. No writer of the domain needs to lock a job before its own rows.
//!
//! A handler that must commit before a call to the outside world (an intent row before a send)
//! calls [`JobCtx::commit`]: the writes so far commit, fenced, and the job keeps running; the
//! next [`JobCtx::tx`] is fenced again when it commits.
//!
//! Two clocks, on purpose. When a job is due (`run_at`), backoffs and snoozes are business time
//! and read the service [`Clock`], which tests move. Leases are about whether a process is alive,
//! which is real time ([`lease_now_ms`]): a test that moves the service clock by a day must not
//! make every running job look dead, or each would be rescued and run again beside its living
//! owner.
//!
//! Where the backends need different SQL (the claim and the lease renewal on PostgreSQL skip
//! locked rows) both versions sit side by side in [`sql`].

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};

use rand::Rng;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::Row;
use tokio::sync::{Mutex, MutexGuard, watch};

use crate::clock::Clock;
use crate::config::Config;
use crate::ctx::Tx;
use crate::db::{Backend, Db};
use crate::error::ApiError;
use crate::lease::now_ms as lease_now_ms;
use crate::{ids, lease};

/// Attempts a job gets unless [`NewJob::max_attempts`] says otherwise.
pub const DEFAULT_MAX_ATTEMPTS: i32 = 20;

/// The first retry's delay; each further attempt doubles it, up to [`MAX_BACKOFF_MS`].
pub const BASE_BACKOFF_MS: i64 = 15_000;

/// The longest delay between two attempts.
pub const MAX_BACKOFF_MS: i64 = 6 * 60 * 60 * 1000;

crate::text_enum! {
    /// Where a job is in its life.
    pub enum JobState {
        /// Waiting for its `run_at`, or due and waiting for a worker.
        Available => "available",
        /// Claimed by a worker whose lease is alive (or lapsed and not yet rescued).
        Running => "running",
        Completed => "completed",
        /// Out of attempts, or given up by its handler; `last_error` says why.
        Discarded => "discarded",
        /// Canceled before it ran.
        Canceled => "canceled",
    }
}

/// A job to write with [`enqueue`].
#[derive(Debug, Clone, Default)]
pub struct NewJob {
    /// The registered kind (see [`job!`](crate::job)) whose handler runs it.
    pub kind: String,
    pub workspace_id: Option<String>,
    /// The handler's input.
    pub payload: serde_json::Value,
    /// When it is due, on the service clock; `None`: now.
    pub run_at_ms: Option<i64>,
    /// While a job of this kind with this key is `available` or `running`, enqueueing another
    /// one is a no-op that returns the existing job's id. (A running job that enqueues its own
    /// key gets its own id back: reschedule yourself with a snooze instead.)
    pub unique_key: Option<String>,
    /// Default [`DEFAULT_MAX_ATTEMPTS`].
    pub max_attempts: Option<i32>,
}

/// A kind of job, as its arguments: the type its handler reads ([`JobCtx::args`]) names the
/// kind it is stored under, so a kind has one spelling and its payload one shape. Enqueue one
/// with [`NewJob::of`]; register its handler with `job!(Args::KIND, handler)`.
pub trait JobArgs: Serialize + DeserializeOwned {
    /// The kind's name in the `jobs` table (stable: unfinished jobs keep it across releases).
    const KIND: &'static str;
}

impl NewJob {
    /// A job of the kind `A` names, carrying `args`.
    pub fn of<A: JobArgs>(args: &A) -> Self {
        // A derived `Serialize` of plain fields cannot fail; were it to, the handler would find
        // a null payload and discard the job, saying it does not decode.
        Self::new(A::KIND, serde_json::to_value(args).unwrap_or_default())
    }

    pub fn new(kind: impl Into<String>, payload: serde_json::Value) -> Self {
        Self {
            kind: kind.into(),
            payload,
            ..Self::default()
        }
    }

    pub fn workspace(mut self, workspace_id: impl Into<String>) -> Self {
        self.workspace_id = Some(workspace_id.into());
        self
    }

    pub fn run_at(mut self, run_at_ms: i64) -> Self {
        self.run_at_ms = Some(run_at_ms);
        self
    }

    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }

    pub fn max_attempts(mut self, attempts: i32) -> Self {
        self.max_attempts = Some(attempts);
        self
    }
}

/// Writes a job on the caller's connection, inside the caller's transaction (an action's
/// `ctx.tx()` or a job's [`JobCtx::tx`]), and returns its id; with a `unique_key` already held
/// by an unfinished job of the same kind, writes nothing and returns that job's id. Workers in
/// this process look for it at once; others find it on their next poll.
pub async fn enqueue(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    job: NewJob,
) -> Result<String, ApiError> {
    Ok(match write(conn, clock, &job).await? {
        Written::New(id) | Written::Existing(id) => id,
    })
}

/// Like [`enqueue`], but says whether it wrote the job: `None` when an unfinished job of the same
/// kind already holds its `unique_key` (what a recovery that makes sure a job exists counts).
pub async fn enqueue_if_absent(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    job: NewJob,
) -> Result<Option<String>, ApiError> {
    Ok(match write(conn, clock, &job).await? {
        Written::New(id) => Some(id),
        Written::Existing(_) => None,
    })
}

enum Written {
    New(String),
    Existing(String),
}

async fn write(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    job: &NewJob,
) -> Result<Written, ApiError> {
    if handler(&job.kind).is_none() {
        return Err(ApiError::internal(format!(
            "no job handler is registered for kind `{}` (register one with `job!`)",
            job.kind
        )));
    }
    let max_attempts = job.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS);
    if max_attempts < 1 {
        return Err(ApiError::internal(format!(
            "a job needs at least one attempt; `{}` was given {max_attempts}",
            job.kind
        )));
    }
    let now = clock.now_ms();
    let payload = job.payload.to_string();
    // A conflicting job can finish between the insert that met it and the read that looks for
    // it; the next insert then succeeds.
    for _ in 0..3 {
        let id = ids::new_id("job");
        let inserted = sqlx::query(sql::INSERT)
            .bind(&id)
            .bind(&job.kind)
            .bind(job.workspace_id.as_deref())
            .bind(&payload)
            .bind(i64::from(max_attempts))
            .bind(job.run_at_ms.unwrap_or(now))
            .bind(job.unique_key.as_deref())
            .bind(now)
            .fetch_optional(&mut *conn)
            .await?;
        if inserted.is_some() {
            wake();
            return Ok(Written::New(id));
        }
        let existing = sqlx::query(sql::FIND_UNIQUE)
            .bind(&job.kind)
            .bind(job.unique_key.as_deref())
            .fetch_optional(&mut *conn)
            .await?;
        if let Some(row) = existing {
            return Ok(Written::Existing(row.try_get("id")?));
        }
    }
    Err(ApiError::internal(format!(
        "could not enqueue a `{}` job: its unique key kept changing hands",
        job.kind
    )))
}

/// Cancels a job that has not started (`available`); returns whether it did. A running job is
/// not interrupted: its handler should re-read the state it acts on.
pub async fn cancel(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    id: &str,
) -> Result<bool, ApiError> {
    let done = sqlx::query(
        "update jobs set state = 'canceled', finished_at = $2, updated_at = $2 \
         where id = $1 and state = 'available'",
    )
    .bind(id)
    .bind(clock.now_ms())
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Cancels the unstarted job of `kind` holding `unique_key`, if any; returns whether it did.
pub async fn cancel_unique(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    kind: &str,
    unique_key: &str,
) -> Result<bool, ApiError> {
    let done = sqlx::query(
        "update jobs set state = 'canceled', finished_at = $3, updated_at = $3 \
         where kind = $1 and unique_key = $2 and state = 'available'",
    )
    .bind(kind)
    .bind(unique_key)
    .bind(clock.now_ms())
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Moves the waiting (`available`) job of `kind` holding `unique_key` to `run_at_ms`, in the
/// caller's transaction, if it is due by `due_by_ms`: for a handler that decides when other jobs
/// of its kind run (a step queueing its sender's other due steps). A job that is running, done,
/// not due yet, or (on PostgreSQL) locked by another transaction is left alone, never waited
/// for; returns whether the job moved.
pub async fn move_due_unique(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    kind: &str,
    unique_key: &str,
    due_by_ms: i64,
    run_at_ms: i64,
) -> Result<bool, ApiError> {
    let statement = match Backend::of(conn) {
        Backend::Postgres => sql::MOVE_DUE_UNIQUE_POSTGRES,
        Backend::Sqlite => sql::MOVE_DUE_UNIQUE_SQLITE,
    };
    let done = sqlx::query(statement)
        .bind(kind)
        .bind(unique_key)
        .bind(due_by_ms)
        .bind(run_at_ms)
        .bind(clock.now_ms())
        .execute(&mut *conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

/// A job as stored, for tests and for whoever shows a job's fate.
#[derive(Debug, Clone)]
pub struct JobRecord {
    pub id: String,
    pub kind: String,
    pub workspace_id: Option<String>,
    pub payload: serde_json::Value,
    pub state: JobState,
    pub attempt: i32,
    pub max_attempts: i32,
    pub run_at_ms: i64,
    pub last_error: Option<String>,
    pub unique_key: Option<String>,
    pub created_at: i64,
    pub finished_at: Option<i64>,
}

/// Reads one job.
pub async fn get<'e, E>(executor: E, id: &str) -> Result<Option<JobRecord>, ApiError>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let row = sqlx::query(
        "select id, kind, workspace_id, payload, state, attempt, max_attempts, run_at, last_error, \
         unique_key, created_at, finished_at from jobs where id = $1",
    )
    .bind(id)
    .fetch_optional(executor)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    Ok(Some(JobRecord {
        id: row.try_get("id")?,
        kind: row.try_get("kind")?,
        workspace_id: row.try_get("workspace_id")?,
        payload: parse_payload(&row.try_get::<String, _>("payload")?),
        state: JobState::from_db(&row.try_get::<String, _>("state")?)?,
        attempt: narrow(row.try_get("attempt")?),
        max_attempts: narrow(row.try_get("max_attempts")?),
        run_at_ms: row.try_get("run_at")?,
        last_error: row.try_get("last_error")?,
        unique_key: row.try_get("unique_key")?,
        created_at: row.try_get("created_at")?,
        finished_at: row.try_get("finished_at")?,
    }))
}

fn narrow(value: i64) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

fn parse_payload(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or(serde_json::Value::Null)
}

// ---------------------------------------------------------------------------------------------
// Handlers and their registration.

/// What a handler decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome {
    /// Finished: the job is `completed`.
    Done,
    /// Not now: due again at `until_ms` (service clock); the attempt is given back.
    Snooze { until_ms: i64 },
    /// Failed, but the handler's writes stand: retried after a backoff, or `discarded` once out
    /// of attempts, with `error` as `last_error`.
    Retry { error: String },
    /// Given up for good: `discarded` with `reason` as `last_error` (the handler's writes stand).
    Discard { reason: String },
}

/// Why a handler failed. Its transaction rolls back; then the job is retried after a backoff
/// (or discarded once out of attempts), or discarded at once, in a fenced transaction of its own.
#[derive(Debug)]
pub struct JobError {
    kind: JobErrorKind,
    message: String,
    /// The database ended the run's transaction for another one ([`ApiError::contention`]):
    /// the worker may run the handler again at once ([`crate::retry`]).
    contention: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobErrorKind {
    Retry,
    Discard,
    LeaseLost,
}

impl JobError {
    /// A failure worth another attempt (the default for database errors and `ApiError`s).
    pub fn retry(message: impl fmt::Display) -> Self {
        Self {
            kind: JobErrorKind::Retry,
            message: message.to_string(),
            contention: false,
        }
    }

    /// A failure no retry can mend: the job is discarded at once.
    pub fn discard(message: impl fmt::Display) -> Self {
        Self {
            kind: JobErrorKind::Discard,
            message: message.to_string(),
            contention: false,
        }
    }

    /// The lease was lost: the job is another worker's now, and nothing of this run may land.
    pub fn lease_lost() -> Self {
        Self {
            kind: JobErrorKind::LeaseLost,
            message: "the job's lease lapsed and it was taken back; this run's writes are dropped"
                .to_owned(),
            contention: false,
        }
    }

    pub fn is_lease_lost(&self) -> bool {
        self.kind == JobErrorKind::LeaseLost
    }

    pub fn is_discard(&self) -> bool {
        self.kind == JobErrorKind::Discard
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the database ended the run's transaction for a conflict with another one.
    pub fn is_contention(&self) -> bool {
        self.contention
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JobError {}

impl From<sqlx::Error> for JobError {
    fn from(error: sqlx::Error) -> Self {
        let mut job_error = Self::retry(format!("database: {error}"));
        job_error.contention = crate::error::is_contention_error(&error);
        job_error
    }
}

impl From<ApiError> for JobError {
    fn from(error: ApiError) -> Self {
        let contention = error.is_contention();
        let mut job_error = match error.internal {
            Some(cause) => Self::retry(format!("{}: {} ({cause})", error.code, error.message)),
            None => Self::retry(format!("{}: {}", error.code, error.message)),
        };
        job_error.contention = contention;
        job_error
    }
}

impl From<serde_json::Error> for JobError {
    fn from(error: serde_json::Error) -> Self {
        Self::discard(format!("the payload does not decode: {error}"))
    }
}

/// What a handler returns.
pub type JobResult = Result<JobOutcome, JobError>;

/// A handler's future.
pub type JobFuture = Pin<Box<dyn Future<Output = JobResult> + Send + 'static>>;

/// A registered handler.
pub type JobHandler = fn(JobCtx) -> JobFuture;

/// One registered job kind. Made by [`job!`](crate::job).
pub struct JobKind {
    pub kind: &'static str,
    pub run: JobHandler,
}

inventory::collect!(JobKind);

/// Registers `async fn(JobCtx) -> Result<JobOutcome, JobError>` as the handler of a job kind:
/// `job!(StepJob::KIND, run_step);`, with the kind its [`JobArgs`] type names, so a module
/// below the handler's can own the kind and enqueue it.
#[macro_export]
macro_rules! job {
    ($kind:expr, $handler:path) => {
        $crate::__private::inventory::submit! {
            $crate::jobs::JobKind {
                kind: $kind,
                run: |job| ::std::boxed::Box::pin($handler(job)),
            }
        }
    };
}

static HANDLERS: LazyLock<HashMap<&'static str, JobHandler>> = LazyLock::new(|| {
    inventory::iter::<JobKind>
        .into_iter()
        .map(|kind| (kind.kind, kind.run))
        .collect()
});

/// The handler of a kind, if one is registered in this process.
pub fn handler(kind: &str) -> Option<JobHandler> {
    HANDLERS.get(kind).copied()
}

/// Refuses a start where two handlers claim one kind, naming it.
pub fn validate_kinds() -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for kind in inventory::iter::<JobKind> {
        if kind.kind.is_empty() {
            return Err("a job kind is registered with an empty name".to_owned());
        }
        if !seen.insert(kind.kind) {
            return Err(format!(
                "the job kind `{}` is registered twice; each kind has one handler",
                kind.kind
            ));
        }
    }
    Ok(())
}

/// The job a handler runs, as claimed.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: String,
    pub kind: String,
    pub workspace_id: Option<String>,
    pub payload: serde_json::Value,
    /// This attempt's number, from 1.
    pub attempt: i32,
    pub max_attempts: i32,
    /// When it was due (service clock).
    pub run_at_ms: i64,
}

/// What a handler receives: the job, the database, the clock, the configuration, and the one
/// fenced transaction its writes and the job's outcome commit in. Cheap to clone.
#[derive(Clone)]
pub struct JobCtx(Arc<Inner>);

struct Inner {
    db: Db,
    clock: Clock,
    config: Arc<Config>,
    job: Job,
    token: String,
    tx: Mutex<Option<crate::db::WriteTx>>,
    /// Whether this run has committed writes before its end ([`JobCtx::commit`]): from then on
    /// it may have reached the outside world, and is never run again in place.
    committed: std::sync::atomic::AtomicBool,
}

impl JobCtx {
    /// A context for a job claimed with `token` (the worker makes these; tests may too).
    pub fn new(db: Db, clock: Clock, config: Arc<Config>, job: Job, token: String) -> Self {
        Self(Arc::new(Inner {
            db,
            clock,
            config,
            job,
            token,
            tx: Mutex::new(None),
            committed: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    pub fn job(&self) -> &Job {
        &self.0.job
    }

    pub fn id(&self) -> &str {
        &self.0.job.id
    }

    pub fn kind(&self) -> &str {
        &self.0.job.kind
    }

    pub fn workspace_id(&self) -> Option<&str> {
        self.0.job.workspace_id.as_deref()
    }

    pub fn payload(&self) -> &serde_json::Value {
        &self.0.job.payload
    }

    /// The job's arguments, as the kind `A` they were enqueued as; a job of another kind is
    /// discarded (its handler was registered under the wrong kind), and so is a payload that
    /// does not decode (`?` does that).
    pub fn args<A: JobArgs>(&self) -> Result<A, JobError> {
        if self.0.job.kind != A::KIND {
            return Err(JobError::discard(format!(
                "a `{}` job was handed to the handler of `{}`",
                self.0.job.kind,
                A::KIND
            )));
        }
        Ok(A::deserialize(&self.0.job.payload)?)
    }

    pub fn attempt(&self) -> i32 {
        self.0.job.attempt
    }

    pub fn db(&self) -> &Db {
        &self.0.db
    }

    pub fn clock(&self) -> &Clock {
        &self.0.clock
    }

    pub fn now_ms(&self) -> i64 {
        self.0.clock.now_ms()
    }

    pub fn config(&self) -> &Config {
        &self.0.config
    }

    /// The job's transaction, begun on first use. Its writes commit with the job's outcome after
    /// the handler returns, or at [`JobCtx::commit`]; either way the fence (the claim's token
    /// must still hold the job) is its last statement, and a run that lost its lease commits
    /// nothing. Take it once and pass `&mut tx` down: a second `tx()` or a `commit()` while the
    /// first guard is alive fails the attempt.
    pub async fn tx(&self) -> Result<Tx<'_>, JobError> {
        let mut guard = self.held_tx()?;
        if guard.is_none() {
            *guard = Some(self.0.db.begin_write().await?);
        }
        Ok(MutexGuard::map(guard, |tx| match tx {
            Some(tx) => &mut **tx,
            None => unreachable!("the transaction was begun above"),
        }))
    }

    /// Commits the writes made so far, fenced (this run must still hold the job's lease, or
    /// they roll back and this is [`JobError::lease_lost`]), while the job keeps running: for
    /// what must be durable before a call to the outside world, such as an intent row before a
    /// send. The next [`JobCtx::tx`] begins a new transaction, fenced in its turn.
    pub async fn commit(&self) -> Result<(), JobError> {
        if let Some(mut tx) = self.held_tx()?.take() {
            self.fence(&mut tx).await?;
            self.0
                .committed
                .store(true, std::sync::atomic::Ordering::Relaxed);
            tx.commit().await?;
        }
        Ok(())
    }

    /// The transaction's slot. Only the handler's own task uses it, so finding it taken means a
    /// guard from [`JobCtx::tx`] is still alive (a shadowed binding, say): a handler bug, which
    /// fails the attempt at once rather than waiting forever for itself.
    fn held_tx(&self) -> Result<MutexGuard<'_, Option<crate::db::WriteTx>>, JobError> {
        self.0.tx.try_lock().map_err(|_| {
            JobError::retry(
                "the job's transaction is still borrowed: drop the guard of `JobCtx::tx` before \
                 calling `tx` or `commit` again",
            )
        })
    }

    /// Whether this run committed writes before its end ([`JobCtx::commit`]).
    pub fn has_committed(&self) -> bool {
        self.0.committed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Drops the writes made since the last commit.
    pub async fn rollback(&self) {
        drop(self.0.tx.lock().await.take());
    }

    /// The fence, as the last statement before a commit: extends the lease where this run's
    /// token still holds the running job. [`JobError::lease_lost`] when it does not.
    async fn fence(&self, tx: &mut crate::db::WriteTx) -> Result<(), JobError> {
        let fenced = sqlx::query(sql::FENCE)
            .bind(&self.0.job.id)
            .bind(&self.0.token)
            .bind(lease_now_ms() + lease::LEASE_MS)
            .execute(&mut **tx)
            .await?;
        if fenced.rows_affected() == 1 {
            Ok(())
        } else {
            Err(JobError::lease_lost())
        }
    }

    /// Ends the run (the worker calls this with the handler's result). Writes the result, fenced, in the handler's open transaction when it succeeded
    /// (so its writes and the outcome commit together), in a fresh one when it failed (its
    /// writes are rolled back first).
    pub async fn finish(&self, result: JobResult) -> Finished {
        let job = &self.0.job;
        let (tx, transition) = match result {
            Ok(outcome) => (self.0.tx.lock().await.take(), self.transition(outcome)),
            Err(error) if error.is_lease_lost() => {
                self.rollback().await;
                return Finished::LeaseLost;
            }
            Err(error) => {
                self.rollback().await;
                let transition = if error.is_discard() {
                    Transition::Discard(error.message)
                } else {
                    self.retry(error.message)
                };
                (None, transition)
            }
        };
        let handler_tx = tx.is_some();
        match self.apply(tx, &transition).await {
            Ok(finished) => finished,
            Err(error) if handler_tx => {
                // The handler's transaction could not take the outcome (a statement in it
                // failed, or the commit did): its writes are gone, so this is a failed attempt.
                tracing::warn!(job = %job.id, kind = %job.kind, %error, "a job's transaction failed to commit");
                let transition = self.retry(format!("the job's transaction failed: {error}"));
                match self.apply(None, &transition).await {
                    Ok(finished) => finished,
                    Err(error) => {
                        tracing::warn!(job = %job.id, %error, "could not record a job's failure; its lease will lapse");
                        Finished::Unrecorded
                    }
                }
            }
            Err(error) => {
                tracing::warn!(job = %job.id, %error, "could not record a job's outcome; its lease will lapse");
                Finished::Unrecorded
            }
        }
    }

    fn transition(&self, outcome: JobOutcome) -> Transition {
        match outcome {
            JobOutcome::Done => Transition::Complete,
            JobOutcome::Snooze { until_ms } => Transition::Snooze(until_ms),
            JobOutcome::Retry { error } => self.retry(error),
            JobOutcome::Discard { reason } => Transition::Discard(reason),
        }
    }

    fn retry(&self, error: String) -> Transition {
        let job = &self.0.job;
        if job.attempt >= job.max_attempts {
            Transition::Discard(format!(
                "{error} (attempt {} of {}; no attempts left)",
                job.attempt, job.max_attempts
            ))
        } else {
            Transition::Retry(error, self.0.clock.now_ms() + backoff_ms(job.attempt))
        }
    }

    async fn apply(
        &self,
        tx: Option<crate::db::WriteTx>,
        transition: &Transition,
    ) -> Result<Finished, JobError> {
        let mut tx = match tx {
            Some(tx) => tx,
            None => self.0.db.begin_write().await?,
        };
        let now = self.0.clock.now_ms();
        let (statement, finished) = match transition {
            Transition::Complete => (sqlx::query(sql::COMPLETE).bind(now), Finished::Completed),
            Transition::Snooze(until) => (
                sqlx::query(sql::SNOOZE).bind(now).bind(*until),
                Finished::Snoozed,
            ),
            Transition::Retry(error, at) => (
                sqlx::query(sql::RETRY)
                    .bind(now)
                    .bind(*at)
                    .bind(error.as_str()),
                Finished::Retried,
            ),
            Transition::Discard(error) => (
                sqlx::query(sql::DISCARD).bind(now).bind(error.as_str()),
                Finished::Discarded,
            ),
        };
        // The fence, in the statement itself and last: the row must still be this run's.
        let done = statement
            .bind(&self.0.job.id)
            .bind(&self.0.token)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            return Ok(Finished::LeaseLost);
        }
        tx.commit().await?;
        Ok(finished)
    }
}

/// What happens to a job row when its run ends.
enum Transition {
    Complete,
    Snooze(i64),
    Retry(String, i64),
    Discard(String),
}

/// How a run ended, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    Completed,
    Snoozed,
    Retried,
    Discarded,
    /// The fence failed: the job was rescued from this run, and nothing of it landed.
    LeaseLost,
    /// The outcome could not be written (the database failed); the lease lapses and the job is
    /// rescued.
    Unrecorded,
}

/// The delay before attempt `attempt + 1`: 15 s doubling per attempt up to 6 h, ±10% jitter so
/// jobs that failed together do not retry together.
pub fn backoff_ms(attempt: i32) -> i64 {
    let exponent = u32::try_from(attempt.saturating_sub(1).clamp(0, 30)).unwrap_or(0);
    let base = BASE_BACKOFF_MS
        .saturating_mul(1_i64 << exponent)
        .min(MAX_BACKOFF_MS);
    let jitter = base / 10;
    base + rand::rng().random_range(-jitter..=jitter)
}

/// The earliest time after `after_ms` at which a waiting job of a kind not in `except` falls
/// due; `None` when none waits. The test clock's play-out moves from one such time to the next
/// (leaving out the periodic pollers, which would make a stop of every few minutes).
pub async fn next_due_after(
    db: &Db,
    after_ms: i64,
    except: &[&str],
) -> Result<Option<i64>, ApiError> {
    let rows = sqlx::query(
        "select kind, min(run_at) as run_at from jobs where state = 'available' and run_at > $1 \
         group by kind",
    )
    .bind(after_ms)
    .fetch_all(db.pool())
    .await?;
    let mut earliest = None;
    for row in rows {
        let kind: String = row.try_get("kind")?;
        if except.contains(&kind.as_str()) {
            continue;
        }
        let run_at: i64 = row.try_get("run_at")?;
        earliest = Some(earliest.map_or(run_at, |at: i64| at.min(run_at)));
    }
    Ok(earliest)
}

/// Whether a waiting job is due at `now_ms` (service time).
pub async fn any_due(db: &Db, now_ms: i64) -> Result<bool, ApiError> {
    Ok(sqlx::query(sql::ANY_DUE)
        .bind(now_ms)
        .fetch_optional(db.pool())
        .await?
        .is_some())
}

/// How many jobs are running now under a living lease, on any instance (a job whose process
/// died keeps `running` until a worker rescues it; it is not counted).
pub async fn running_count(db: &Db) -> Result<i64, ApiError> {
    let row = sqlx::query(
        "select count(*) as running from jobs where state = 'running' and lease_until > $1",
    )
    .bind(lease_now_ms())
    .fetch_one(db.pool())
    .await?;
    Ok(row.try_get("running")?)
}

// ---------------------------------------------------------------------------------------------
// Claims, heartbeats and rescue: what the worker does to the table.

/// Claims up to `limit` due jobs (oldest `run_at` first) under a new lease, counting an attempt
/// for each; returns them with the claim's token.
pub async fn claim(db: &Db, clock: &Clock, limit: usize) -> Result<(Vec<Job>, String), ApiError> {
    let token = ids::new_id("lease");
    if limit == 0 {
        return Ok((Vec::new(), token));
    }
    let now = clock.now_ms();
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let lease_until = lease_now_ms() + lease::LEASE_MS;
    let rows = match db.backend() {
        Backend::Postgres => {
            sqlx::query(sql::CLAIM_POSTGRES)
                .bind(now)
                .bind(limit)
                .bind(&token)
                .bind(lease_until)
                .fetch_all(db.pool())
                .await?
        }
        Backend::Sqlite => {
            // A read first: WAL readers never wait, while the claim takes the one write lock.
            // Polling an empty queue several times a second should not queue behind writers.
            let due = sqlx::query(sql::ANY_DUE)
                .bind(now)
                .fetch_optional(db.pool())
                .await?;
            if due.is_none() {
                return Ok((Vec::new(), token));
            }
            let mut tx = db.begin_write().await?;
            let rows = sqlx::query(sql::CLAIM_SQLITE)
                .bind(now)
                .bind(limit)
                .bind(&token)
                .bind(lease_until)
                .fetch_all(&mut *tx)
                .await?;
            tx.commit().await?;
            rows
        }
    };
    let mut jobs = rows
        .iter()
        .map(|row| {
            Ok(Job {
                id: row.try_get("id")?,
                kind: row.try_get("kind")?,
                workspace_id: row.try_get("workspace_id")?,
                payload: parse_payload(&row.try_get::<String, _>("payload")?),
                attempt: narrow(row.try_get("attempt")?),
                max_attempts: narrow(row.try_get("max_attempts")?),
                run_at_ms: row.try_get("run_at")?,
            })
        })
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
    // RETURNING promises no order.
    jobs.sort_by(|a, b| (a.run_at_ms, &a.id).cmp(&(b.run_at_ms, &b.id)));
    Ok((jobs, token))
}

/// Extends a running job's lease; a no-op once the lease is lost. On PostgreSQL a job whose row
/// is locked (its fence or outcome is being written) is skipped rather than waited for: that
/// statement extends or ends the lease itself, and a waiting heartbeat would hold a pooled
/// connection.
pub async fn renew(db: &Db, id: &str, token: &str) -> Result<(), ApiError> {
    let statement = match db.backend() {
        Backend::Postgres => sql::RENEW_POSTGRES,
        Backend::Sqlite => sql::RENEW_SQLITE,
    };
    sqlx::query(statement)
        .bind(id)
        .bind(token)
        .bind(lease_now_ms() + lease::LEASE_MS)
        .execute(db.writes())
        .await?;
    Ok(())
}

/// Puts running jobs whose lease lapsed back to `available` (their attempt stays counted), or
/// `discarded` when that was their last attempt; returns how many. Safe to run anywhere, any
/// time: a rescued run that is still alive finds its fence gone at its next commit, and its
/// writes roll back.
pub async fn rescue(db: &Db, clock: &Clock) -> Result<u64, ApiError> {
    let statement = match db.backend() {
        Backend::Postgres => sql::RESCUE_POSTGRES,
        Backend::Sqlite => sql::RESCUE_SQLITE,
    };
    let done = sqlx::query(statement)
        .bind(lease_now_ms())
        .bind(clock.now_ms())
        .bind("its worker stopped renewing the lease (it crashed, hung or was stopped)")
        .execute(db.writes())
        .await?;
    Ok(done.rows_affected())
}

/// How long finished jobs are kept: completed and canceled ones for a day, discarded ones (a
/// failure someone may want to read) for a week.
pub async fn purge(db: &Db, clock: &Clock) -> Result<u64, ApiError> {
    const DAY_MS: i64 = 24 * 60 * 60 * 1000;
    let now = clock.now_ms();
    let done = sqlx::query(
        "delete from jobs where finished_at is not null and \
         ((state in ('completed', 'canceled') and finished_at < $1) \
          or (state = 'discarded' and finished_at < $2))",
    )
    .bind(now - DAY_MS)
    .bind(now - 7 * DAY_MS)
    .execute(db.writes())
    .await?;
    Ok(done.rows_affected())
}

// ---------------------------------------------------------------------------------------------
// Waking workers in this process.

static WAKE: LazyLock<watch::Sender<u64>> = LazyLock::new(|| watch::Sender::new(0));

/// Tells this process's workers that a job was enqueued (done by [`enqueue`]).
pub fn wake() {
    WAKE.send_modify(|count| *count = count.wrapping_add(1));
}

/// A receiver that changes on every [`wake`].
pub fn wakes() -> watch::Receiver<u64> {
    WAKE.subscribe()
}

/// The job table's SQL, every statement in one place; where the backends differ, both versions.
pub mod sql {
    /// Binds: id, kind, workspace_id, payload, max_attempts, run_at, unique_key, now.
    pub const INSERT: &str = "insert into jobs (id, kind, workspace_id, payload, state, attempt, \
         max_attempts, run_at, unique_key, created_at, updated_at) \
         values ($1, $2, $3, $4, 'available', 0, $5, $6, $7, $8, $8) \
         on conflict (kind, unique_key) where unique_key is not null and state in ('available', 'running') \
         do nothing returning id";

    pub const FIND_UNIQUE: &str = "select id from jobs where kind = $1 and unique_key = $2 \
         and state in ('available', 'running')";

    pub const ANY_DUE: &str =
        "select 1 from jobs where state = 'available' and run_at <= $1 limit 1";

    /// Binds: now (service clock), limit, token, lease_until (real time). PostgreSQL: the
    /// candidates are locked as they are picked and rows another claim holds are skipped, so
    /// concurrent claims on several instances never wait for each other nor take one job twice.
    /// `materialized` keeps the planner from folding the locking select into the update.
    pub const CLAIM_POSTGRES: &str = "with due as materialized ( \
           select id from jobs where state = 'available' and run_at <= $1 \
           order by run_at, id limit $2 for update skip locked) \
         update jobs set state = 'running', attempt = jobs.attempt + 1, lease_token = $3, \
           lease_until = $4, updated_at = $1 \
         from due where jobs.id = due.id \
         returning jobs.id, jobs.kind, jobs.workspace_id, jobs.payload, jobs.attempt, \
           jobs.max_attempts, jobs.run_at";

    /// The same claim on SQLite, run inside `BEGIN IMMEDIATE`: writers take turns, so the
    /// select and the update see one state.
    pub const CLAIM_SQLITE: &str = "update jobs set state = 'running', attempt = attempt + 1, \
           lease_token = $3, lease_until = $4, updated_at = $1 \
         where id in (select id from jobs where state = 'available' and run_at <= $1 \
           order by run_at, id limit $2) \
         returning id, kind, workspace_id, payload, attempt, max_attempts, run_at";

    /// Binds: kind, unique_key, due by, run_at, now. The condition repeats the unique-key
    /// index's, so each job is found through it.
    pub const MOVE_DUE_UNIQUE_POSTGRES: &str = "update jobs set run_at = $4, updated_at = $5 \
         where id = (select id from jobs where kind = $1 and unique_key = $2 \
           and state in ('available', 'running') and unique_key is not null \
           and state = 'available' and run_at <= $3 for update skip locked)";

    pub const MOVE_DUE_UNIQUE_SQLITE: &str = "update jobs set run_at = $4, updated_at = $5 \
         where kind = $1 and unique_key = $2 and state in ('available', 'running') \
           and unique_key is not null and state = 'available' and run_at <= $3";

    /// The last statement of a job's transaction that commits before the run ends
    /// ([`JobCtx::commit`](super::JobCtx::commit)). Binds: id, token, lease_until.
    pub const FENCE: &str = "update jobs set lease_until = $3 \
         where id = $1 and lease_token = $2 and state = 'running'";

    /// Binds: id, token, lease_until.
    pub const RENEW_POSTGRES: &str = "update jobs set lease_until = $3 where id = ( \
         select id from jobs where id = $1 and lease_token = $2 and state = 'running' \
         for update skip locked)";

    pub const RENEW_SQLITE: &str = "update jobs set lease_until = $3 \
         where id = $1 and lease_token = $2 and state = 'running'";

    /// Binds: lease now (real time), now (service clock), the error. PostgreSQL skips rows a
    /// fence or an outcome is being written to.
    pub const RESCUE_POSTGRES: &str = "update jobs set \
           state = case when attempt >= max_attempts then 'discarded' else 'available' end, \
           finished_at = case when attempt >= max_attempts then $2 else null end, \
           last_error = $3, lease_token = null, lease_until = null, updated_at = $2 \
         where id in (select id from jobs where state = 'running' and lease_until < $1 \
           for update skip locked)";

    pub const RESCUE_SQLITE: &str = "update jobs set \
           state = case when attempt >= max_attempts then 'discarded' else 'available' end, \
           finished_at = case when attempt >= max_attempts then $2 else null end, \
           last_error = $3, lease_token = null, lease_until = null, updated_at = $2 \
         where state = 'running' and lease_until < $1";

    // The ends of a run. Each is fenced by the claim's token (the last two binds: id, token).

    /// Binds: now, id, token.
    pub const COMPLETE: &str = "update jobs set state = 'completed', finished_at = $1, \
           updated_at = $1, lease_token = null, lease_until = null \
         where id = $2 and lease_token = $3 and state = 'running'";

    /// Binds: now, until, id, token. The attempt is given back.
    pub const SNOOZE: &str = "update jobs set state = 'available', run_at = $2, \
           attempt = case when attempt > 0 then attempt - 1 else 0 end, \
           updated_at = $1, lease_token = null, lease_until = null \
         where id = $3 and lease_token = $4 and state = 'running'";

    /// Binds: now, run_at, error, id, token.
    pub const RETRY: &str = "update jobs set state = 'available', run_at = $2, last_error = $3, \
           updated_at = $1, lease_token = null, lease_until = null \
         where id = $4 and lease_token = $5 and state = 'running'";

    /// Binds: now, error, id, token.
    pub const DISCARD: &str = "update jobs set state = 'discarded', last_error = $2, \
           finished_at = $1, updated_at = $1, lease_token = null, lease_until = null \
         where id = $3 and lease_token = $4 and state = 'running'";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_stops_at_six_hours() {
        for (attempt, base) in [(1, 15_000), (2, 30_000), (3, 60_000), (5, 240_000)] {
            let delay = backoff_ms(attempt);
            assert!(
                (base - base / 10..=base + base / 10).contains(&delay),
                "attempt {attempt}: {delay}"
            );
        }
        assert!(backoff_ms(40) <= MAX_BACKOFF_MS + MAX_BACKOFF_MS / 10);
        assert!(backoff_ms(0) >= 13_500);
    }

    #[test]
    fn errors_say_what_becomes_of_the_job() {
        assert!(JobError::lease_lost().is_lease_lost());
        assert!(JobError::discard("bad").is_discard());
        let from_api: JobError = ApiError::internal("boom").into();
        assert!(!from_api.is_discard() && from_api.message().contains("boom"));
        let bad_payload: JobError = serde_json::from_str::<i64>("x").unwrap_err().into();
        assert!(bad_payload.is_discard());
    }
}
