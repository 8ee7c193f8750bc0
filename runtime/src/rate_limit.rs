//! Requests per credential: a token bucket per credential id, per instance, in memory.
//!
//! The limit runs after authentication, so it is keyed by who is calling (an API key or an OAuth
//! grant), never by an address a proxy may share; an unauthenticated request is refused by auth
//! before it costs a bucket. Buckets live in this process (the `governor` crate's GCRA, which is
//! a token bucket without a timer task): with N instances behind a load balancer a credential
//! may make up to N times the configured rate, which docs/configuration.md says. Keeping it in
//! memory keeps the database out of every request's way; a shared limit would need a store
//! every instance reaches, and is not worth a round trip per call at this service's scale.
//!
//! Every answer carries the IETF `RateLimit-Policy` and `RateLimit` fields
//! (draft-ietf-httpapi-ratelimit-headers): the quota `q` is the burst, the window `w` the seconds
//! an empty bucket takes to fill; `r` is what remains now and `t` the seconds until the bucket
//! is full again. A refusal is 429 `rate_limited` with `Retry-After` and `retry_after` in the
//! body.

use std::num::NonZeroU32;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::{Quota, RateLimiter};

use crate::config::RateLimit;
use crate::error::{ApiError, ErrorCode};
use crate::principal::Principal;
use crate::request_id::request_id;

type Buckets = RateLimiter<
    String,
    governor::state::keyed::DefaultKeyedStateStore<String>,
    DefaultClock,
    StateInformationMiddleware,
>;

/// Forget buckets that are full again once there are this many, so the map does not grow with
/// every credential ever seen.
const RETAIN_ABOVE: usize = 10_000;

/// The per-instance buckets; `None` inside when the limit is off.
#[derive(Clone)]
pub struct Limiter(Option<Arc<Inner>>);

struct Inner {
    buckets: Buckets,
    clock: DefaultClock,
    limit: RateLimit,
    policy: HeaderValue,
}

impl Limiter {
    pub fn new(limit: RateLimit) -> Self {
        let (Some(per_second), Some(burst)) = (
            NonZeroU32::new(limit.per_second),
            NonZeroU32::new(limit.burst),
        ) else {
            return Self(None);
        };
        let quota = Quota::per_second(per_second).allow_burst(burst);
        let window = limit.burst.div_ceil(limit.per_second);
        let policy =
            HeaderValue::from_str(&format!("\"per-credential\";q={};w={window}", limit.burst))
                .unwrap_or_else(|_| HeaderValue::from_static("\"per-credential\""));
        Self(Some(Arc::new(Inner {
            buckets: RateLimiter::dashmap(quota).with_middleware::<StateInformationMiddleware>(),
            clock: DefaultClock::default(),
            limit,
            policy,
        })))
    }
}

impl Inner {
    /// Takes one request from the credential's bucket: the headers to send, or the refusal.
    fn take(&self, credential_id: &String) -> Result<HeaderMap, ApiError> {
        if self.buckets.len() > RETAIN_ABOVE {
            self.buckets.retain_recent();
        }
        match self.buckets.check_key(credential_id) {
            Ok(snapshot) => {
                let remaining = snapshot.remaining_burst_capacity();
                let used = self.limit.burst.saturating_sub(remaining);
                Ok(self.headers(remaining, used.div_ceil(self.limit.per_second)))
            }
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.clock.now());
                let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                let seconds = seconds.max(1);
                let mut error = ApiError::new(
                    ErrorCode::RATE_LIMITED,
                    format!(
                        "Too many requests for this credential: the limit is {} a second with bursts of {}. Retry in {seconds} s.",
                        self.limit.per_second, self.limit.burst
                    ),
                )
                .with_extra("retry_after", seconds);
                // Empty now: the whole burst is the time to full.
                let full = self.limit.burst.div_ceil(self.limit.per_second);
                for (name, value) in &self.headers(0, full) {
                    error.headers.push((name.clone(), value.clone()));
                }
                Err(error.with_header(header::RETRY_AFTER, &seconds.to_string()))
            }
        }
    }

    fn headers(&self, remaining: u32, reset_seconds: u32) -> HeaderMap {
        let mut headers = HeaderMap::with_capacity(2);
        headers.insert("ratelimit-policy", self.policy.clone());
        if let Ok(value) = HeaderValue::from_str(&format!(
            "\"per-credential\";r={remaining};t={reset_seconds}"
        )) {
            headers.insert("ratelimit", value);
        }
        headers
    }
}

impl Limiter {
    /// Takes one request from the credential's bucket, after authentication: the headers to add
    /// to the answer, or the 429 to send instead (boxed: a refusal is the rare, large case). With
    /// the limit off, no headers.
    pub fn admit(
        &self,
        principal: &Principal,
        request: &Request,
    ) -> Result<HeaderMap, Box<Response>> {
        let Some(inner) = &self.0 else {
            return Ok(HeaderMap::new());
        };
        inner
            .take(&principal.credential_id)
            .map_err(|error| Box::new(error.log(&request_id(request)).into_response()))
    }
}
