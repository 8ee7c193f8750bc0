//! Time, behind a handle tests can move.
//!
//! Every time-dependent rule (key expiry, last-used throttling, idempotency windows, token
//! lifetimes) reads [`Clock::now_ms`] rather than the system clock, so a test can jump a day ahead
//! without sleeping. Times are integer milliseconds since the Unix epoch in storage and RFC 3339
//! UTC strings on the wire.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The system clock plus an offset that only tests change.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    offset_ms: Arc<AtomicI64>,
}

impl Clock {
    pub fn now_ms(&self) -> i64 {
        let system = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        system + self.offset_ms.load(Ordering::Relaxed)
    }

    /// Moves this clock (and every clone of it) forward by `ms`.
    pub fn advance_ms(&self, ms: i64) {
        self.offset_ms.fetch_add(ms, Ordering::Relaxed);
    }
}

/// Formats epoch milliseconds as RFC 3339 UTC with millisecond precision.
pub fn rfc3339(ms: i64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    let time =
        OffsetDateTime::from_unix_timestamp_nanos(nanos).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    time.format(&format).unwrap_or_default()
}

/// Parses an RFC 3339 timestamp into epoch milliseconds.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let time = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    i64::try_from(time.unix_timestamp_nanos() / 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_round_trip() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(
            parse_rfc3339("2023-11-14T22:13:20.123Z"),
            Some(1_700_000_000_123)
        );
        assert_eq!(
            parse_rfc3339("2023-11-14T23:13:20.123+01:00"),
            Some(1_700_000_000_123)
        );
        assert_eq!(parse_rfc3339("yesterday"), None);
    }

    #[test]
    fn advancing_moves_every_clone() {
        let clock = Clock::default();
        let other = clock.clone();
        let before = other.now_ms();
        clock.advance_ms(86_400_000);
        assert!(other.now_ms() - before >= 86_400_000);
    }
}
