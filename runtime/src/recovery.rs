//! Recovery: giving back what a dead process held.
//!
//! Dispatch keeps an action's work in one transaction, so a crash mid-action leaves nothing to
//! undo. What a process commits *before* its work, so that others see it (a list marked
//! `processing`, credits held for a durable job), carries a lease instead; when the process dies
//! the lease lapses, and the recoveries here put those rows back. The runtime recovers what it
//! owns (lapsed credit holds, running jobs whose lease lapsed); the domain registers its own with [`recovery!`](crate::recovery),
//! beside the code that makes such marks. Every instance runs them on start and then every
//! [`EVERY`]; they act only on lapsed leases, so running them on several instances at once, or
//! while the holder is still alive, changes nothing.

use std::time::Duration;

use crate::clock::Clock;
use crate::db::Db;
use crate::error::ApiError;
use crate::registry::BoxFuture;
use crate::{credits, jobs, lease};

/// How often the recoveries run after the first round on start.
pub const EVERY: Duration = Duration::from_secs(30);

/// When the second round runs after start: once every lease a process that died just before
/// could have left has lapsed (a lease lasts [`lease::LEASE_MS`]), with a second to spare.
pub const AFTER_START: Duration = Duration::from_millis(lease::LEASE_MS.unsigned_abs() + 1_000);

/// Puts back what lapsed leases held; returns how many rows it recovered.
pub type RecoverFn = for<'a> fn(&'a Db, &'a Clock) -> BoxFuture<'a, Result<u64, ApiError>>;

/// One registered recovery. Made by [`recovery!`](crate::recovery).
pub struct Recovery {
    pub name: &'static str,
    pub run: RecoverFn,
}

inventory::collect!(Recovery);

/// Registers an `async fn(&Db, &Clock) -> Result<u64, ApiError>` as a recovery.
#[macro_export]
macro_rules! recovery {
    ($name:literal, $function:path) => {
        $crate::__private::inventory::submit! {
            $crate::recovery::Recovery {
                name: $name,
                run: |db, clock| ::std::boxed::Box::pin($function(db, clock)),
            }
        }
    };
}

/// Runs every recovery once; a failure is logged and the others still run.
pub async fn run_all(db: &Db, clock: &Clock) -> u64 {
    let mut recovered = 0;
    match credits::release_lapsed_holds(db, clock).await {
        Ok(count) => recovered += count,
        Err(error) => {
            tracing::warn!(error = %error.message, cause = ?error.internal, "could not release lapsed credit holds");
        }
    }
    match jobs::rescue(db, clock).await {
        Ok(count) => recovered += count,
        Err(error) => {
            tracing::warn!(error = %error.message, cause = ?error.internal, "could not rescue jobs whose lease lapsed");
        }
    }
    for recovery in inventory::iter::<Recovery> {
        match (recovery.run)(db, clock).await {
            Ok(count) => recovered += count,
            Err(error) => {
                tracing::warn!(recovery = recovery.name, error = %error.message, cause = ?error.internal, "recovery failed");
            }
        }
    }
    if recovered > 0 {
        tracing::info!(recovered, "recovered what lapsed leases held");
    }
    recovered
}
