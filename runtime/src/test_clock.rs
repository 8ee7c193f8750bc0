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

/// Moves the shared test clock forward by `ms` for every instance on the database, and this
/// instance's clock at once; returns the new time. A clock that is not shared is a 409
/// `invalid_state`: the server was not started with `--test-clock`.
pub async fn advance(db: &Db, clock: &Clock, ms: i64) -> Result<i64, ApiError> {
    if !clock.is_shared() {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            "The clock cannot be moved: the server was not started with --test-clock. Start it with \
             `outreach serve --test-clock` (refused in production) to use advance_clock.",
        ));
    }
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
