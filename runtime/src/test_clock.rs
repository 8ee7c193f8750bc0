//! The shared test clock: one offset in the database that every instance adds to its time.
//!
//! `outreach serve --test-clock` lets a test, a demo or an integrator run weeks of outreach in
//! seconds (`advance_clock`). Several instances may serve one database, and a job worker may run
//! in another process, so the offset cannot live in one process's memory: it is the single row of
//! `test_clock`, re-read by [`Clock::sync`] (dispatch calls it at the start of every request on a
//! shared clock; the job worker's loop calls it too). Without `--test-clock` nothing here runs and
//! the clock is the system's.

use sqlx::Row;

use crate::clock::Clock;
use crate::db::Db;
use crate::error::{ApiError, ErrorCode};
use crate::ids;
use crate::lease::{Heartbeat, LEASE_MS, now_ms as lease_now_ms};

impl Clock {
    /// Re-reads the stored offset into a shared test clock; does nothing on any other clock.
    pub async fn sync(&self, db: &Db) -> Result<(), ApiError> {
        if !self.is_shared() {
            return Ok(());
        }
        let row = sqlx::query("select offset_ms from test_clock where id = 1")
            .fetch_optional(db.pool())
            .await?;
        let offset = match row {
            Some(row) => row.try_get::<i64, _>("offset_ms")?,
            None => 0,
        };
        self.set_shared_offset_ms(offset);
        Ok(())
    }
}

/// Moves the shared test clock forward to `at_ms` for every instance on the database, unless it
/// already shows that time or later; answers the time it now shows. The offset is set, not
/// added to, so two callers moving to the same moment at once move the clock there once.
pub async fn advance_to(db: &Db, clock: &Clock, at_ms: i64) -> Result<i64, ApiError> {
    require_shared(clock)?;
    clock.sync(db).await?;
    if at_ms <= clock.now_ms() {
        return Ok(clock.now_ms());
    }
    raise_offset_to(db, clock, at_ms - clock.unshared_now_ms()).await
}

/// The offset the shared test clock adds to the system's time now (0 before any move).
pub async fn offset_ms(db: &Db, clock: &Clock) -> Result<i64, ApiError> {
    require_shared(clock)?;
    clock.sync(db).await?;
    Ok(clock.shared_offset_ms())
}

/// Sets the shared test clock's offset to `offset_ms` unless it is already that or more, for
/// every instance on the database; answers the time the clock now shows.
pub async fn raise_offset_to(db: &Db, clock: &Clock, offset_ms: i64) -> Result<i64, ApiError> {
    require_shared(clock)?;
    let mut tx = db.begin_write().await?;
    sqlx::query(
        "insert into test_clock (id, offset_ms) values (1, $1) \
         on conflict (id) do update set offset_ms = case when excluded.offset_ms > test_clock.offset_ms \
         then excluded.offset_ms else test_clock.offset_ms end",
    )
    .bind(offset_ms)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    clock.sync(db).await?;
    Ok(clock.now_ms())
}

/// Refuses, with a 409 `invalid_state` saying how to start one, a clock that is not the shared
/// test clock (a server started without `--test-clock`).
pub fn require_shared(clock: &Clock) -> Result<(), ApiError> {
    if clock.is_shared() {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::INVALID_STATE,
        "The clock cannot be moved: the server was not started with --test-clock. Start it with \
         `outreach serve --test-clock` (refused in production) to use advance_clock.",
    ))
}

/// The hold on playing out the shared test clock: one play-out at a time on the database (see
/// `advance_clock`). Renewed while alive; [`PlayLease::release`] frees it, and a holder that
/// died lets it lapse within [`LEASE_MS`].
pub struct PlayLease {
    db: Db,
    token: String,
    _renewal: Heartbeat,
}

/// How long [`hold_play`] waits for another play-out to end.
const PLAY_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// Takes the hold on playing out the clock, waiting (up to ten minutes) for another holder to
/// end; a 409 `invalid_state` past that.
pub async fn hold_play(db: &Db, clock: &Clock) -> Result<PlayLease, ApiError> {
    require_shared(clock)?;
    let token = ids::new_id("play");
    let started = std::time::Instant::now();
    loop {
        let now = lease_now_ms();
        let taken = sqlx::query(
            "insert into test_clock (id, offset_ms, played_by, played_until) values (1, 0, $1, $2) \
             on conflict (id) do update set played_by = excluded.played_by, played_until = excluded.played_until \
             where test_clock.played_until is null or test_clock.played_until < $3",
        )
        .bind(&token)
        .bind(now + LEASE_MS)
        .bind(now)
        .execute(db.writes())
        .await?;
        if taken.rows_affected() == 1 {
            break;
        }
        if started.elapsed() > PLAY_WAIT {
            return Err(ApiError::new(
                ErrorCode::INVALID_STATE,
                "Another advance_clock has been playing out the clock for ten minutes; try again \
                 when it ends.",
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let renewal = {
        let (db, token) = (db.clone(), token.clone());
        Heartbeat::start("test clock play-out", move || {
            let (db, token) = (db.clone(), token.clone());
            async move {
                sqlx::query(
                    "update test_clock set played_until = $1 where id = 1 and played_by = $2",
                )
                .bind(lease_now_ms() + LEASE_MS)
                .bind(&token)
                .execute(db.writes())
                .await?;
                Ok(())
            }
        })
    };
    Ok(PlayLease {
        db: db.clone(),
        token,
        _renewal: renewal,
    })
}

impl PlayLease {
    /// Frees the hold for the next play-out.
    pub async fn release(self) -> Result<(), ApiError> {
        sqlx::query(
            "update test_clock set played_by = null, played_until = null where id = 1 and played_by = $1",
        )
        .bind(&self.token)
        .execute(self.db.writes())
        .await?;
        Ok(())
    }
}

/// Moves the shared test clock forward by `ms` for every instance on the database, and this
/// instance's clock at once; returns the new time. A clock that is not shared is a 409
/// `invalid_state`: the server was not started with `--test-clock`.
pub async fn advance(db: &Db, clock: &Clock, ms: i64) -> Result<i64, ApiError> {
    require_shared(clock)?;
    // One row, created on first use by the same statement that adds to it, so two instances
    // advancing at once both count, the very first time too (an update then an insert raced).
    let mut tx = db.begin_write().await?;
    sqlx::query(
        "insert into test_clock (id, offset_ms) values (1, $1) \
         on conflict (id) do update set offset_ms = test_clock.offset_ms + excluded.offset_ms",
    )
    .bind(ms)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    clock.sync(db).await?;
    Ok(clock.now_ms())
}
