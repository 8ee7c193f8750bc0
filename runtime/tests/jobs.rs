//! The job queue on a real database (SQLite, or PostgreSQL when `TEST_DATABASE_URL` names a
//! server): enqueueing in the caller's transaction, unique keys, claim order on a moved clock,
//! snoozes, retries, rescue of lapsed leases with the fence, and several worker loops on one
//! database running each job's effect exactly once.
//!
//! The handlers below write rows into `effects`, a table of the test's own, inside the job's
//! fenced transaction, so each test can count what committed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use outreach_runtime::config::JobsConfig;
use outreach_runtime::jobs::{
    self, Finished, JobCtx, JobError, JobOutcome, JobResult, JobState, NewJob,
};
use outreach_runtime::retry::{Face, Retries};
use outreach_runtime::worker::{JobMetrics, Worker, drain, run_claimed};
use outreach_runtime::{ApiError, Clock, Config, Db, Environment, job};
use serde_json::json;
use sqlx::Row;
use tokio::sync::Notify;

async fn insert_effect(job: &JobCtx, what: &str) -> Result<(), JobError> {
    let mut tx = job.tx().await?;
    sqlx::query("insert into effects (job_id, what) values ($1, $2)")
        .bind(job.id())
        .bind(what)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// Writes one effect and completes.
async fn record_effect(job: JobCtx) -> JobResult {
    insert_effect(&job, "done").await?;
    Ok(JobOutcome::Done)
}
job!("test.effect", record_effect);

/// Like `test.effect`, with short pauses before and inside its transaction, so runs overlap.
async fn slow_effect(job: JobCtx) -> JobResult {
    let pause = job.id().bytes().map(u64::from).sum::<u64>() % 3;
    tokio::time::sleep(Duration::from_millis(pause)).await;
    insert_effect(&job, "done").await?;
    tokio::time::sleep(Duration::from_millis(2 - pause.min(2))).await;
    Ok(JobOutcome::Done)
}
job!("test.slow_effect", slow_effect);

/// Snoozes a minute the first time (writing an effect that commits with the snooze), then
/// completes.
async fn snooze_once(job: JobCtx) -> JobResult {
    let mut tx = job.tx().await?;
    let seen: i64 = sqlx::query("select count(*) as n from effects where job_id = $1")
        .bind(job.id())
        .fetch_one(&mut *tx)
        .await?
        .try_get("n")?;
    sqlx::query("insert into effects (job_id, what) values ($1, 'ran')")
        .bind(job.id())
        .execute(&mut *tx)
        .await?;
    if seen == 0 {
        Ok(JobOutcome::Snooze {
            until_ms: job.now_ms() + 60_000,
        })
    } else {
        Ok(JobOutcome::Done)
    }
}
job!("test.snooze_once", snooze_once);

/// Writes an effect, then fails: the effect must roll back.
async fn always_fail(job: JobCtx) -> JobResult {
    insert_effect(&job, "doomed").await?;
    Err(JobError::retry("the far end said no"))
}
job!("test.always_fail", always_fail);

/// Writes an effect, then ends as its payload says: `retry` and `discard` keep the effect,
/// `fail_for_good` (an error that discards) rolls it back.
async fn ends_as_told(job: JobCtx) -> JobResult {
    insert_effect(&job, "wrote").await?;
    match job.payload()["end"].as_str() {
        Some("retry") => Ok(JobOutcome::Retry {
            error: "try later".into(),
        }),
        Some("discard") => Ok(JobOutcome::Discard {
            reason: "not worth it".into(),
        }),
        _ => Err(JobError::discard("broken for good")),
    }
}
job!("test.ends_as_told", ends_as_told);

/// Runs of `test.conflicts` per job.
static CONFLICT_RUNS: std::sync::Mutex<Vec<(String, i64)>> = std::sync::Mutex::new(Vec::new());

/// Writes an effect, then meets a conflict (as a deadlock would) on its first `conflicts` runs;
/// with `commit_first`, commits an intent before anything else.
async fn meets_conflicts(job: JobCtx) -> JobResult {
    if job.payload()["commit_first"] == json!(true) {
        insert_effect(&job, "intent").await?;
        job.commit().await?;
    }
    insert_effect(&job, "wrote").await?;
    let run = {
        let mut runs = CONFLICT_RUNS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match runs.iter_mut().find(|(id, _)| id == job.id()) {
            Some((_, count)) => {
                *count += 1;
                *count
            }
            None => {
                runs.push((job.id().to_owned(), 1));
                1
            }
        }
    };
    if run <= job.payload()["conflicts"].as_i64().unwrap_or(0) {
        return Err(ApiError::contention("database: deadlock detected (a fake one)").into());
    }
    Ok(JobOutcome::Done)
}
job!("test.conflicts", meets_conflicts);

async fn panics(_job: JobCtx) -> JobResult {
    panic!("boom")
}
job!("test.panics", panics);

static INTENT_COMMITTED: Notify = Notify::const_new();
static GATE: Notify = Notify::const_new();

/// Commits an intent, then (on its first attempt only) waits for the test; then writes the
/// send, enqueues a follow-up, and completes: the intent pattern of the outreach engine.
async fn two_phase(job: JobCtx) -> JobResult {
    insert_effect(&job, "intent").await?;
    job.commit().await?;
    if job.attempt() == 1 {
        INTENT_COMMITTED.notify_one();
        GATE.notified().await;
    }
    insert_effect(&job, "sent").await?;
    let mut tx = job.tx().await?;
    jobs::enqueue(
        &mut tx,
        job.clock(),
        NewJob::new("test.effect", json!({"after": job.id()})),
    )
    .await?;
    Ok(JobOutcome::Done)
}
job!("test.two_phase", two_phase);

struct Fixture {
    db: Db,
    clock: Clock,
    config: Arc<Config>,
    url: String,
    _database: Database,
}

enum Database {
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres { admin_url: String, name: String },
}

impl Drop for Database {
    fn drop(&mut self) {
        if let Database::Postgres { admin_url, name } = self {
            let (admin_url, name) = (admin_url.clone(), name.clone());
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(async move {
                    use sqlx::{Connection, Executor};
                    if let Ok(mut conn) = sqlx::PgConnection::connect(&admin_url).await {
                        let drop = format!("drop database if exists {name} with (force)");
                        conn.execute(sqlx::AssertSqlSafe(drop)).await.ok();
                    }
                });
            })
            .join()
            .ok();
        }
    }
}

