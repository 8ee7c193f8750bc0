//! Transient conflicts, retried in place.
//!
//! PostgreSQL ends a transaction that deadlocked or could not be serialized beside another one
//! (SQLSTATE `40P01`, `40001`: [`crate::error::ApiError::contention`]). Nothing of it was kept, and the same
//! work run again usually succeeds at once. So that a client does not have to resend a request
//! (a 409 `retryable: true`) and a job does not wait out a backoff and spend an attempt, dispatch
//! and the worker run such work again where it failed: at most [`TRIES`] times in all, after a
//! short random pause that grows with each try, so the two sides of a deadlock do not meet again.
//!
//! Only work that reached nothing outside the database is run again: a request (actions make no
//! network call, and their writes are one transaction that rolled back), and a job run that has
//! committed nothing yet (a job commits what must be durable before it calls the network,
//! [`crate::jobs::JobCtx::commit`], and from then on a failure goes back to the queue, whose next
//! attempt reconciles). The retries and the conflicts that ran out of tries are counted in
//! `/metrics` as `outreach_transient_retries_total{face, outcome}`.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use rand::Rng;
use serde_json::Value;

/// Runs of one piece of work, the first included.
pub const TRIES: u32 = 4;

/// The longest pause before the first retry; each further retry doubles it (10, 20, 40 ms).
const FIRST_PAUSE_MS: u64 = 10;

/// The largest input (in bytes of its text) that dispatch keeps to run a call again: above it (an
/// import's CSV) the input is not held twice, and a conflict is answered as one.
const MAX_KEPT_INPUT_BYTES: usize = 256 * 1024;

/// Whether a call's input is small enough to keep for running the call again.
pub fn worth_keeping(input: &Value) -> bool {
    let mut left = MAX_KEPT_INPUT_BYTES;
    let mut stack = vec![input];
    while let Some(value) = stack.pop() {
        let size = match value {
            Value::String(text) => text.len(),
            Value::Array(items) => {
                stack.extend(items);
                items.len()
            }
            Value::Object(fields) => {
                stack.extend(fields.values());
                fields.keys().map(String::len).sum()
            }
            _ => 8,
        };
        let Some(rest) = left.checked_sub(size) else {
            return false;
        };
        left = rest;
    }
    true
}

/// Waits before retry number `retry` (from 1): a random time up to 10 ms doubled per retry.
pub async fn pause(retry: u32) {
    let ceiling = FIRST_PAUSE_MS << retry.saturating_sub(1).min(6);
    let wait = rand::rng().random_range(1..=ceiling);
    tokio::time::sleep(Duration::from_millis(wait)).await;
}

/// Where a conflict was retried.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Face {
    /// A REST or MCP call, in dispatch.
    Request,
    /// A job's run, in the worker.
    Job,
}

impl Face {
    fn label(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Job => "job",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RetryLabels {
    face: &'static str,
    outcome: &'static str,
}

/// This instance's counts of conflicts retried in place (`outcome="retried"`) and of those that
/// ran out of tries and were answered or queued as failures (`outcome="exhausted"`).
#[derive(Clone, Default)]
pub struct Retries {
    counts: Family<RetryLabels, Counter>,
}

impl Retries {
    /// Adds the counters to an instance's metrics registry.
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "outreach_transient_retries",
            "Transient database conflicts (deadlock, serialization failure) by face (request, job): retried in place, or exhausted after every try",
            self.counts.clone(),
        );
    }

    pub fn retried(&self, face: Face) {
        self.add(face, "retried");
    }

    pub fn exhausted(&self, face: Face) {
        self.add(face, "exhausted");
    }

    /// The count so far of one face and outcome (`retried` or `exhausted`).
    pub fn get(&self, face: Face, outcome: &'static str) -> u64 {
        self.counts
            .get_or_create(&RetryLabels {
                face: face.label(),
                outcome,
            })
            .get()
    }

    fn add(&self, face: Face, outcome: &'static str) {
        self.counts
            .get_or_create(&RetryLabels {
                face: face.label(),
                outcome,
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn large_inputs_are_not_kept() {
        assert!(worth_keeping(
            &json!({"name": "Q3", "ids": ["a", "b"], "n": 3})
        ));
        assert!(!worth_keeping(
            &json!({"csv": "x".repeat(MAX_KEPT_INPUT_BYTES + 1)})
        ));
        let many: Vec<Value> = (0..MAX_KEPT_INPUT_BYTES / 8).map(|i| json!(i)).collect();
        assert!(!worth_keeping(&json!({ "ids": many })));
    }
}
