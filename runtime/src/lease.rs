//! Keeping a lease alive while the work that holds it runs.
//!
//! A hold on a shared row (an idempotency claim, a list being processed, credits kept for a job)
//! carries the time it lapses, so a process that dies releases it within seconds without anyone
//! noticing the death. The living holder renews it on a timer: [`Heartbeat`] runs the renewal
//! on its own task until it is dropped, which is when the work ends, however it ends.

use std::future::Future;
use std::time::Duration;

use crate::error::ApiError;

/// How long a hold lasts without a renewal: how soon, after a crash, what it held is free again.
pub const LEASE_MS: i64 = 5_000;

/// Real time in epoch milliseconds: the clock of leases, which a test clock never moves.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// How often a living holder renews, well inside [`LEASE_MS`].
pub const RENEW_EVERY: Duration = Duration::from_secs(1);

/// Renews a lease every period until dropped.
#[must_use = "the lease is renewed only while the heartbeat is alive"]
pub struct Heartbeat(tokio::task::JoinHandle<()>);

impl Heartbeat {
    /// Calls `renew` every [`RENEW_EVERY`] (first after one period) on a task of its own. A failed
    /// renewal is logged and tried again next period: the lease is several periods long.
    pub fn start<F, Fut>(what: &'static str, renew: F) -> Self
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), ApiError>> + Send + 'static,
    {
        Self(tokio::spawn(async move {
            let every = RENEW_EVERY;
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if let Err(error) = renew().await {
                    tracing::warn!(what, error = %error.message, cause = ?error.internal, "could not renew a lease");
                }
            }
        }))
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.0.abort();
    }
}