async fn fixture() -> Fixture {
    let (url, database) = match std::env::var("TEST_DATABASE_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
    {
        Some(admin_url) => {
            use sqlx::{Connection, Executor};
            let name = format!(
                "outreach_jobs_{}",
                outreach_runtime::ids::new_id("db").to_lowercase()
            );
            let mut conn = sqlx::PgConnection::connect(&admin_url)
                .await
                .expect("connect to TEST_DATABASE_URL");
            conn.execute(sqlx::AssertSqlSafe(format!("create database {name}")))
                .await
                .expect("create a database");
            let base = admin_url
                .split('?')
                .next()
                .and_then(|url| url.rsplit_once('/'))
                .map_or(admin_url.as_str(), |(base, _)| base);
            (
                format!("{base}/{name}"),
                Database::Postgres { admin_url, name },
            )
        }
        None => {
            let dir = tempfile::tempdir().expect("a temporary directory");
            (
                format!("sqlite://{}/jobs.db", dir.path().display()),
                Database::Sqlite(dir),
            )
        }
    };
    let db = Db::connect(&url).await.expect("connect");
    db.migrate().await.expect("migrate");
    sqlx::query("create table effects (job_id text not null, what text not null)")
        .execute(db.pool())
        .await
        .expect("the handlers' table");
    Fixture {
        db,
        clock: Clock::default(),
        config: Arc::new(Config::new("http://127.0.0.1:1", Environment::default())),
        url,
        _database: database,
    }
}

impl Fixture {
    async fn enqueue(&self, job: NewJob) -> String {
        let mut tx = self.db.begin_write().await.expect("a transaction");
        let id = jobs::enqueue(&mut tx, &self.clock, job)
            .await
            .expect("enqueued");
        tx.commit().await.expect("commit");
        id
    }

    async fn job(&self, id: &str) -> jobs::JobRecord {
        jobs::get(self.db.pool(), id)
            .await
            .expect("read")
            .expect("the job exists")
    }

    async fn count(&self, sql: &str) -> i64 {
        sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(self.db.pool())
            .await
            .expect("a count")
            .try_get::<i64, _>(0)
            .expect("an integer")
    }

    /// Claims the next due job and runs it as the worker would, counting its in-place retries.
    async fn run_next(&self, retries: &Retries) -> Finished {
        let (claimed, token) = jobs::claim(&self.db, &self.clock, 1).await.expect("claim");
        let job = claimed.into_iter().next().expect("a due job");
        run_claimed(
            &self.db,
            &self.clock,
            self.config.clone(),
            job,
            token,
            retries,
        )
        .await
    }

    /// Runs what is due, one job after the other, as a worker would.
    async fn run_due(&self) -> Vec<(String, Finished)> {
        drain(&self.db, &self.clock, self.config.clone()).await
    }
}

#[tokio::test]
async fn a_job_enqueued_in_a_rolled_back_transaction_does_not_exist() {
    let app = fixture().await;
    let mut tx = app.db.begin_write().await.expect("a transaction");
    let id = jobs::enqueue(&mut tx, &app.clock, NewJob::new("test.effect", json!({})))
        .await
        .expect("enqueued");
    drop(tx);
    assert!(jobs::get(app.db.pool(), &id).await.expect("read").is_none());
    assert_eq!(app.count("select count(*) from jobs").await, 0);
    assert!(app.run_due().await.is_empty());

    let unknown = {
        let mut tx = app.db.begin_write().await.expect("a transaction");
        jobs::enqueue(&mut tx, &app.clock, NewJob::new("test.nobody", json!({}))).await
    };
    let unknown = unknown.expect_err("an unregistered kind is refused");
    assert!(
        unknown.internal.unwrap_or_default().contains("test.nobody"),
        "the refusal names the kind"
    );
}

#[tokio::test]
async fn enqueueing_a_unique_key_twice_while_unfinished_returns_the_first_job() {
    let app = fixture().await;
    let job = || NewJob::new("test.effect", json!({"n": 1})).unique_key("enr_1:0");
    let first = app.enqueue(job()).await;
    let again = app.enqueue(job()).await;
    assert_eq!(first, again);
    let other_kind = app
        .enqueue(NewJob::new("test.slow_effect", json!({})).unique_key("enr_1:0"))
        .await;
    assert_ne!(first, other_kind, "keys are unique per kind");
    assert_eq!(app.count("select count(*) from jobs").await, 2);

    // Once the job has run, the key is free again.
    let ran = app.run_due().await;
    assert!(
        ran.contains(&(first.clone(), Finished::Completed)),
        "{ran:?}"
    );
    let next = app.enqueue(job()).await;
    assert_ne!(next, first);

    // A canceled job frees its key too.
    let mut tx = app.db.begin_write().await.expect("a transaction");
    assert!(
        jobs::cancel_unique(&mut tx, &app.clock, "test.effect", "enr_1:0")
            .await
            .expect("cancel")
    );
    tx.commit().await.expect("commit");
    assert_eq!(app.job(&next).await.state, JobState::Canceled);
    assert_ne!(app.enqueue(job()).await, next);
}

#[tokio::test]
async fn claims_take_due_jobs_oldest_first_and_wait_for_run_at_on_the_service_clock() {
    let app = fixture().await;
    let now = app.clock.now_ms();
    let late = app
        .enqueue(NewJob::new("test.effect", json!({})).run_at(now + 2_000))
        .await;
    let soon = app
        .enqueue(NewJob::new("test.effect", json!({})).run_at(now + 1_000))
        .await;
    let older = app
        .enqueue(NewJob::new("test.effect", json!({})).run_at(now - 10))
        .await;
    let oldest = app
        .enqueue(NewJob::new("test.effect", json!({})).run_at(now - 20))
        .await;

    let (first, _) = jobs::claim(&app.db, &app.clock, 1).await.expect("claim");
    assert_eq!(ids(&first), std::slice::from_ref(&oldest));
    assert_eq!(first[0].attempt, 1);
    let (second, _) = jobs::claim(&app.db, &app.clock, 10).await.expect("claim");
    assert_eq!(ids(&second), [older]);
    assert!(app.run_due().await.is_empty(), "the others are not due");

    app.clock.advance_ms(1_500);
    let (third, _) = jobs::claim(&app.db, &app.clock, 10).await.expect("claim");
    assert_eq!(ids(&third), [soon]);
    app.clock.advance_ms(1_000);
    let (fourth, _) = jobs::claim(&app.db, &app.clock, 10).await.expect("claim");
    assert_eq!(ids(&fourth), [late]);
    assert_eq!(app.job(&oldest).await.state, JobState::Running);
}

fn ids(jobs: &[jobs::Job]) -> Vec<String> {
    jobs.iter().map(|job| job.id.clone()).collect()
}

#[tokio::test]
async fn a_snooze_moves_run_at_keeps_the_writes_and_gives_the_attempt_back() {
    let app = fixture().await;
    let id = app
        .enqueue(NewJob::new("test.snooze_once", json!({})).max_attempts(1))
        .await;
    assert_eq!(app.run_due().await, [(id.clone(), Finished::Snoozed)]);
    let snoozed = app.job(&id).await;
    assert_eq!(
        (snoozed.state, snoozed.attempt),
        (JobState::Available, 0),
        "the attempt is given back"
    );
    assert!(snoozed.run_at_ms >= app.clock.now_ms() + 59_000);
    assert_eq!(app.count("select count(*) from effects").await, 1);
    assert!(
        app.run_due().await.is_empty(),
        "not due before the snooze ends"
    );

    app.clock.advance_ms(60_000);
    // One attempt allowed, and it is still there to use.
    assert_eq!(app.run_due().await, [(id.clone(), Finished::Completed)]);
    let done = app.job(&id).await;
    assert_eq!((done.state, done.attempt), (JobState::Completed, 1));
    assert_eq!(app.count("select count(*) from effects").await, 2);
}

#[tokio::test]
async fn a_failing_job_backs_off_then_is_discarded_with_its_last_error_and_no_writes() {
    let app = fixture().await;
    let id = app
        .enqueue(NewJob::new("test.always_fail", json!({})).max_attempts(3))
        .await;
    assert_eq!(app.run_due().await, [(id.clone(), Finished::Retried)]);
    let first = app.job(&id).await;
    assert_eq!((first.state, first.attempt), (JobState::Available, 1));
    let delay = first.run_at_ms - app.clock.now_ms();
    assert!((13_000..=16_500).contains(&delay), "first backoff {delay}");
    assert_eq!(first.last_error.as_deref(), Some("the far end said no"));
    assert!(app.run_due().await.is_empty(), "not before the backoff");

    app.clock.advance_ms(16_600);
    assert_eq!(app.run_due().await, [(id.clone(), Finished::Retried)]);
    let second = app.job(&id).await;
    let delay = second.run_at_ms - app.clock.now_ms();
    assert!(
        (26_000..=33_500).contains(&delay),
        "second backoff doubles: {delay}"
    );

    app.clock.advance_ms(33_600);
    assert_eq!(app.run_due().await, [(id.clone(), Finished::Discarded)]);
    let last = app.job(&id).await;
    assert_eq!((last.state, last.attempt), (JobState::Discarded, 3));
    let error = last.last_error.unwrap_or_default();
    assert!(
        error.contains("the far end said no") && error.contains("no attempts left"),
        "{error}"
    );
    assert!(last.finished_at.is_some());
    assert_eq!(
        app.count("select count(*) from effects").await,
        0,
        "a failed attempt's writes roll back"
    );
}

#[tokio::test]
async fn a_panicking_handler_is_a_failed_attempt() {
    let app = fixture().await;
    let id = app.enqueue(NewJob::new("test.panics", json!({}))).await;
    assert_eq!(app.run_due().await, [(id.clone(), Finished::Retried)]);
    let job = app.job(&id).await;
    assert_eq!(job.state, JobState::Available);
    assert!(
        job.last_error
            .unwrap_or_default()
            .contains("panicked: boom"),
        "the panic is the last error"
    );
}

#[tokio::test]
async fn a_lapsed_lease_is_rescued_and_the_old_owners_writes_never_land() {
    let app = fixture().await;
    let id = app.enqueue(NewJob::new("test.two_phase", json!({}))).await;
    let (claimed, old_token) = jobs::claim(&app.db, &app.clock, 1).await.expect("claim");
    let old_owner = {
        let (db, clock, config) = (app.db.clone(), app.clock.clone(), app.config.clone());
        let job = claimed.into_iter().next().expect("the job");
        tokio::spawn(async move {
            run_claimed(&db, &clock, config, job, old_token, &Retries::default()).await
        })
    };
    // The old owner committed its intent and is now stalled (as if its process hung).
    INTENT_COMMITTED.notified().await;

    // Its lease lapses; the rescue puts the job back, with the attempt counted.
    sqlx::query("update jobs set lease_until = 0 where id = $1")
        .bind(&id)
        .execute(app.db.pool())
        .await
        .expect("lapse the lease");
    assert_eq!(jobs::rescue(&app.db, &app.clock).await.expect("rescue"), 1);
    let rescued = app.job(&id).await;
    assert_eq!((rescued.state, rescued.attempt), (JobState::Available, 1));

    // A new owner runs it to the end (and then its follow-up).
    let ran = app.run_due().await;
    assert_eq!(
        ran.first(),
        Some(&(id.clone(), Finished::Completed)),
        "{ran:?}"
    );
    assert_eq!(ran.len(), 2, "{ran:?}");

    // The old owner wakes up: its next fenced transaction is refused, so its send, its
    // follow-up job and its completion never land.
    GATE.notify_one();
    let old = old_owner.await.expect("the old owner's task");
    assert_eq!(old, Finished::LeaseLost);
    let done = app.job(&id).await;
    assert_eq!((done.state, done.attempt), (JobState::Completed, 2));
    assert_eq!(
        app.count("select count(*) from effects where what = 'sent'")
            .await,
        1
    );
    assert_eq!(
        app.count("select count(*) from effects where what = 'intent'")
            .await,
        2,
        "each run committed its intent before the stall"
    );
    assert_eq!(
        app.count("select count(*) from jobs where kind = 'test.effect'")
            .await,
        1,
        "only the new owner's follow-up was enqueued"
    );
}

#[tokio::test]
async fn a_job_s_open_transaction_holds_no_job_row_and_rolls_back_at_its_fence_once_rescued() {
    let app = fixture().await;
    let id = app.enqueue(NewJob::new("test.effect", json!({}))).await;
    let (claimed, token) = jobs::claim(&app.db, &app.clock, 1).await.expect("claim");
    let job = claimed.into_iter().next().expect("the job");
    let ctx = JobCtx::new(
        app.db.clone(),
        app.clock.clone(),
        app.config.clone(),
        job,
        token,
    );
    // The handler's transaction is open with a write in it...
    insert_effect(&ctx, "done").await.expect("a write");
    if app.db.backend() == outreach_runtime::Backend::Postgres {
        // ...and holds no lock on the job's row: the fence is taken at commit, last, so a
        // job's transaction takes the domain's rows before its own (no writer of the domain
        // needs to lock a job first).
        let mut other = app.db.pool().begin().await.expect("another transaction");
        let free = sqlx::query("select id from jobs where id = $1 for update nowait")
            .bind(&id)
            .fetch_optional(&mut *other)
            .await;
        assert!(
            matches!(free, Ok(Some(_))),
            "the job row is free: {:?}",
            free.map(|row| row.is_some())
        );
        other.rollback().await.expect("rollback");
        // Its lease lapses (the handler stalled) and the rescue takes the job back.
        sqlx::query("update jobs set lease_until = 0 where id = $1")
            .bind(&id)
            .execute(app.db.pool())
            .await
            .expect("lapse the lease");
        assert_eq!(jobs::rescue(&app.db, &app.clock).await.expect("rescue"), 1);
        // The old run's fence at commit finds the job no longer its own: nothing lands.
        assert_eq!(ctx.finish(Ok(JobOutcome::Done)).await, Finished::LeaseLost);
        assert_eq!(app.job(&id).await.state, JobState::Available);
        assert_eq!(
            app.count("select count(*) from effects").await,
            0,
            "the rescued run's write rolled back"
        );
    } else {
        // SQLite has one writer: the rescue waits for the open transaction, which commits.
        assert_eq!(ctx.finish(Ok(JobOutcome::Done)).await, Finished::Completed);
        assert_eq!(app.job(&id).await.state, JobState::Completed);
        assert_eq!(app.count("select count(*) from effects").await, 1);
    }
}

#[tokio::test]
async fn three_worker_loops_on_one_database_run_each_effect_exactly_once() {
    let app = fixture().await;
    const JOBS: usize = 1_000;
    {
        let mut tx = app.db.begin_write().await.expect("a transaction");
        for n in 0..JOBS {
            jobs::enqueue(
                &mut tx,
                &app.clock,
                NewJob::new("test.slow_effect", json!({"n": n})).max_attempts(1_000),
            )
            .await
            .expect("enqueued");
        }
        tx.commit().await.expect("commit");
    }
    let mut config = Config::new("http://127.0.0.1:1", Environment::default());
    config.jobs = JobsConfig {
        workers: 4,
        poll_interval: Duration::from_millis(20),
    };
    let config = Arc::new(config);
    let mut workers = Vec::new();
    let mut metrics = Vec::new();
    for _ in 0..3 {
        // Each loop with a pool of its own, as three instances would have.
        let db = Db::connect(&app.url).await.expect("connect");
        let counters = JobMetrics::default();
        workers.push(Worker::start(
            db,
            app.clock.clone(),
            config.clone(),
            counters.clone(),
        ));
        metrics.push(counters);
    }
    // Chaos: leases keep lapsing under the workers' feet, and the rescue takes the jobs back.
    let chaos_rounds = Arc::new(AtomicU64::new(0));
    let chaos = {
        let (db, clock, rounds) = (app.db.clone(), app.clock.clone(), chaos_rounds.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(15)).await;
                sqlx::query("update jobs set lease_until = 0 where state = 'running'")
                    .execute(db.pool())
                    .await
                    .ok();
                jobs::rescue(&db, &clock).await.ok();
                rounds.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    loop {
        let done = app
            .count("select count(*) from jobs where state = 'completed'")
            .await;
        if done == JOBS as i64 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {done} of {JOBS} jobs completed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    chaos.abort();
    for worker in workers {
        worker.shutdown(Duration::from_secs(5)).await;
    }
    assert_eq!(app.count("select count(*) from effects").await, JOBS as i64);
    assert_eq!(
        app.count("select count(distinct job_id) from effects")
            .await,
        JOBS as i64,
        "every job's effect committed exactly once"
    );
    let rescued: u64 = metrics.iter().map(|m| m.get("rescued")).sum();
    let lost: u64 = metrics.iter().map(|m| m.get("lease_lost")).sum();
    let completed: u64 = metrics.iter().map(|m| m.get("completed")).sum();
    assert_eq!(completed, JOBS as u64);
    // Every loop ran jobs; whether a slow one also won a commit before the chaos took its lease
    // depends on the machine's load, so completing is asked of two loops, not all three.
    assert!(
        metrics
            .iter()
            .all(|m| m.get("completed") + m.get("lease_lost") > 0),
        "every loop took part"
    );
    assert!(
        metrics.iter().filter(|m| m.get("completed") > 0).count() >= 2,
        "several loops completed jobs"
    );
    println!(
        "chaos rounds {}, rescued by loops {rescued}, runs that lost their lease {lost}, attempts {}",
        chaos_rounds.load(Ordering::Relaxed),
        app.count("select cast(sum(attempt) as bigint) from jobs")
            .await
    );
}

#[tokio::test]
async fn an_enqueue_wakes_a_worker_at_once() {
    let app = fixture().await;
    let mut config = Config::new("http://127.0.0.1:1", Environment::default());
    config.jobs = JobsConfig {
        workers: 1,
        // Far longer than the test waits: only the wake can start the job in time.
        poll_interval: Duration::from_secs(30),
    };
    let worker = Worker::start(
        app.db.clone(),
        app.clock.clone(),
        Arc::new(config),
        JobMetrics::default(),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let id = app.enqueue(NewJob::new("test.effect", json!({}))).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while app.job(&id).await.state != JobState::Completed {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the job did not run"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    worker.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn retry_and_discard_outcomes_keep_the_writes_and_a_discarding_error_drops_them() {
    let app = fixture().await;
    let retry = app
        .enqueue(NewJob::new("test.ends_as_told", json!({"end": "retry"})))
        .await;
    let discard = app
        .enqueue(NewJob::new("test.ends_as_told", json!({"end": "discard"})))
        .await;
    let broken = app
        .enqueue(NewJob::new("test.ends_as_told", json!({"end": "error"})))
        .await;
    let mut ran = app.run_due().await;
    ran.sort_by(|a, b| a.0.cmp(&b.0));
    let mut expected = vec![
        (retry.clone(), Finished::Retried),
        (discard.clone(), Finished::Discarded),
        (broken.clone(), Finished::Discarded),
    ];
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(ran, expected);
    let retried = app.job(&retry).await;
    assert_eq!(
        (retried.state, retried.last_error.as_deref()),
        (JobState::Available, Some("try later"))
    );
    let discarded = app.job(&discard).await;
    assert_eq!(
        (discarded.state, discarded.last_error.as_deref()),
        (JobState::Discarded, Some("not worth it"))
    );
    assert_eq!(app.job(&broken).await.state, JobState::Discarded);
    let written = |id: &str| format!("select count(*) from effects where job_id = '{id}'");
    assert_eq!(app.count(&written(&retry)).await, 1);
    assert_eq!(app.count(&written(&discard)).await, 1);
    assert_eq!(app.count(&written(&broken)).await, 0);
}

#[tokio::test]
async fn only_a_job_that_has_not_started_can_be_canceled() {
    let app = fixture().await;
    let waiting = app
        .enqueue(NewJob::new("test.effect", json!({})).run_at(app.clock.now_ms() + 60_000))
        .await;
    let started = app.enqueue(NewJob::new("test.effect", json!({}))).await;
    let (claimed, _) = jobs::claim(&app.db, &app.clock, 10).await.expect("claim");
    assert_eq!(ids(&claimed), std::slice::from_ref(&started));
    let mut tx = app.db.begin_write().await.expect("a transaction");
    assert!(
        jobs::cancel(&mut tx, &app.clock, &waiting)
            .await
            .expect("cancel")
    );
    assert!(
        !jobs::cancel(&mut tx, &app.clock, &started)
            .await
            .expect("cancel")
    );
    tx.commit().await.expect("commit");
    assert_eq!(app.job(&waiting).await.state, JobState::Canceled);
    assert_eq!(app.job(&started).await.state, JobState::Running);
    app.clock.advance_ms(120_000);
    assert!(app.run_due().await.is_empty(), "a canceled job never runs");
}

#[tokio::test]
async fn a_conflict_runs_the_handler_again_in_place_within_the_same_attempt() {
    let app = fixture().await;
    let id = app
        .enqueue(NewJob::new("test.conflicts", json!({"conflicts": 2})))
        .await;
    let retries = Retries::default();
    let finished = app.run_next(&retries).await;
    assert_eq!(finished, Finished::Completed);
    let record = app.job(&id).await;
    assert_eq!(record.attempt, 1, "no attempt was spent on the conflicts");
    assert_eq!(
        app.count("select count(*) from effects where what = 'wrote'")
            .await,
        1,
        "only the last run's writes landed"
    );
    assert_eq!(retries.get(Face::Job, "retried"), 2);
    assert_eq!(retries.get(Face::Job, "exhausted"), 0);
}

#[tokio::test]
async fn a_run_that_committed_before_its_conflict_goes_back_to_the_queue() {
    let app = fixture().await;
    let id = app
        .enqueue(NewJob::new(
            "test.conflicts",
            json!({"conflicts": 1, "commit_first": true}),
        ))
        .await;
    let retries = Retries::default();
    let finished = app.run_next(&retries).await;
    assert_eq!(
        finished,
        Finished::Retried,
        "it may have reached the outside world"
    );
    assert_eq!(retries.get(Face::Job, "retried"), 0);
    assert_eq!(app.job(&id).await.attempt, 1);
    assert_eq!(
        (
            app.count("select count(*) from effects where what = 'intent'")
                .await,
            app.count("select count(*) from effects where what = 'wrote'")
                .await
        ),
        (1, 0)
    );
}
