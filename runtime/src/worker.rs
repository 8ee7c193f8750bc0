//! The worker: the loop that claims due jobs and runs their handlers, a few at a time.
//!
//! One loop per instance runs up to `workers` handlers at once ([`crate::config::JobsConfig`]).
//! It claims as many due jobs as it has free slots in one statement ([`jobs::claim`]), runs
//! each on a task of its own with a [`Heartbeat`] renewing its lease, and records the outcome
//! fenced by the claim's token ([`JobCtx`]). It looks for work every poll interval of real
//! time, at once after an enqueue in the same process, and again as soon as a slot frees while
//! a backlog is due. It also rescues lapsed leases every few seconds, since a worker-only
//! deployment must not wait for the slower recovery sweep.
//!
//! Shutting down: [`Worker::stop`] stops the claiming; [`Worker::shutdown`] then waits for the
//! running handlers up to a grace period and drops what is left. A dropped handler's open
//! transaction rolls back and its heartbeat stops, so its lease lapses and another instance (or
//! this one, after a restart) rescues the job: nothing of the dropped run lands.
//!
//! The metrics ([`JobMetrics`]) are this instance's counters, registered on its `/metrics`.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::{JoinHandle, JoinSet};

use crate::clock::Clock;
use crate::config::Config;
use crate::db::Db;
use crate::jobs::{self, Finished, Job, JobCtx, JobError};
use crate::lease::{self, Heartbeat};
use crate::retry::{self, Retries};

/// How long [`Worker::shutdown`] waits for running handlers by default.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How often the loop rescues lapsed leases (one lease long).
const RESCUE_EVERY: Duration = Duration::from_millis(lease::LEASE_MS as u64);

/// After a wake, the loop looks again this soon while it finds nothing: the enqueue that woke
/// it may not have committed yet.
const QUICK_REPOLLS: [Duration; 3] = [
    Duration::from_millis(10),
    Duration::from_millis(40),
    Duration::from_millis(100),
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    event: &'static str,
}

/// Counts of what this instance's worker did, by `event`: `claimed`, `completed`, `retried`,
/// `snoozed`, `discarded`, `rescued`, `lease_lost`.
#[derive(Clone, Default)]
pub struct JobMetrics {
    events: Family<EventLabels, Counter>,
    /// Runs whose handler met a conflict and ran again in place ([`crate::retry`]); shared with
    /// dispatch, which counts its own face.
    retries: Retries,
}

impl JobMetrics {
    /// Counters whose in-place retries are counted in `retries` (the instance's, which dispatch
    /// shares).
    pub fn with_retries(retries: Retries) -> Self {
        Self {
            events: Family::default(),
            retries,
        }
    }

    /// Adds the counters to an instance's metrics registry, the retries' included.
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "outreach_job_events",
            "Jobs this instance claimed, completed, retried, snoozed, discarded, rescued, or lost the lease of",
            self.events.clone(),
        );
        self.retries.register(registry);
    }

    /// The in-place retries of this instance's job runs and requests.
    pub fn retries(&self) -> &Retries {
        &self.retries
    }

    fn add(&self, event: &'static str, count: u64) {
        self.events
            .get_or_create(&EventLabels { event })
            .inc_by(count);
    }

    /// The count of one event so far.
    pub fn get(&self, event: &'static str) -> u64 {
        self.events.get_or_create(&EventLabels { event }).get()
    }
}

/// A running worker loop.
pub struct Worker {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// Stops a worker's claiming; cheap to clone into a shutdown future.
#[derive(Clone)]
pub struct StopClaiming(watch::Sender<bool>);

impl StopClaiming {
    pub fn stop(&self) {
        self.0.send_replace(true);
    }
}

struct Shared {
    db: Db,
    clock: Clock,
    config: Arc<Config>,
    metrics: JobMetrics,
}

impl Worker {
    /// Starts the loop with `config.jobs.workers` slots (at least one).
    pub fn start(db: Db, clock: Clock, config: Arc<Config>, metrics: JobMetrics) -> Self {
        let (stop, stopped) = watch::channel(false);
        let shared = Arc::new(Shared {
            db,
            clock,
            config,
            metrics,
        });
        let task = tokio::spawn(run(shared, stopped));
        Self { stop, task }
    }

