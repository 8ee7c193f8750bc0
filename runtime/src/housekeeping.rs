//! Deleting what has outlived its use, now and then, for as long as the server runs.
//!
//! Every instance runs the same deletions; they are idempotent, so several instances on one
//! database only repeat each other's work. What is kept, and for how long, is decided here in one
//! place: idempotency records for their 24-hour window; sessions until they expire, and a new
//! key's show-once value past its five minutes even if the session never comes back; failed
//! sign-ins for a day (the throttle looks back 15 minutes); OAuth tokens for a day past their
//! expiry, so a late replay still meets its row and is recognised as one; authorization codes for
//! 30 days past theirs, as long as a refresh token issued from one can live, so a replayed code
//! still revokes what it issued; finished jobs for a day, discarded ones for a week. A crate of
//! actions adds the deletions of its own tables with [`purge!`](crate::purge) (events, kept 30 days).

use std::sync::Arc;
use std::time::Duration;

use crate::db::Db;
use crate::error::ApiError;
use crate::registry::BoxFuture;
use crate::state::AppState;
use crate::{idempotency, jobs, recovery};

/// Deletes a domain's rows that have outlived their use at `now_ms`; returns how many went.
pub type PurgeFn = for<'a> fn(&'a Db, i64) -> BoxFuture<'a, Result<u64, ApiError>>;

/// One deletion a crate of actions registers for its own tables (the runtime names none). Made by
/// [`purge!`](crate::purge).
pub struct Purge {
    pub name: &'static str,
    pub run: PurgeFn,
}

inventory::collect!(Purge);

/// Registers an `async fn(&Db, now_ms: i64) -> Result<u64, ApiError>` to run with the deletions.
#[macro_export]
macro_rules! purge {
    ($name:literal, $function:path) => {
        $crate::__private::inventory::submit! {
            $crate::housekeeping::Purge {
                name: $name,
                run: |db, now_ms| ::std::boxed::Box::pin($function(db, now_ms)),
            }
        }
    };
}

/// How often the deletions run.
const EVERY: Duration = Duration::from_secs(600);

/// How long past its expiry a row is kept.
const GRACE_MS: i64 = 24 * 60 * 60 * 1000;

/// How long past its expiry a code is kept: as long as a refresh token issued from it can live,
/// so a replay of the code revokes that refresh token's grant however late it comes.
const CODE_GRACE_MS: i64 = crate::oauth::REFRESH_TOKEN_LIFETIME_MS;

/// Runs the recoveries at once and every [`recovery::EVERY`], and the deletions every [`EVERY`],
/// until the task is aborted.
pub async fn run(state: Arc<AppState>) {
    // The first deletions come one period after start, not at once: a starting server has more
    // urgent work, and nothing expires in the first ten minutes that cannot wait ten more. What a
    // dead process held is given back at once, and then often: a lease lapses in seconds.
    let start = tokio::time::Instant::now();
    let mut purges = tokio::time::interval_at(start + EVERY, EVERY);
    let mut recoveries = tokio::time::interval_at(start, recovery::EVERY);
    // A process that died just before this one started (a restart) left leases that are still
    // running: they lapse within one lease, so the round after the first comes then, not a
    // whole period later, and what they held is free within seconds of the start.
    let lapsed = tokio::time::sleep(recovery::AFTER_START);
    tokio::pin!(lapsed);
    let mut lapsed_done = false;
    loop {
        tokio::select! {
            _ = recoveries.tick() => {
                recovery::run_all(&state.db, &state.clock).await;
            }
            () = &mut lapsed, if !lapsed_done => {
                lapsed_done = true;
                recovery::run_all(&state.db, &state.clock).await;
            }
            _ = purges.tick() => match purge(&state).await {
                Ok(0) => {}
                Ok(purged) => tracing::info!(purged, "purged expired rows"),
                Err(error) => tracing::warn!(error = %error.message, "could not purge expired rows"),
            },
        }
    }
}

/// One round of deletions; returns how many rows went.
pub async fn purge(state: &AppState) -> Result<u64, ApiError> {
    let now = state.clock.now_ms();
    let mut purged = idempotency::purge(&state.db, &state.clock).await?;
    purged += jobs::purge(&state.db, &state.clock).await?;
    let statements: [(&str, i64); 6] = [
        ("delete from web_sessions where expires_at < $1", now),
        // The MCP face's questions nobody answered in time (`crate::confirmations`).
        ("delete from mcp_confirmations where expires_at < $1", now),
        (
            "update web_sessions set flash = null, flash_expires_at = null \
             where flash_expires_at <= $1",
            now,
        ),
        (
            "delete from sign_in_failures where failed_at < $1",
            now - GRACE_MS,
        ),
        (
            "delete from oauth_codes where expires_at < $1",
            now - CODE_GRACE_MS,
        ),
        (
            "delete from oauth_tokens where expires_at < $1",
            now - GRACE_MS,
        ),
    ];
    for (sql, before) in statements {
        purged += sqlx::query(sql)
            .bind(before)
            .execute(state.db.writes())
            .await?
            .rows_affected();
    }
    for registered in inventory::iter::<Purge> {
        match (registered.run)(&state.db, now).await {
            Ok(count) => purged += count,
            Err(error) => {
                tracing::warn!(purge = registered.name, error = %error.message, "could not purge");
            }
        }
    }
    Ok(purged)
}