    /// A handle that stops the claiming (for a shutdown signal).
    pub fn stopper(&self) -> StopClaiming {
        StopClaiming(self.stop.clone())
    }

    /// Stops claiming now; running handlers go on.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// Stops claiming, waits up to `grace` for the running handlers, then drops the rest (their
    /// leases lapse and the jobs are rescued).
    pub async fn shutdown(self, grace: Duration) {
        self.stop.send_replace(true);
        let mut task = self.task;
        if tokio::time::timeout(grace, &mut task).await.is_err() {
            tracing::warn!(
                grace_seconds = grace.as_secs(),
                "job handlers still running after the grace period were stopped; their jobs will be rescued"
            );
            task.abort();
            task.await.ok();
        }
    }
}

/// The loop: claim, run, wait; until stopped, then let the running handlers finish.
async fn run(shared: Arc<Shared>, mut stopped: watch::Receiver<bool>) {
    let slots = shared.config.jobs.workers.max(1);
    let poll = shared.config.jobs.poll_interval;
    let semaphore = Arc::new(Semaphore::new(slots));
    let mut running = JoinSet::new();
    let mut wakes = jobs::wakes();
    let mut last_rescue: Option<tokio::time::Instant> = None;
    let mut quick = QUICK_REPOLLS.len();
    loop {
        if *stopped.borrow() {
            break;
        }
        sync_test_clock(&shared).await;
        if last_rescue.is_none_or(|at| at.elapsed() >= RESCUE_EVERY) {
            last_rescue = Some(tokio::time::Instant::now());
            match jobs::rescue(&shared.db, &shared.clock).await {
                Ok(0) => {}
                Ok(rescued) => {
                    shared.metrics.add("rescued", rescued);
                    tracing::info!(rescued, "rescued jobs whose lease lapsed");
                }
                Err(error) => {
                    tracing::warn!(error = %error.message, cause = ?error.internal, "could not rescue jobs");
                }
            }
        }
        let free = semaphore.available_permits();
        let mut claimed = 0;
        if free > 0 {
            match jobs::claim(&shared.db, &shared.clock, free).await {
                Ok((batch, token)) => {
                    claimed = batch.len();
                    shared.metrics.add("claimed", claimed as u64);
                    for job in batch {
                        let Ok(permit) = semaphore.clone().try_acquire_owned() else {
                            unreachable!("a job is claimed only for a free slot");
                        };
                        running.spawn(run_job(shared.clone(), job, token.clone(), permit));
                    }
                }
                Err(error) => {
                    tracing::warn!(error = %error.message, cause = ?error.internal, "could not claim jobs");
                }
            }
        }
        while running.try_join_next().is_some() {}
        // A full batch means more may be due: claim again as soon as a slot frees.
        let backlog = free > 0 && claimed == free;
        if backlog && semaphore.available_permits() > 0 {
            continue;
        }
        let delay = if claimed == 0 && quick < QUICK_REPOLLS.len() {
            quick += 1;
            QUICK_REPOLLS[quick - 1]
        } else {
            poll
        };
        let deadline = tokio::time::Instant::now() + delay;
        loop {
            tokio::select! {
                _ = stopped.changed() => break,
                changed = wakes.changed() => {
                    if changed.is_ok() {
                        quick = 0;
                    }
                    break;
                }
                Some(_) = running.join_next(), if !running.is_empty() => {
                    if backlog {
                        break;
                    }
                }
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
    }
    while running.join_next().await.is_some() {}
}

/// The one place where the loop learns the service time before it looks for due jobs.
///
/// Today each process's [`Clock`] is its own, so there is nothing to do. When instances share a
/// test clock (`serve --test-clock`, every instance on one database sees the same time), read
/// the shared offset here and move `shared.clock` to it, so the due check below sees the time
/// the test moved to.
async fn sync_test_clock(shared: &Shared) {
    if let Err(error) = shared.clock.sync(&shared.db).await {
        tracing::warn!(%error, "could not read the shared test clock");
    }
}

/// Aborts a task when dropped, so a handler dropped at shutdown stops with its worker.
struct AbortOnDrop(JoinHandle<jobs::JobResult>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs one claimed job in a slot and counts how it ended.
async fn run_job(shared: Arc<Shared>, job: Job, token: String, _slot: OwnedSemaphorePermit) {
    let finished = run_claimed(
        &shared.db,
        &shared.clock,
        shared.config.clone(),
        job,
        token,
        shared.metrics.retries(),
    )
    .await;
    let event = match finished {
        Finished::Completed => "completed",
        Finished::Snoozed => "snoozed",
        Finished::Retried => "retried",
        Finished::Discarded => "discarded",
        Finished::LeaseLost => "lease_lost",
        Finished::Unrecorded => "unrecorded",
    };
    shared.metrics.add(event, 1);
}

/// Runs every due job, one after the other on the caller's task, until none is due (jobs that
/// the runs enqueue or snooze into the past included); returns how each run ended. For tests and
/// tools that want the queue drained at a point in (moved) time without a loop running.
pub async fn drain(db: &Db, clock: &Clock, config: Arc<Config>) -> Vec<(String, Finished)> {
    let mut finished = Vec::new();
    loop {
        let (batch, token) = match jobs::claim(db, clock, 100).await {
            Ok(claimed) => claimed,
            Err(error) => {
                tracing::warn!(error = %error.message, cause = ?error.internal, "could not claim jobs");
                break;
            }
        };
        if batch.is_empty() {
            break;
        }
        for job in batch {
            let id = job.id.clone();
            let end = run_claimed(
                db,
                clock,
                config.clone(),
                job,
                token.clone(),
                &Retries::default(),
            )
            .await;
            finished.push((id, end));
        }
    }
    finished
}

/// Runs one job claimed with `token` (by [`jobs::claim`]) as the loop does: its handler on a
/// task of its own (a panic is a failed attempt), a heartbeat renewing its lease while it runs,
/// then its outcome, fenced. A handler that met a conflict before committing anything runs again
/// at once, a few times ([`crate::retry`], counted in `retries`). Public so tests and tools can
/// run a claimed job step by step.
pub async fn run_claimed(
    db: &Db,
    clock: &Clock,
    config: Arc<Config>,
    job: Job,
    token: String,
    retries: &Retries,
) -> Finished {
    let heartbeat = {
        let (db, id, token) = (db.clone(), job.id.clone(), token.clone());
        Heartbeat::start("job", move || {
            let (db, id, token) = (db.clone(), id.clone(), token.clone());
            async move { jobs::renew(&db, &id, &token).await }
        })
    };
    let (id, kind) = (job.id.clone(), job.kind.clone());
    let ctx = JobCtx::new(db.clone(), clock.clone(), config, job, token);
    let mut tries = 0;
    let result = loop {
        tries += 1;
        let result = run_handler(&ctx, &kind).await;
        match &result {
            Err(error) if error.is_contention() && !ctx.has_committed() => {
                if tries >= retry::TRIES {
                    retries.exhausted(retry::Face::Job);
                    break result;
                }
                retries.retried(retry::Face::Job);
                tracing::info!(job = %id, %kind, try_number = tries, error = %error,
                    "a job met a conflict and runs again");
                ctx.rollback().await;
                retry::pause(tries).await;
            }
            _ => break result,
        }
    };
    if let Err(error) = &result {
        tracing::info!(job = %id, %kind, error = %error, "a job's attempt failed");
    }
    let finished = ctx.finish(result).await;
    if finished == Finished::LeaseLost {
        tracing::warn!(job = %id, %kind, "a job's lease was lost; this run's writes were dropped");
    }
    drop(heartbeat);
    finished
}

/// Runs the handler of `kind` once on a task of its own; a panic is a failed attempt.
async fn run_handler(ctx: &JobCtx, kind: &str) -> jobs::JobResult {
    let Some(handler) = jobs::handler(kind) else {
        return Err(JobError::retry(format!(
            "no handler for the job kind `{kind}` is registered in this process"
        )));
    };
    let mut task = AbortOnDrop(tokio::spawn(handler(ctx.clone())));
    match (&mut task.0).await {
        Ok(result) => result,
        Err(error) if error.is_panic() => {
            let panic = error.into_panic();
            let text = panic
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(JobError::retry(format!("the handler panicked: {text}")))
        }
        Err(_) => Err(JobError::retry("the handler was cancelled")),
    }
}
